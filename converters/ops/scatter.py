"""Scatters: scatter (src/value), slice_scatter, select_scatter, index_fill, index_copy,
masked_scatter (how vision-language models merge image features into the text sequence).

scatter is ScatterElements without reduction (TensorRT has none, so scatter_add and the reduce
overloads have no converter here). A contiguous slice_scatter and select_scatter are cheaper as a
Concat of x's untouched parts around src.
"""

from __future__ import annotations

from typing import Optional

import torch

from converters.core.builder import GraphBuilder, Ref, Value, onnx_type
from converters.core.common import normalize_dim
from converters.core.dims import (
    INT64_MAX,
    dim_size,
    dim_size_scalar,
    input_val,
    is_static_dim,
    max_numel,
    node_arg,
    same_static_shape,
    static,
    static_numel,
)
from converters.core.registry import Capability, converter
from converters.core.target import TrtTarget
from converters.core.where import where

aten = torch.ops.aten
_SCATTER_DTYPES = (torch.float32, torch.float16, torch.int32, torch.int64)  # TensorRT's ScatterElements


def _scatter_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    x = input_val(node, 0)
    if x.dim() == 0:
        return "scatter into a 0-d tensor"
    if x.dtype not in _SCATTER_DTYPES:
        return f"TensorRT's ScatterElements takes no {x.dtype} tensors"
    return None


@converter(aten.scatter.src, capability=_scatter_capability)
def scatter_src(b: GraphBuilder, x: Value, dim: int, index: Value, src: Value) -> Ref:
    """scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor

    torch reads src only where index has elements; ONNX wants updates shaped like the indices.
    """
    updates: Ref = b.cast(src, x.dtype)
    if not same_static_shape(src.shape, index.shape):
        updates = b.op("Slice", updates, b.ints([0] * src.rank), b.op("Shape", index), b.ints(list(range(src.rank))))
    return b.op("ScatterElements", x, index, updates, axis=normalize_dim(dim, x.rank), dtype=x.dtype)


@converter(aten.scatter.value, capability=_scatter_capability)
def scatter_value(b: GraphBuilder, x: Value, dim: int, index: Value, value: float) -> Ref:
    """scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor"""
    updates = b.op("Expand", b.const(value, x.dtype), b.op("Shape", index))
    return b.op("ScatterElements", x, index, updates, axis=normalize_dim(dim, x.rank), dtype=x.dtype)


