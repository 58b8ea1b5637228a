"""Converter registration and lookup.

The decorator is the registration: `@converter(aten.relu.default)` above a function that turns
one ATen overload into ONNX nodes. An optional `capability` function sits beside it and returns
a human reason when it refuses a particular node (the splitter shows that reason to the user);
it is given the TensorRT target, whose ONNX parser limits what a converter may emit.

An op of a library that may not be loaded (transformers' `grouped_mm_fallback`) is registered by
its name, `"transformers.grouped_mm_fallback.default"` (str() of its OpOverload), so that importing
the converters does not import the library.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Any, Callable, Optional, TypeVar

import torch
from torch._ops import OpOverload

from converters.core.builder import GraphBuilder
from converters.core.target import TrtTarget

ConverterFn = Callable[..., Any]
Fn = TypeVar("Fn", bound=ConverterFn)
Capability = Callable[[torch.fx.Node, TrtTarget], Optional[str]]


@dataclass(frozen=True)
class Converter:
    target: Any  # an OpOverload, an op's name (str), or an `operator` function on sizes
    fn: ConverterFn
    capability: Capability | None
    user: bool = False  # registered by a user (trt_lower.converter), not one of converters/ops/
    plugin: str | None = None  # the TensorRT plugin its ONNX names (a user's option)


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


def set_converter(entry: Converter) -> None:
    """Register `entry`, replacing any converter of its target (converters/core/user.py)."""
    _REGISTRY[entry.target] = entry


def lookup_name(name: str) -> Converter | None:
    """The converter of the op named `name` ("ns.op.overload"), where it is registered."""
    op = _loaded(name)
    return lookup(op) if op is not None else _families().get(name)


def lookup(target: Any) -> Converter | None:
    found = _families().get(target)
    if found is None and isinstance(target, OpOverload):
        found = _REGISTRY.get(str(target))
    return found


def _loaded(name: str) -> OpOverload | None:
    """The OpOverload named `name` ("ns.op.overload") where its library is loaded, else None."""
    parts = name.split(".")
    if len(parts) != 3:
        return None
    namespace, op, overload = parts
    try:
        found = getattr(getattr(getattr(torch.ops, namespace), op), overload)
    except (AttributeError, RuntimeError):
        return None
    return found if isinstance(found, OpOverload) else None


def supported_ops() -> frozenset[OpOverload]:
    """The overloads that have a converter (not counting Python's size arithmetic); those
    registered by name only where their library is loaded."""
    named = (_loaded(t) for t in _families() if isinstance(t, str))
    return frozenset(t for t in (*_families(), *named) if isinstance(t, OpOverload))


def run(builder: GraphBuilder, node: torch.fx.Node, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    conv = lookup(node.target)
    if conv is None:
        raise KeyError(f"no converter for {node.target}")
    builder.node = node
    try:
        return conv.fn(builder, *args, **kwargs)
    finally:
        builder.node = None
