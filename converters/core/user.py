"""Converters users register for their own ops (`torch.library` custom ops, Triton or CUDA kernels):
the public `trt_lower.converter`. A user's converter writes ONNX through the GraphBuilder the
built-in ones use (docs/custom_converters.md), or names a TensorRT plugin (`plugin=`), which only
TensorRT runs: on ONNX Runtime such an op stays eager, with the reason.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional, TypeVar

import torch
from torch._ops import OpOverload, OpOverloadPacket

from converters.core import registry
from converters.core.target import TrtTarget

Fn = TypeVar("Fn", bound=registry.ConverterFn)
UserCapability = Callable[[torch.fx.Node], Optional[str]]


def _overloads(op: Any) -> list[OpOverload]:
    if isinstance(op, OpOverload):
        return [op]
    if isinstance(op, OpOverloadPacket):
        return [getattr(op, name) for name in op.overloads()]  # type: ignore[no-untyped-call]
    raise TypeError(
        f"trt_lower.converter takes an op (torch.ops.mylib.op or one of its overloads), got {type(op).__name__} {op!r}"
    )


def converter(op: Any, *, capability: UserCapability | None = None, plugin: str | None = None) -> Callable[[Fn], Fn]:
    """Register the decorated function as the converter of `op` (every overload of a packet).

    The function is called as `fn(builder, *args, **kwargs)` with the op's arguments, tensors as
    `Value`s (name, dtype, shape), and returns the ONNX value(s) of its output(s), emitted through
    `builder` (`builder.op("Mul", x, y)`, `builder.const(2.0, torch.float32)`, ...).
    capability: `capability(node)` returns why a node cannot be converted (the node stays eager and
    the report shows the reason) or None.
    plugin: the name of the TensorRT plugin the function emits (`builder.plugin(name, ...)`);
    refused on ONNX Runtime, which has no TensorRT plugins.
    Registering an op again replaces a converter the user registered; a built-in one is kept.
    """
    overloads = _overloads(op)

    def check(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
        return capability(node) if capability is not None else None

    def register(fn: Fn) -> Fn:
        for overload in overloads:
            known = registry.lookup(overload)
            if known is not None and not known.user:
                raise ValueError(
                    f"{overload} has a built-in converter; trt_lower.converter registers ops that have none"
                )
            registry.set_converter(registry.Converter(overload, fn, check, user=True, plugin=plugin))
        return fn

    return register


def user_ops(ops: Iterable[str]) -> list[str]:
    """Those of `ops` (names as reports give them) whose converter a user registered."""
    return sorted({op for op in ops if (c := registry.lookup_name(op)) is not None and c.user})


def plugin_refusals(gm: torch.fx.GraphModule, backend: str) -> dict[str, str]:
    """The nodes whose converter emits a TensorRT plugin, by name, with why they stay eager on
    `backend` ("onnxruntime"); none on TensorRT."""
    if backend == "tensorrt":
        return {}
    refused = {}
    for node in gm.graph.nodes:
        found = registry.lookup(node.target) if isinstance(node.target, OpOverload) else None
        if found is not None and found.plugin is not None:
            refused[node.name] = (
                f"its converter emits TensorRT plugin '{found.plugin}' (trt_lower.converter(..., "
                f"plugin=)), which only TensorRT runs, not {backend}"
            )
    return refused
