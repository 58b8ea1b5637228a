"""Gathers: embedding, embedding_bag, gather, index_select, diagonal, as_strided (a gather at positions its
strides name)."""

from __future__ import annotations

import math
from typing import Optional, Sequence

import torch
from torch._prims_common import is_non_overlapping_and_dense_or_false
from torch.fx.experimental.symbolic_shapes import statically_known_true

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.common import normalize_dim, only_first_output_used
from converters.core.dims import INT64_MAX, dim_size, dim_size_scalar, input_val, node_arg, value_of
from converters.core.registry import converter
from converters.core.target import TrtTarget

aten = torch.ops.aten


@converter(aten.embedding.default)
def embedding(
    b: GraphBuilder,
    weight: Value,
    indices: Value,
    padding_idx: int = -1,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Ref:
    """embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False,
    bool sparse=False) -> Tensor"""
    return b.op("Gather", weight, indices, axis=0, dtype=weight.dtype)


def _not_0d(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    """A 0-d source is gathered from as a 1-element 1-D one, then reshaped to the static result shape."""
    if input_val(node, 0).dim() == 0 and not all(isinstance(d, int) for d in node.meta["val"].shape):
        return "gathering from a 0-d tensor into a dynamic shape"
    return None


def _indices(b: GraphBuilder, index: Value) -> Ref:
    """ONNX Gather/GatherElements take int32/int64 indices; torch also accepts e.g. uint8 ones in gather."""
    return index if index.dtype in (torch.int32, torch.int64) else b.cast(index, torch.int64)


def _gather(b: GraphBuilder, op_type: str, x: Value, dim: int, index: Value) -> Ref:
    indices = _indices(b, index)
    if x.rank == 0:  # torch treats a 0-d source as 1-D; ONNX wants rank >= 1
        flat = b.op(op_type, b.op("Unsqueeze", x, b.ints([0])), b.op("Reshape", indices, b.ints([-1])), axis=0)
        shape = [int(d) for d in b.out.shape]
        return b.op("Reshape", flat, b.ints(shape), allowzero=1 if 0 in shape else None, dtype=x.dtype)
    return b.op(op_type, x, indices, axis=normalize_dim(dim, x.rank), dtype=x.dtype)


@converter(aten.index_select.default, capability=_not_0d)
def index_select(b: GraphBuilder, x: Value, dim: int, index: Value) -> Ref:
    """index_select(Tensor self, int dim, Tensor index) -> Tensor"""
    return _gather(b, "Gather", x, dim, index)


@converter(aten.gather.default, capability=_not_0d)
def gather(b: GraphBuilder, x: Value, dim: int, index: Value, *, sparse_grad: bool = False) -> Ref:
    """gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor"""
    return _gather(b, "GatherElements", x, dim, index)


def _strided_positions(node: torch.fx.Node) -> torch.Tensor | str:
    """For each element as_strided reads, the flat (row-major) index of the input element it reads;
    or why that cannot be known when converting.

    The input's FakeTensor carries the strides eager gives it, so laying out 0..n-1 with those
    strides and applying the same as_strided to that tells where each element comes from (and
    torch itself checks the reads stay inside the storage).
    """
    x = input_val(node, 0)
    size, stride, offset = node_arg(node, 1, "size"), node_arg(node, 2, "stride"), node_arg(node, 3, "storage_offset")
    if not all(isinstance(d, int) for d in (*x.shape, *x.stride(), *size, *stride, offset or 0)):
        return "as_strided with a dynamic shape, stride or offset, other than a reshape"
    if not is_non_overlapping_and_dense_or_false(x):
        return f"as_strided of a tensor whose memory has gaps or overlaps (strides {x.stride()})"
    start = (x.storage_offset() if offset is None else offset) - x.storage_offset()
    if start < 0:
        return "as_strided reads before the input's first element"
    layout = torch.empty_strided(tuple(x.shape), x.stride(), dtype=torch.int64)
    layout.copy_(torch.arange(x.numel()).view(tuple(x.shape)))
    try:
        return torch.as_strided(layout, size, stride, start).clone()
    except RuntimeError as e:  # reads past the input's last element
        return f"as_strided reads outside its input: {e}"


def _known_equal(a: object, b: object) -> bool:
    return bool(statically_known_true(a == b))


def _row_major(shape: Sequence[object], strides: Sequence[object]) -> bool:
    """Whether `strides` are `shape`'s contiguous strides wherever a dim is not 1 (as far as the
    sizes' symbols tell, without adding a guard)."""
    expected: object = 1
    for d, st in zip(reversed(shape), reversed(strides)):
        if not _known_equal(d, 1):
            if not _known_equal(st, expected):
                return False
            expected = expected * d  # type: ignore[operator]
    return True


def _reads_in_order(node: torch.fx.Node) -> bool:
    """Whether as_strided reads all of a contiguous input in its own order: a reshape, also where
    sizes are dynamic (convnext's head views its (N, C, 1, 1) pooled features with channels-last
    strides)."""
    x = input_val(node, 0)
    size = [value_of(d) for d in node_arg(node, 1, "size")]
    stride = [value_of(d) for d in node_arg(node, 2, "stride")]
    offset = value_of(node_arg(node, 3, "storage_offset"))
    return (
        (offset is None or _known_equal(offset, x.storage_offset()))
        and _row_major(x.shape, x.stride())
        and _row_major(size, stride)
        and _known_equal(math.prod(size), x.numel())  # type: ignore[arg-type]
    )


def _gather_strides(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    positions = _strided_positions(node)
    return positions if isinstance(positions, str) and not _reads_in_order(node) else None


@converter(aten.as_strided.default, capability=_gather_strides)
def as_strided(
    b: GraphBuilder, x: Value, size: Sequence[int], stride: Sequence[int], storage_offset: int | None = None
) -> Ref:
    """as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor(a)

    A gather of the flattened input at constant positions (a reshape where they are in order).
    """
    if _reads_in_order(b.converting):
        return b.op("Reshape", x, b.shape_tensor(size), allowzero=1 if 0 in size else None, dtype=x.dtype)
    positions = _strided_positions(b.converting)
    assert isinstance(positions, torch.Tensor), positions
    flat = b.op("Reshape", x, b.ints([-1]), dtype=x.dtype)
    n = input_val(b.converting, 0).numel()
    if positions.numel() == n and torch.equal(positions.flatten(), torch.arange(n)):
        return b.op("Reshape", flat, b.ints(list(size)), allowzero=1 if 0 in size else None, dtype=x.dtype)
    return b.op("Gather", flat, b.initializer("as_strided_positions", positions), axis=0, dtype=x.dtype)


def _static_diagonal_dims(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    x = input_val(node, 0)
    if x.dim() < 2:
        return f"diagonal of a rank-{x.dim()} tensor"
    dims = [normalize_dim(node_arg(node, i, name, d), x.dim()) for i, name, d in ((2, "dim1", 0), (3, "dim2", 1))]
    if not all(isinstance(x.shape[d], int) for d in dims):
        return "diagonal across a dynamic dim (its positions are listed when converting)"
    return None


@converter(aten.diagonal.default, capability=_static_diagonal_dims)
def diagonal(b: GraphBuilder, x: Value, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Ref:
    """diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)

    dim1 and dim2 move last and merge into one; the diagonal is a Gather of constant positions
    there (row i + max(-offset, 0), column i + max(offset, 0)), and lands last as in torch.
    """
    d1, d2 = normalize_dim(dim1, x.rank), normalize_dim(dim2, x.rank)
    rest = [d for d in range(x.rank) if d not in (d1, d2)]
    rows, cols = int(x.shape[d1]), int(x.shape[d2])
    moved = b.op("Transpose", x, perm=[*rest, d1, d2])
    # 0 in a Reshape keeps that (possibly dynamic) leading dim.
    merged = b.op("Reshape", moved, b.ints([0] * len(rest) + [rows * cols]))
    length = int(b.out.shape[-1])
    i = torch.arange(length)
    positions = (i + max(-offset, 0)) * cols + i + max(offset, 0)
    return b.op("Gather", merged, b.initializer("diagonal_positions", positions), axis=len(rest), dtype=x.dtype)


_BAG_MODES = {0: "sum", 1: "mean", 2: "max"}


def _bag_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    weight, indices = input_val(node, 0), input_val(node, 1)
    if not weight.dtype.is_floating_point:
        return f"embedding_bag of a {weight.dtype} table (TensorRT multiplies floats only)"
    if indices.dim() != 1:
        return f"embedding_bag with rank-{indices.dim()} indices (torch flattens them to 1-D first)"
    mode = node_arg(node, 4, "mode", 0)
    if mode not in _BAG_MODES:
        return f"embedding_bag mode {mode!r}"
    if node_arg(node, 6, "per_sample_weights") is not None and mode != 0:
        return f"embedding_bag mode {_BAG_MODES[mode]} with per_sample_weights (torch allows them with sum only)"
    padding_idx = node_arg(node, 8, "padding_idx")
    if _counts_from_end(node.target, padding_idx) and not isinstance(weight.shape[0], int):
        return "embedding_bag with a negative padding_idx into a table of dynamic size"
    return only_first_output_used(node, trt_target)


def _counts_from_end(op: object, padding_idx: int | None) -> bool:
    """The public overload reads a negative padding_idx from the end; the _embedding_bag ones take
    any negative one as "no padding"."""
    return op == aten.embedding_bag.padding_idx and padding_idx is not None and padding_idx < 0


def _bag_bounds(b: GraphBuilder, offsets: Value, indices: Value, include_last_offset: bool) -> tuple[Ref, Ref]:
    """Each bag's [start, end) in `indices`, as (B, 1) columns."""
    offsets64 = b.cast(offsets, torch.int64)
    zero, one, big, axes = b.ints([0]), b.ints([1]), b.ints([INT64_MAX]), b.ints([0])
    later = b.op("Slice", offsets64, one, big, axes)
    if include_last_offset:
        starts, ends = b.op("Slice", offsets64, zero, b.ints([-1]), axes), later
    else:
        starts, ends = offsets64, b.op("Concat", later, dim_size(b, indices, 0), axis=0)
    return b.op("Unsqueeze", starts, one), b.op("Unsqueeze", ends, one)


@converter(
    aten.embedding_bag.padding_idx,
    aten._embedding_bag.default,
    aten._embedding_bag_forward_only.default,
    capability=_bag_capability,
)
def embedding_bag(
    b: GraphBuilder,
    weight: Value,
    indices: Value,
    offsets: Value,
    scale_grad_by_freq: bool = False,
    mode: int = 0,
    sparse: bool = False,
    per_sample_weights: Value | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = -1,
) -> tuple[Ref, None, None, None]:
    """embedding_bag.padding_idx(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq, int mode,
    bool sparse, Tensor? per_sample_weights, bool include_last_offset, int? padding_idx) -> (Tensor, Tensor, Tensor,
    Tensor); _embedding_bag and _embedding_bag_forward_only: the same with int padding_idx=-1 (negative: none)

    A (bags, N) membership mask built from the offsets at run time (position j is in bag k when
    start_k <= j < end_k and indices[j] is not padding): sum is the mask (times any per-sample
    weights) times the gathered rows, mean divides by the mask's row counts, max reduces the rows the mask keeps. Empty bags give 0.
    """
    dtype = weight.dtype
    rows = b.op("Gather", weight, indices, axis=0)  # (N, D)
    positions = b.op("Range", b.const(0, torch.int64), dim_size_scalar(b, indices, 0), b.const(1, torch.int64))
    starts, ends = _bag_bounds(b, offsets, indices, include_last_offset)
    member = b.op("And", b.op("GreaterOrEqual", positions, starts), b.op("Less", positions, ends))
    if _counts_from_end(b.converting.target, padding_idx):
        assert padding_idx is not None
        padding_idx += int(weight.shape[0])
    if padding_idx is not None and padding_idx >= 0:
        kept = b.op("Not", b.op("Equal", indices, b.const(padding_idx, indices.dtype)))
        member = b.op("And", member, kept)
    weights = b.cast(member, dtype)
    counts = b.op("ReduceSum", weights, b.ints([1]), keepdims=1)  # (B, 1)
    if _BAG_MODES[mode] == "max":
        candidates = b.op(
            "Where",
            b.op("Unsqueeze", member, b.ints([2])),
            b.op("Unsqueeze", rows, b.ints([0])),
            b.const(-math.inf, dtype),
        )
        largest = b.op("ReduceMax", candidates, axes=[1], keepdims=0)
        bags = b.op("Where", b.op("Greater", counts, b.const(0, dtype)), largest, b.const(0, dtype), dtype=dtype)
    elif _BAG_MODES[mode] == "sum":
        scaled = weights if per_sample_weights is None else b.op("Mul", weights, per_sample_weights)
        bags = b.op("MatMul", scaled, rows, dtype=dtype)
    else:
        bags = b.op("Div", b.op("MatMul", weights, rows), b.op("Max", counts, b.const(1, dtype)), dtype=dtype)
    return bags, None, None, None
