"""Tensor creation ops, fill, copy and type_as.

Ops whose arguments are all Python values produce the same tensor on every call: it is stored
as a constant (TensorRT folds it further). Ops shaped like another tensor, or sized by a size
known only at run time, use Expand over that shape. The new_* ops expand a scalar over their
static size, so no initializer is as large as the tensor.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
import torch

from converters.core.builder import GraphBuilder, Ref, Value, numpy_view
from converters.core.common import as_operand
from converters.core.dims import node_arg
from converters.core.registry import converter
from converters.core.target import TrtTarget

aten = torch.ops.aten


def _computed(b: GraphBuilder, *args: Any, **kwargs: Any) -> Ref:
    """Run the op on its constant arguments; the result is an initializer."""
    op = b.converting.target
    if not callable(op):
        raise TypeError(f"{op!r} is not an op to run")
    value = op(*args, **{**kwargs, "device": "cpu"})
    return b.const(numpy_view(value), value.dtype)


@converter(aten.arange.default, aten.arange.start, aten.arange.start_step)
def arange(b: GraphBuilder, *args: Any, **kwargs: Any) -> Ref:
    """arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None, ...) -> Tensor

    A Range when a bound is a size known only at run time; otherwise a constant.
    """
    if not any(isinstance(a, Ref) for a in args):
        return _computed(b, *args, **kwargs)
    start, end, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    dtype = b.out.dtype
    bounds = [b.cast(v, dtype) if isinstance(v, Ref) else b.const(v, dtype) for v in (start, end, step)]
    return b.op("Range", *bounds, dtype=dtype)


@converter(aten.scalar_tensor.default)
def scalar_tensor(b: GraphBuilder, *args: Any, **kwargs: Any) -> Ref:
    """scalar_tensor(Scalar s, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _computed(b, *args, **kwargs)


def _python_args(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    if node.all_input_nodes:
        return f"{node.target} with a tensor or dynamic argument"
    return None


@converter(aten.linspace.default, aten.eye.default, aten.eye.m, capability=_python_args)
def constant_grid(b: GraphBuilder, *args: Any, **kwargs: Any) -> Ref:
    """linspace(Scalar start, Scalar end, int steps, *, ScalarType? dtype=None, ...) -> Tensor;
    eye(SymInt n, *, ...) -> Tensor; eye.m(SymInt n, SymInt m, *, ...) -> Tensor"""
    return _computed(b, *args, **kwargs)


def _linspace_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    steps = node_arg(node, 2, "steps")
    if not isinstance(steps, int):
        return "linspace with a dynamic number of steps"
    if not node.meta["val"].dtype.is_floating_point:
        # torch computes integer linspace in float64: in float32, 0..7 in 50 steps gives
        # 3.9999998 at i=28, truncated to 3 where torch gives 4.
        return "integer linspace with run-time bounds (torch computes it in float64, TensorRT has none)"
    for arg in node.all_input_nodes:
        val = arg.meta.get("val")
        if isinstance(val, torch.Tensor) and val.dim() != 0:
            return f"linspace bound {arg.name} is not 0-d"
    return None


@converter(
    aten.linspace.Tensor_Tensor,
    aten.linspace.Tensor_Scalar,
    aten.linspace.Scalar_Tensor,
    capability=_linspace_capability,
)
def linspace_tensor(b: GraphBuilder, start: Value | float, end: Value | float, steps: int, **kwargs: Any) -> Ref:
    """linspace.Tensor_Tensor(Tensor start, Tensor end, int steps, *, ScalarType? dtype=None, ...) -> Tensor
    (and the .Tensor_Scalar / .Scalar_Tensor mixes: 0-d bounds known at run time)

    torch's symmetric formula in the result dtype: step = (end - start) / (steps - 1), element i
    is start + i * step for i < steps // 2 and end - (steps - 1 - i) * step after.
    """
    dtype = b.out.dtype
    first, last = as_operand(b, start, dtype), as_operand(b, end, dtype)
    if steps <= 1:
        return b.op("Reshape", first, b.ints([1]), dtype=dtype, shape=(1,)) if steps else b.const(np.zeros([0]), dtype)
    step = b.op("Div", b.op("Sub", last, first, dtype=dtype), b.const(steps - 1, dtype), dtype=dtype)
    half = steps // 2
    head = b.op("Add", first, b.op("Mul", step, b.const(np.arange(half), dtype), dtype=dtype), dtype=dtype)
    back = b.const(np.arange(steps - 1 - half, -1, -1), dtype)
    tail = b.op("Sub", last, b.op("Mul", step, back, dtype=dtype), dtype=dtype)
    return b.op("Concat", head, tail, axis=0, dtype=dtype, shape=(steps,))


# -- filled tensors --------------------------------------------------------------------------
def _expanded(b: GraphBuilder, shape: Ref, fill: Any) -> Ref:
    """`fill` broadcast over `shape` (a 1-D int64 value)."""
    return b.op("Expand", b.const(fill, b.out.dtype), shape, dtype=b.out.dtype)


def _filled(b: GraphBuilder, size: Sequence[int | Ref], fill: Any) -> Ref:
    """`fill` in the shape `size`: a constant when the size is known, else expanded at run time."""
    static = [d for d in size if isinstance(d, int)]
    if len(static) == len(size):
        return b.const(np.full(static, fill), b.out.dtype)
    return _expanded(b, b.shape_tensor(size), fill)


@converter(aten.full.default)
def full(b: GraphBuilder, size: Sequence[int | Value], fill_value: Any, **kwargs: Any) -> Ref:
    """full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _filled(b, size, fill_value)


@converter(aten.zeros.default, aten.empty.memory_format)
def zeros(b: GraphBuilder, size: Sequence[int | Value], **kwargs: Any) -> Ref:
    """zeros(SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor

    `empty` too: its contents are unspecified, zeros are a valid choice.
    """
    return _filled(b, size, 0)


@converter(aten.ones.default)
def ones(b: GraphBuilder, size: Sequence[int | Value], **kwargs: Any) -> Ref:
    """ones(SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _filled(b, size, 1)


@converter(aten.full_like.default, aten.fill.Scalar)
def full_like(b: GraphBuilder, x: Value, fill_value: Any, **kwargs: Any) -> Ref:
    """full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None,
    Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor;
    fill.Scalar(Tensor self, Scalar value) -> Tensor"""
    return _expanded(b, b.op("Shape", x), fill_value)


@converter(aten.zeros_like.default, aten.empty_like.default)
def zeros_like(b: GraphBuilder, x: Value, **kwargs: Any) -> Ref:
    """zeros_like(Tensor self, *, ScalarType? dtype=None, ...) -> Tensor  (empty_like: zeros too)"""
    return full_like(b, x, 0)


@converter(aten.ones_like.default)
def ones_like(b: GraphBuilder, x: Value, **kwargs: Any) -> Ref:
    """ones_like(Tensor self, *, ScalarType? dtype=None, ...) -> Tensor"""
    return full_like(b, x, 1)


@converter(aten.new_zeros.default)
def new_zeros(b: GraphBuilder, x: Value, size: Sequence[int | Value], **kwargs: Any) -> Ref:
    """new_zeros(Tensor self, SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None,
    Device? device=None, bool? pin_memory=None) -> Tensor"""
    return _expanded(b, b.shape_tensor(size), 0)


@converter(aten.new_ones.default)
def new_ones(b: GraphBuilder, x: Value, size: Sequence[int | Value], **kwargs: Any) -> Ref:
    """new_ones(Tensor self, SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _expanded(b, b.shape_tensor(size), 1)


@converter(aten.new_full.default)
def new_full(b: GraphBuilder, x: Value, size: Sequence[int | Value], fill_value: Any, **kwargs: Any) -> Ref:
    """new_full(Tensor self, SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _expanded(b, b.shape_tensor(size), fill_value)


@converter(aten.new_empty.default)
def new_empty(b: GraphBuilder, x: Value, size: Sequence[int | Value], **kwargs: Any) -> Ref:
    """new_empty(Tensor self, SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor  (zeros: contents are unspecified)"""
    return _expanded(b, b.shape_tensor(size), 0)


@converter(aten.empty_strided.default)
def empty_strided(b: GraphBuilder, size: Sequence[int | Value], stride: Sequence[int], **kwargs: Any) -> Ref:
    """empty_strided(SymInt[] size, SymInt[] stride, *, ScalarType? dtype=None, ...) -> Tensor

    Zeros; strides are a memory layout, meaningless for an engine's dense outputs.
    """
    return _expanded(b, b.shape_tensor(size), 0)


# -- one-hot, copies and casts ---------------------------------------------------------------
def _known_classes(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    if node_arg(node, 1, "num_classes", -1) == -1:
        return "one_hot without num_classes (the width would depend on the data)"
    return None


@converter(aten.one_hot.default, capability=_known_classes)
def one_hot(b: GraphBuilder, x: Value, num_classes: int = -1) -> Ref:
    """one_hot(Tensor self, int num_classes=-1) -> Tensor"""
    values = b.const([0, 1], torch.int64)
    return b.op("OneHot", x, b.ints([num_classes]), values, axis=-1, dtype=torch.int64)


@converter(aten.copy.default, aten.fill.Tensor)
def copy(b: GraphBuilder, x: Value, src: Value, non_blocking: bool = False) -> Ref:
    """copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor; fill.Tensor(Tensor self,
    Tensor value) -> Tensor  (src broadcast to self, in self's dtype; a fill value is 0-d)"""
    return b.op("Expand", b.cast(src, x.dtype), b.op("Shape", x), dtype=x.dtype)


@converter(aten.type_as.default)
def type_as(b: GraphBuilder, x: Value, other: Value) -> Ref:
    """type_as(Tensor self, Tensor other) -> Tensor"""
    return b.op("Identity", b.cast(x, other.dtype), dtype=other.dtype)
