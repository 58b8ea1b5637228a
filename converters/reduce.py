"""Reductions over dims.

In opset 17 ReduceSum takes its axes as an input (an initializer, as TensorRT wants) while
ReduceMean/Max/Min/Prod take them as an attribute.
"""
from __future__ import annotations

from typing import Sequence

import torch

from converters._common import nan_propagated, normalize_dim
from converters.builder import GraphBuilder, Value
from converters.registry import converter

aten = torch.ops.aten


def _axes(x: Value, dim: int | Sequence[int] | None) -> list[int]:
    if dim is None or (not isinstance(dim, int) and len(dim) == 0):
        return list(range(x.rank))
    dims = [dim] if isinstance(dim, int) else dim
    return sorted(normalize_dim(d, x.rank) for d in dims)


def _reduce(b: GraphBuilder, op_type: str, x: Value, dim: int | Sequence[int] | None, keepdim: bool,
            compute_dtype: torch.dtype) -> Value:
    x = b.cast(x, compute_dtype)
    axes = _axes(x, dim)
    if x.rank == 0:
        out = b.op("Identity", x)
    elif op_type == "ReduceSum":
        out = b.op(op_type, x, b.ints(axes), keepdims=int(keepdim))
    elif op_type == "ReduceMean" and any(x.shape[a] == 0 for a in axes):  # type: ignore[index]
        # torch's mean of no elements is NaN (0 / 0), ONNX Runtime's ReduceMean gives 0.
        total = b.op("ReduceSum", x, b.ints(axes), keepdims=int(keepdim))
        out = b.op("Div", total, b.const(0, compute_dtype))
    else:
        out = b.op(op_type, x, axes=axes, keepdims=int(keepdim), dtype=compute_dtype)
        if op_type in ("ReduceMax", "ReduceMin") and compute_dtype.is_floating_point:
            out = nan_propagated(b, x, out, axes, keepdim)
    return b.cast(Value(out.name, compute_dtype), b.out.dtype)


@converter(aten.mean.dim)
def mean_dim(b: GraphBuilder, x: Value, dim: Sequence[int] | None, keepdim: bool = False, *,
             dtype: torch.dtype | None = None) -> Value:
    """mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"""
    return _reduce(b, "ReduceMean", x, dim, keepdim, b.out.dtype)


@converter(aten.mean.default)
def mean(b: GraphBuilder, x: Value, *, dtype: torch.dtype | None = None) -> Value:
    """mean(Tensor self, *, ScalarType? dtype=None) -> Tensor"""
    return _reduce(b, "ReduceMean", x, None, False, b.out.dtype)


@converter(aten.sum.dim_IntList)
def sum_dim(b: GraphBuilder, x: Value, dim: Sequence[int] | None, keepdim: bool = False, *,
            dtype: torch.dtype | None = None) -> Value:
    """sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"""
    return _reduce(b, "ReduceSum", x, dim, keepdim, b.out.dtype)


@converter(aten.sum.default)
def sum_(b: GraphBuilder, x: Value, *, dtype: torch.dtype | None = None) -> Value:
    """sum(Tensor self, *, ScalarType? dtype=None) -> Tensor"""
    return _reduce(b, "ReduceSum", x, None, False, b.out.dtype)


def _ordered(x: Value) -> torch.dtype:
    """The dtype to take a max/min in: opset 17 ReduceMax/Min have no bool, so bools go via int32."""
    return torch.int32 if x.dtype == torch.bool else x.dtype  # type: ignore[return-value]


@converter(aten.amax.default)
def amax(b: GraphBuilder, x: Value, dim: Sequence[int] = (), keepdim: bool = False) -> Value:
    """amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor"""
    return _reduce(b, "ReduceMax", x, dim, keepdim, _ordered(x))


@converter(aten.amin.default)
def amin(b: GraphBuilder, x: Value, dim: Sequence[int] = (), keepdim: bool = False) -> Value:
    """amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor"""
    return _reduce(b, "ReduceMin", x, dim, keepdim, _ordered(x))


def _truth(b: GraphBuilder, x: Value) -> Value:
    """x != 0 as int32 0/1 (opset 17 has no boolean ReduceMax/Min)."""
    return b.cast(b.cast(x, torch.bool), torch.int32)


@converter(aten.any.dim, aten.any.dims, aten.any.default)
def any_(b: GraphBuilder, x: Value, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Value:
    """any.dim(Tensor self, int dim, bool keepdim=False) -> Tensor"""
    return _reduce(b, "ReduceMax", _truth(b, x), dim, keepdim, torch.int32)


@converter(aten.all.dim, aten.all.dims, aten.all.default)
def all_(b: GraphBuilder, x: Value, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Value:
    """all.dim(Tensor self, int dim, bool keepdim=False) -> Tensor"""
    return _reduce(b, "ReduceMin", _truth(b, x), dim, keepdim, torch.int32)