def _static_bounds(*bounds: tuple[int, str], dynamic_dim: bool = False) -> Capability:
    """The bounds (position, name) must be constants: they place the pieces; so must the scattered
    dim's size unless `dynamic_dim`."""

    def check(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
        x = input_val(node, 0)
        if x.dim() == 0:
            return "scatter into a 0-d tensor"
        dim = node_arg(node, 2, "dim", 0)
        if not dynamic_dim and not isinstance(x.shape[normalize_dim(dim, x.dim())], int):
            return "scatter along a dynamic dim"
        values = {name: node_arg(node, i, name) for i, name in bounds}
        if not all(v is None or isinstance(v, int) for v in values.values()):
            return "slice bounds that are not constants"
        if values.get("step") not in (None, 1) and x.dtype not in _SCATTER_DTYPES:
            return f"strided slice_scatter: TensorRT's ScatterElements takes no {x.dtype} tensors"
        return None

    return check


def _clamped(i: int | None, size: int, default: int) -> int:
    if i is None:
        return default
    return max(0, min(i + size if i < 0 else i, size))


def _around(b: GraphBuilder, x: Value, middle: Ref, axis: int, start: int, stop: int) -> Ref:
    """x[..., :start] ++ middle ++ x[..., stop:] along `axis`."""
    axes = b.ints([axis])
    parts = []
    if start > 0:
        parts.append(b.op("Slice", x, b.ints([0]), b.ints([start]), axes))
    parts.append(middle)
    if stop < x.shape[axis]:
        parts.append(b.op("Slice", x, b.ints([stop]), b.ints([INT64_MAX]), axes))
    if len(parts) == 1:
        return b.op("Identity", middle, dtype=x.dtype)
    return b.op("Concat", *parts, axis=axis, dtype=x.dtype)


def _dynamic_slice_scatter(
    b: GraphBuilder, x: Value, updates: Value, axis: int, start: int | Value | None, step: int
) -> Ref:
    """slice_scatter along a dim whose size, or from a start, known at run time: the slice begins
    where x[..., :start] ends (Slice clamps `start` as Python does) and `updates` says how many
    positions it covers, so nothing needs the size or the end."""
    axes = b.ints([axis])
    head = None
    if start is not None and not (isinstance(start, int) and start == 0):
        head = b.op("Slice", x, b.ints([0]), b.shape_tensor([start]), axes)
    first = b.op("Gather", b.op("Shape", head), b.ints([axis]), axis=0) if head else b.ints([0])
    count = dim_size(b, updates, axis)
    if step == 1:
        tail = b.op("Slice", x, b.op("Add", first, count), b.ints([INT64_MAX]), axes)
        return b.op("Concat", *([head] if head else []), updates, tail, axis=axis, dtype=x.dtype)
    scalar = b.ints([])
    steps = b.op("Range", b.const(0, torch.int64), b.op("Reshape", count, scalar), b.const(1, torch.int64))
    positions = b.op("Add", b.op("Reshape", first, scalar), b.op("Mul", steps, b.const(step, torch.int64)))
    along = b.op("Reshape", positions, b.ints([1] * axis + [-1] + [1] * (x.rank - axis - 1)))
    index = b.op("Expand", along, b.op("Shape", updates))
    return b.op("ScatterElements", x, index, updates, axis=axis, dtype=x.dtype)


@converter(aten.slice_scatter.default, capability=_static_bounds((5, "step"), dynamic_dim=True))
def slice_scatter(
    b: GraphBuilder,
    x: Value,
    src: Value,
    dim: int = 0,
    start: int | Value | None = None,
    end: int | Value | None = None,
    step: int = 1,
) -> Ref:
    """slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None,
    SymInt step=1) -> Tensor  (bounds from sizes: circular padding of a dynamic map)"""
    axis = normalize_dim(dim, x.rank)
    if not is_static_dim(x.shape[axis]) or isinstance(start, Value) or isinstance(end, Value):
        return _dynamic_slice_scatter(b, x, b.cast(src, x.dtype), axis, start, step)
    size = static(x.shape[axis], "the scattered dim")
    first = _clamped(start, size, 0)
    stop = max(first, _clamped(end, size, size))
    updates = b.cast(src, x.dtype)
    if step == 1:
        return _around(b, x, updates, axis, first, stop)
    positions = list(range(first, stop, step))
    if not positions:
        return b.op("Identity", x, dtype=x.dtype)
    # ScatterElements with each src element's target position along `axis`.
    along = b.op("Reshape", b.const(positions, torch.int64), b.ints([1] * axis + [-1] + [1] * (x.rank - axis - 1)))
    index = b.op("Expand", along, b.op("Shape", src))
    return b.op("ScatterElements", x, index, updates, axis=axis, dtype=x.dtype)


@converter(aten.select_scatter.default, capability=_static_bounds((3, "index")))
def select_scatter(b: GraphBuilder, x: Value, src: Value, dim: int, index: int) -> Ref:
    """select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor"""
    axis = normalize_dim(dim, x.rank)
    i = normalize_dim(index, static(x.shape[axis], "the scattered dim"))
    middle = b.op("Unsqueeze", b.cast(src, x.dtype), b.ints([axis]))
    return _around(b, x, middle, axis, i, i + 1)


# -- index_fill / index_copy: whole slices along one dim -------------------------------------
def _slices_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    x = input_val(node, 0)
    index = input_val(node, 2)
    if x.dim() == 0:
        return f"{node.target} of a 0-d tensor"
    if index.numel() == 0:
        return f"{node.target} with an empty index"
    if node.target is aten.index_copy.default and x.dtype not in _SCATTER_DTYPES:
        return f"TensorRT's ScatterElements takes no {x.dtype} tensors"
    return None


def _along(b: GraphBuilder, values: Ref, axis: int, rank: int) -> Ref:
    """A 1-D tensor shaped to run along `axis` of a rank-`rank` tensor: (1, …, n, …, 1)."""
    return b.op("Reshape", values, b.ints([1] * axis + [-1] + [1] * (rank - axis - 1)))


@converter(aten.index_fill.int_Scalar, aten.index_fill.int_Tensor, capability=_slices_capability)
def index_fill(b: GraphBuilder, x: Value, dim: int, index: Value, value: float | Value) -> Ref:
    """index_fill.int_Scalar(Tensor self, int dim, Tensor index, Scalar value) -> Tensor;
    index_fill.int_Tensor(Tensor self, int dim, Tensor index, Tensor value) -> Tensor

    A Where over the positions along dim that some index names (no scatter: any dtype, and
    repeated or negative indices are fine).
    """
    axis = normalize_dim(dim, x.rank)
    size = dim_size_scalar(b, x, axis)
    targets = b.op("Reshape", b.cast(index, torch.int64), b.ints([-1]))
    targets = b.op("Where", b.op("Less", targets, b.const(0, torch.int64)), b.op("Add", targets, size), targets)
    positions = b.op("Range", b.const(0, torch.int64), size, b.const(1, torch.int64))
    named = b.op("Equal", b.op("Unsqueeze", positions, b.ints([1])), b.op("Unsqueeze", targets, b.ints([0])))
    hit = b.op("ReduceMax", b.cast(named, torch.int32), axes=[1], keepdims=0)
    fill = b.cast(value, x.dtype) if isinstance(value, Ref) else b.const(value, x.dtype)
    return where(b, b.cast(_along(b, hit, axis, x.rank), torch.bool), fill, x, x.dtype)


@converter(aten.index_copy.default, capability=_slices_capability)
def index_copy(b: GraphBuilder, x: Value, dim: int, index: Value, source: Value) -> Ref:
    """index_copy(Tensor self, int dim, Tensor index, Tensor source) -> Tensor

    ScatterElements with each source element's target position along dim.
    """
    axis = normalize_dim(dim, x.rank)
    targets = b.op("Expand", _along(b, b.cast(index, torch.int64), axis, x.rank), b.op("Shape", source))
    return b.op("ScatterElements", x, targets, b.cast(source, x.dtype), axis=axis, dtype=x.dtype)


# float32 counts every element exactly up to 2**24.
_FLOAT32_EXACT = 2**24


def _masked_scatter_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    n = max_numel(node.meta["val"].shape)
    if n is None or n > _FLOAT32_EXACT:
        return (
            f"masked_scatter of up to {n if n is not None else 'unboundedly many'} elements: TensorRT counts the "
            f"mask's Trues in float32 (CumSum), exact only up to 2**24"
        )
    if static_numel(input_val(node, 2).shape) == 0:
        return "masked_scatter from an empty source"
    return None


@converter(aten.masked_scatter.default, capability=_masked_scatter_capability)
def masked_scatter(b: GraphBuilder, x: Value, mask: Value, source: Value) -> Ref:
    """masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor

    The k-th True of the (broadcast) mask, row-major, takes source's k-th element: a running count
    of the Trues gives each its index into the flattened source.
    """
    full = b.op("Expand", x, b.op("Shape", mask))  # both broadcast, as torch does
    flat_mask = b.op("Reshape", b.op("Expand", mask, b.op("Shape", full)), b.ints([-1]))
    counted = b.op("CumSum", b.op("Cast", flat_mask, to=onnx_type(torch.float32)), b.const(0, torch.int64))
    index = b.op("Sub", b.op("Cast", counted, to=onnx_type(torch.int64)), b.const(1, torch.int64))
    flat_source = b.op("Reshape", source, b.ints([-1]))
    last = b.op("Sub", b.op("Size", flat_source), b.const(1, torch.int64))
    # Where the mask is False the index may be -1 or past the source: clamped, and not picked.
    index = b.op("Min", b.op("Max", index, b.const(0, torch.int64)), last)
    picked = b.op("Where", flat_mask, b.op("Gather", flat_source, index, axis=0), b.op("Reshape", full, b.ints([-1])))
    return b.op("Reshape", picked, b.op("Shape", full), dtype=x.dtype)
