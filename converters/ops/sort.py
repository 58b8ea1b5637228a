"""topk, sort, argsort, kthvalue and median as ONNX TopK; bucketize and searchsorted.

TensorRT's TopK: sorted output only, K an initializer below 3840, float/int32/int64 input; sort
and argsort are a TopK over the whole (static) dim.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.common import normalize_dim, promoted_dtype
from converters.core.dims import dim_size_scalar, empty_input, input_val, node_arg, static, static_numel
from converters.core.registry import Capability, converter
from converters.core.target import TrtTarget

aten = torch.ops.aten
_MAX_K = 3839


def _check_k(node: torch.fx.Node, k: object) -> Optional[str]:
    x = input_val(node, 0)
    if not x.dtype.is_floating_point and x.dtype not in (torch.int32, torch.int64, torch.bool):
        return f"TensorRT's TopK takes float, int32 and int64 input, got {x.dtype}"
    if x.dim() == 0:
        return "sorting a 0-d tensor"
    if not isinstance(k, int):
        return f"K = {k} is not a constant (TensorRT wants K as an initializer)"
    if not 1 <= k <= _MAX_K:
        return f"TensorRT's TopK needs 1 <= K < 3840, got K = {k}"
    return None


def _topk_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    return _check_k(node, node_arg(node, 1, "k"))


def _sort_capability(dim_at: int) -> Capability:
    """For sort/argsort: K is the sorted dim's size; `dim_at` is dim's position (-1: keyword only)."""

    def check(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
        if node.kwargs.get("stable"):
            return "stable sort: TensorRT's TopK does not promise an order among equal elements"
        x = input_val(node, 0)
        dim = node_arg(node, dim_at if dim_at >= 0 else None, "dim", -1)
        size = x.shape[normalize_dim(dim, x.dim())] if x.dim() else None
        return _check_k(node, size)

    return check


def _top(b: GraphBuilder, x: Value, k: int, dim: int, largest: bool) -> tuple[Ref, Ref]:
    """torch orders NaN above +inf; ONNX leaves NaNs' place open (ONNX Runtime may drop them from a
    TopK). So floats are ordered with NaN as +inf, and the block of NaNs and +infs that ties there
    is put in torch's order by `_nan_above_inf`."""
    axis = normalize_dim(dim, x.rank)
    ordered: Ref = b.cast(x, torch.int32) if x.dtype == torch.bool else x  # TopK orders numbers only
    floating = x.dtype.is_floating_point
    if floating:
        ordered = b.op("Where", b.op("IsNaN", x), b.const(float("inf"), x.dtype), x, dtype=x.dtype)
    values, indices = b.op_outputs("TopK", ordered, b.ints([k]), axis=axis, largest=int(largest), sorted=1, outputs=2)
    if floating:
        indices = _nan_above_inf(b, x, indices, k, axis, largest)
        values = b.op("GatherElements", x, indices, axis=axis)
    return b.cast(Ref(values.name, ordered.dtype), x.dtype), Ref(indices.name, torch.int64)


def _nan_above_inf(b: GraphBuilder, x: Value, indices: Ref, k: int, axis: int, largest: bool) -> Ref:
    """Where the TopK output (`indices`, NaN counted as +inf) holds the tied NaN/+inf block, the
    indices of a second TopK that ranks the first wanted of the two (NaN when descending, +inf
    ascending) 2, the other 1 and the rest 0. The block starts at 0 when descending and at
    size - block when ascending; output j of the block is output j - start of the second TopK."""
    dtype = x.dtype
    nan = b.cast(b.op("IsNaN", x), dtype)
    inf = b.cast(b.op("Equal", x, b.const(float("inf"), dtype)), dtype)
    first, second = (nan, inf) if largest else (inf, nan)
    rank = b.op("Add", b.op("Add", first, first), second)
    _, block_indices = b.op_outputs("TopK", rank, b.ints([k]), axis=axis, largest=1, sorted=1, outputs=2)
    in_block = b.cast(b.op("Greater", rank, b.const(0, dtype)), torch.int64)
    block = b.op("ReduceSum", in_block, b.ints([axis]), keepdims=1, dtype=torch.int64)
    position = b.const(np.arange(k).reshape([k if d == axis else 1 for d in range(x.rank)]), torch.int64)
    start = b.const(0, torch.int64) if largest else b.op("Sub", dim_size_scalar(b, x, axis), block)
    offset = b.op("Sub", position, start)
    inside = b.op("And", b.op("GreaterOrEqual", offset, b.const(0, torch.int64)), b.op("Less", offset, block))
    # GatherElements does not broadcast: the index takes the output's full shape.
    source = b.op("Expand", b.op("Max", offset, b.const(0, torch.int64)), b.op("Shape", block_indices))
    moved = b.op("GatherElements", block_indices, source, axis=axis)
    return b.op("Where", inside, moved, indices, dtype=torch.int64)


