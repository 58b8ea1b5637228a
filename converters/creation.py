"""Tensor creation ops.

Ops whose arguments are all Python values produce the same tensor on every call, so the
converter runs the op itself and stores the result as a constant (TensorRT folds it further).
Ops shaped like another tensor use Expand over that tensor's runtime shape.
"""
from __future__ import annotations

from typing import Any

import torch

from converters.builder import GraphBuilder, Value
from converters.registry import converter

aten = torch.ops.aten


@converter(
    aten.arange.default,
    aten.arange.start,
    aten.arange.start_step,
    aten.scalar_tensor.default,
    aten.full.default,
    aten.zeros.default,
    aten.ones.default,
    aten.empty.memory_format,
)
def constant_creation(b: GraphBuilder, *args: Any, **kwargs: Any) -> Value:
    """arange / scalar_tensor / full / zeros / ones / empty with constant arguments.

    `empty` is materialised as zeros: its contents are unspecified, zeros are a valid choice.
    """
    assert b.node is not None
    kwargs = {**kwargs, "device": "cpu"}
    target = aten.zeros.default if b.node.target is aten.empty.memory_format else b.node.target
    if target is aten.zeros.default:
        kwargs.pop("memory_format", None)
    value = target(*args, **kwargs)  # type: ignore[operator]
    return b.const(value.numpy(), value.dtype)


def _filled_like(b: GraphBuilder, x: Value, fill: Any) -> Value:
    dtype = b.out.dtype
    return b.op("Expand", b.const(fill, dtype), b.op("Shape", x), dtype=dtype)


@converter(aten.full_like.default)
def full_like(b: GraphBuilder, x: Value, fill_value: Any, **kwargs: Any) -> Value:
    """full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None,
    Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"""
    return _filled_like(b, x, fill_value)


@converter(aten.zeros_like.default, aten.empty_like.default)
def zeros_like(b: GraphBuilder, x: Value, **kwargs: Any) -> Value:
    """zeros_like(Tensor self, *, ScalarType? dtype=None, ...) -> Tensor  (empty_like: zeros too)"""
    return _filled_like(b, x, 0)


@converter(aten.ones_like.default)
def ones_like(b: GraphBuilder, x: Value, **kwargs: Any) -> Value:
    """ones_like(Tensor self, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _filled_like(b, x, 1)
