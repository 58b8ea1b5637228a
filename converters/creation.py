"""Tensor creation ops.

Ops whose arguments are all Python values produce the same tensor on every call: it is stored
as a constant (TensorRT folds it further). Ops shaped like another tensor, or sized by a size
known only at run time, use Expand over that shape.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from converters.builder import GraphBuilder, Value
from converters.registry import converter

aten = torch.ops.aten


def _computed(b: GraphBuilder, *args: Any, **kwargs: Any) -> Value:
    """Run the op on its constant arguments; the result is an initializer."""
    assert b.node is not None
    value = b.node.target(*args, **{**kwargs, "device": "cpu"})  # type: ignore[operator]
    return b.const(value.numpy(), value.dtype)


@converter(aten.arange.default, aten.arange.start, aten.arange.start_step)
def arange(b: GraphBuilder, *args: Any, **kwargs: Any) -> Value:
    """arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None, ...) -> Tensor

    A Range when a bound is a size known only at run time; otherwise a constant.
    """
    if not any(isinstance(a, Value) for a in args):
        return _computed(b, *args, **kwargs)
    start, end, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    dtype = b.out.dtype
    bounds = [b.cast(v, dtype) if isinstance(v, Value) else b.const(v, dtype) for v in (start, end, step)]
    return b.op("Range", *bounds, dtype=dtype)


@converter(aten.scalar_tensor.default)
def scalar_tensor(b: GraphBuilder, *args: Any, **kwargs: Any) -> Value:
    """scalar_tensor(Scalar s, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _computed(b, *args, **kwargs)


def _filled(b: GraphBuilder, size: Sequence[int | Value], fill: Any) -> Value:
    """`fill` in the shape `size`: a constant when the size is known, else expanded at run time."""
    if all(isinstance(d, int) for d in size):
        return b.const(np.full(list(size), fill), b.out.dtype)
    return b.op("Expand", b.const(fill, b.out.dtype), b.shape_tensor(size), dtype=b.out.dtype)


@converter(aten.full.default)
def full(b: GraphBuilder, size: Sequence[int | Value], fill_value: Any, **kwargs: Any) -> Value:
    """full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _filled(b, size, fill_value)


@converter(aten.zeros.default, aten.empty.memory_format)
def zeros(b: GraphBuilder, size: Sequence[int | Value], **kwargs: Any) -> Value:
    """zeros(SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor

    `empty` too: its contents are unspecified, zeros are a valid choice.
    """
    return _filled(b, size, 0)


@converter(aten.ones.default)
def ones(b: GraphBuilder, size: Sequence[int | Value], **kwargs: Any) -> Value:
    """ones(SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _filled(b, size, 1)


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
