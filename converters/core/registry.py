"""Converter registration and lookup.

The decorator is the registration: `@converter(aten.relu.default)` above a function that turns
one ATen overload into ONNX nodes. An optional `capability` function sits beside it and returns
a human reason when it refuses a particular node (the splitter shows that reason to the user);
it is given the TensorRT target, whose ONNX parser limits what a converter may emit.
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Any, Callable, Optional, TypeVar

import torch
from torch._ops import OpOverload

from converters.core.builder import GraphBuilder
from converters.core.target import Target

ConverterFn = Callable[..., Any]
Fn = TypeVar("Fn", bound=ConverterFn)
Capability = Callable[[torch.fx.Node, Target], Optional[str]]


@dataclass(frozen=True)
class Converter:
    target: Any  # an OpOverload, or an `operator` function on sizes
    fn: ConverterFn
    capability: Capability | None


_REGISTRY: dict[Any, Converter] = {}


def converter(*targets: Any, capability: Capability | None = None) -> Callable[[Fn], Fn]:
    """Register `fn` as the converter of each of `targets` (overloads that share a body)."""

    def register(fn: Fn) -> Fn:
        for target in targets:
            if target in _REGISTRY:
                raise RuntimeError(f"two converters registered for {target}")
            _REGISTRY[target] = Converter(target, fn, capability)
        return fn

    return register


@functools.cache
def _families() -> dict[Any, Converter]:
    """The registry, with every op family of converters/ops/ imported (registered) first."""
    importlib.import_module("converters.ops")
    return _REGISTRY


def lookup(target: Any) -> Converter | None:
    return _families().get(target)


def supported_ops() -> frozenset[OpOverload]:
    """The ATen overloads that have a converter (not counting Python's size arithmetic)."""
    return frozenset(t for t in _families() if isinstance(t, OpOverload))


def run(builder: GraphBuilder, node: torch.fx.Node, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    conv = _families()[node.target]
    builder.node = node
    try:
        return conv.fn(builder, *args, **kwargs)
    finally:
        builder.node = None