@converter(aten.topk.default, capability=_topk_capability)
def topk(
    b: GraphBuilder, x: Value, k: int, dim: int = -1, largest: bool = True, sorted: bool = True
) -> tuple[Ref, Ref]:
    """topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)

    Always sorted (TensorRT's TopK has only that mode): a valid order for sorted=False too.
    """
    return _top(b, x, k, dim, largest)


@converter(aten.sort.default, capability=_sort_capability(1))
def sort(b: GraphBuilder, x: Value, dim: int = -1, descending: bool = False) -> tuple[Ref, Ref]:
    """sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)"""
    return _top(b, x, static(x.shape[normalize_dim(dim, x.rank)], "the sorted dim"), dim, descending)


@converter(aten.sort.stable, capability=_sort_capability(-1))
def sort_stable(
    b: GraphBuilder, x: Value, *, stable: bool | None = None, dim: int = -1, descending: bool = False
) -> tuple[Ref, Ref]:
    """sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)"""
    return sort(b, x, dim, descending)


@converter(aten.argsort.default, capability=_sort_capability(1))
def argsort(b: GraphBuilder, x: Value, dim: int = -1, descending: bool = False) -> Ref:
    """argsort(Tensor self, int dim=-1, bool descending=False) -> Tensor"""
    return sort(b, x, dim, descending)[1]


@converter(aten.argsort.stable, capability=_sort_capability(-1))
def argsort_stable(b: GraphBuilder, x: Value, *, stable: bool, dim: int = -1, descending: bool = False) -> Ref:
    """argsort.stable(Tensor self, *, bool stable, int dim=-1, bool descending=False) -> Tensor"""
    return sort(b, x, dim, descending)[1]


# -- order statistics: the k-th smallest is the last of a TopK of the k smallest ---------------
def _lower_median_k(size: object) -> int | None:
    return _lower_median(size) if isinstance(size, int) else None


def _lower_median(size: int) -> int:
    return (size - 1) // 2 + 1


def _dim_size(node: torch.fx.Node, dim: int) -> object:
    x = input_val(node, 0)
    return x.shape[normalize_dim(dim, x.dim())] if x.dim() else 1


def _kthvalue_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    return _check_k(node, node_arg(node, 1, "k"))


def _median_dim_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    return _check_k(node, _lower_median_k(_dim_size(node, node_arg(node, 1, "dim"))))


def _median_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    return _check_k(node, _lower_median_k(static_numel(input_val(node, 0).shape)))


def _kth(b: GraphBuilder, x: Value, k: int, dim: int, keepdim: bool) -> tuple[Ref, Ref]:
    axis = normalize_dim(dim, x.rank)
    values, indices = _top(b, x, k, axis, False)
    picked = [b.op("Slice", v, b.ints([k - 1]), b.ints([k]), b.ints([axis])) for v in (values, indices)]
    if not keepdim:
        picked = [b.op("Squeeze", p, b.ints([axis])) for p in picked]
    return Ref(picked[0].name, x.dtype), Ref(picked[1].name, torch.int64)


@converter(aten.kthvalue.default, capability=_kthvalue_capability)
def kthvalue(b: GraphBuilder, x: Value, k: int, dim: int = -1, keepdim: bool = False) -> tuple[Ref, Ref]:
    """kthvalue(Tensor self, SymInt k, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    return _kth(b, x, k, dim, keepdim)


def _median(b: GraphBuilder, x: Value, dim: int, keepdim: bool) -> tuple[Ref, Ref]:
    """The lower median along `dim`; torch's median, unlike kthvalue, answers NaN for a row that
    holds one, with the index of its first NaN."""
    axis = normalize_dim(dim, x.rank)
    values, indices = _kth(b, x, _lower_median(static(x.shape[axis], "the median dim")), axis, keepdim)
    if not x.dtype.is_floating_point:
        return values, indices
    nan = b.cast(b.op("IsNaN", x), torch.int32)
    first_nan = b.op("ArgMax", nan, axis=axis, keepdims=int(keepdim), select_last_index=0, dtype=torch.int64)
    has_nan = b.cast(b.op("ReduceMax", nan, axes=[axis], keepdims=int(keepdim)), torch.bool)
    values = b.op("Where", has_nan, b.const(float("nan"), x.dtype), values, dtype=x.dtype)
    return values, b.op("Where", has_nan, first_nan, indices, dtype=torch.int64)


@converter(aten.median.dim, capability=_median_dim_capability)
def median_dim(b: GraphBuilder, x: Value, dim: int, keepdim: bool = False) -> tuple[Ref, Ref]:
    """median.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)  (the lower median)"""
    return _median(b, x, dim, keepdim)


@converter(aten.median.default, capability=_median_capability)
def median(b: GraphBuilder, x: Value) -> Ref:
    """median(Tensor self) -> Tensor  (the lower median of all elements)"""
    n = static(static_numel(x.shape), "the element count")
    flat = b.op("Reshape", x, b.ints([-1]), dtype=x.dtype, shape=(n,))
    return _median(b, flat, 0, False)[0]


# -- searching sorted boundaries: count the boundaries below each value --------------------------
def _search_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    reason = empty_input(node, trt_target)
    if reason:
        return reason
    if node.kwargs.get("sorter") is not None:
        return "searchsorted with a sorter permutation"
    for arg in node.all_input_nodes:
        if arg.meta["val"].dtype == torch.bool:
            return f"{node.target} of bool tensors (ONNX compares numbers only)"
    return None


def _insertion_points(b: GraphBuilder, sorted_seq: Value, values: Value, right: bool) -> Ref:
    """How many entries of the (last dim of the) sorted sequence lie below each value, or at most
    equal to it with right=True; NaN values go after everything, as torch sorts NaN last."""
    dtype = promoted_dtype(sorted_seq, values)
    seq: Ref = b.cast(sorted_seq, dtype)
    vals = b.cast(values, dtype)
    if sorted_seq.rank > 1:  # one sequence per leading index: (..., 1, S) against (..., V, 1)
        seq = b.op("Unsqueeze", seq, b.ints([-2]))
    below = b.op("LessOrEqual" if right else "Less", seq, b.op("Unsqueeze", vals, b.ints([-1])))
    count = b.op("ReduceSum", b.cast(below, torch.int64), b.ints([-1]), keepdims=0, dtype=torch.int64)
    if dtype.is_floating_point:
        size = dim_size_scalar(b, sorted_seq, sorted_seq.rank - 1)
        count = b.op("Where", b.op("IsNaN", vals), size, count, dtype=torch.int64)
    return b.cast(count, b.out.dtype)


@converter(aten.bucketize.Tensor, capability=_search_capability)
def bucketize(b: GraphBuilder, x: Value, boundaries: Value, *, out_int32: bool = False, right: bool = False) -> Ref:
    """bucketize.Tensor(Tensor self, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor"""
    return _insertion_points(b, boundaries, x, right)


@converter(aten.searchsorted.Tensor, capability=_search_capability)
def searchsorted(
    b: GraphBuilder,
    sorted_sequence: Value,
    x: Value,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: Value | None = None,
) -> Ref:
    """searchsorted.Tensor(Tensor sorted_sequence, Tensor self, *, bool out_int32=False, bool right=False,
    str? side=None, Tensor? sorter=None) -> Tensor"""
    return _insertion_points(b, sorted_sequence, x, right or side == "right")
