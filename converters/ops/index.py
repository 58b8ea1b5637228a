"""Advanced indexing: x[i, j] (index.Tensor) and x[i, j] = v (index_put).

One integer index tensor is a Gather. Several are broadcast, stacked along a new last axis and used
by GatherND / ScatterND over x with the indexed dims moved to the front; torch then places the
broadcast index dims first, or where the indexed dims were when those are adjacent. Negative
indices are made positive first (torch allows them; TensorRT's gathers expect them in range).

One boolean mask (x[mask], x[:, mask]) selects a data-dependent number of elements: a GatherND
at the mask's NonZero coordinates (nonzero.py). x[mask] = scalar is a Where.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import torch

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.dims import (
    INT64_MAX,
    dim_size_scalar,
    input_val,
    node_arg,
    same_static_shape,
    static,
    static_numel,
)
from converters.core.registry import converter
from converters.core.target import TrtTarget
from converters.core.where import where
from converters.ops.nonzero import masked

aten = torch.ops.aten
Indices = Sequence[Optional[Value]]
_INDEX_DTYPES = (torch.int32, torch.int64)
_SCATTER_DTYPES = (torch.float32, torch.float16, torch.int32, torch.int64)  # TensorRT's ScatterND


def _index_vals(node: torch.fx.Node) -> list[torch.Tensor]:
    return [i.meta["val"] for i in node_arg(node, 1, "indices") if i is not None]


def _int_indices(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    if input_val(node, 0).dim() == 0:
        return "indexing a 0-d tensor"
    vals = _index_vals(node)
    if any(v.dtype == torch.bool for v in vals):
        if len(vals) > 1:
            return "a boolean mask beside other indices"
        return "a 0-d boolean mask" if vals[0].dim() == 0 else None
    for val in vals:
        if val.dtype not in _INDEX_DTYPES:
            return f"{val.dtype} index"
    return None


def _normalized(b: GraphBuilder, x: Value, index: Value, axis: int) -> Ref:
    index = b.cast(index, torch.int64)
    negative = b.op("Less", index, b.const(0, torch.int64))
    return b.op("Where", negative, b.op("Add", index, dim_size_scalar(b, x, axis)), index, dtype=torch.int64)


class _Plan:
    """The indexed dims moved to the front of x, and the stacked (broadcast) indices."""

    def __init__(self, b: GraphBuilder, x: Value, indices: Indices) -> None:
        self.positions = [p for p, i in enumerate(indices) if i is not None]
        self.others = [d for d in range(x.rank) if d not in self.positions]
        self.perm = self.positions + self.others
        self.moved = self.perm != list(range(x.rank))
        self.x = b.op("Transpose", x, perm=self.perm, dtype=x.dtype) if self.moved else x
        given = [i for i in indices if i is not None]
        self.index_rank = max(i.rank for i in given)
        normalized = [_normalized(b, x, i, p) for p, i in zip(self.positions, given)]
        if not all(same_static_shape(i.shape, given[0].shape) for i in given):
            # Broadcast to the shape of their sum (known at runtime).
            total = normalized[0]
            for i in normalized[1:]:
                total = b.op("Add", total, i)
            common = b.op("Shape", total)
            normalized = [b.op("Expand", i, common) for i in normalized]
        columns = [b.op("Unsqueeze", i, b.ints([-1])) for i in normalized]
        self.stacked = columns[0] if len(columns) == 1 else b.op("Concat", *columns, axis=-1)
        first = self.positions[0]
        adjacent = self.positions == list(range(first, first + len(self.positions)))
        # torch keeps adjacent indexed dims in place: the index dims go where the first one was.
        self.inner = first if adjacent else 0

    def torch_order(self, out_rank: int) -> list[int] | None:
        """The Transpose from (index dims, other dims) to torch's result order, or None."""
        n, before = self.index_rank, self.inner
        if before == 0:
            return None
        return [*range(n, n + before), *range(n), *range(n + before, out_rank)]


@converter(aten.index.Tensor, capability=_int_indices)
def index(b: GraphBuilder, x: Value, indices: Indices) -> Ref:
    """index.Tensor(Tensor self, Tensor?[] indices) -> Tensor"""
    given = [(p, i) for p, i in enumerate(indices) if i is not None]
    if len(given) == 1 and given[0][1].dtype == torch.bool:
        return masked(b, x, given[0][1], given[0][0])
    if len(given) == 1:
        axis, i = given[0]
        return b.op("Gather", x, _normalized(b, x, i, axis), axis=axis, dtype=x.dtype)
    plan = _Plan(b, x, indices)
    out = b.op("GatherND", plan.x, plan.stacked, dtype=x.dtype)
    order = plan.torch_order(len(b.out.shape))
    return b.op("Transpose", out, perm=order, dtype=x.dtype) if order else out


def _index_put_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    x = input_val(node, 0)
    if x.dim() == 0:
        return "indexing a 0-d tensor"
    vals = _index_vals(node)
    if any(v.dtype not in _INDEX_DTYPES for v in vals):
        values = input_val(node, 2)
        if len(vals) == 1 and vals[0].dtype == torch.bool and static_numel(values.shape) == 1:
            return None  # x[mask] = scalar
        return "boolean-mask assignment of more than one value (which elements get which is data-dependent)"
    if x.dtype not in _SCATTER_DTYPES:
        return f"TensorRT's ScatterND takes no {x.dtype} tensors"
    if node_arg(node, 3, "accumulate", False):
        if not trt_target.at_least("10.4"):
            return (
                f"accumulate=True needs ScatterElements with reduction 'add' (TensorRT 10.0+, target "
                f"{trt_target.label}); ScatterND has no reduction on TensorRT"
            )
        indexed = [x.shape[p] for p, i in enumerate(node_arg(node, 1, "indices")) if i is not None]
        if len(indexed) > 1 and static_numel(indexed) is None:
            return "accumulate=True over several indexed dims of which one is dynamic"
    return None


def _masked_put(b: GraphBuilder, x: Value, indices: Indices, values: Value, accumulate: bool) -> Ref:
    """x[mask] = v (one value), or x[mask] += v: the mask covers the dims from its position on;
    trailing dims broadcast."""
    position, given = next((p, i) for p, i in enumerate(indices) if i is not None)
    trailing = x.rank - position - given.rank
    mask: Ref = given
    if trailing:
        mask = b.op("Unsqueeze", given, b.ints(list(range(given.rank, given.rank + trailing))))
    value = b.op("Reshape", b.cast(values, x.dtype), b.ints([]))
    if accumulate:
        value = b.op("Add", x, value, dtype=x.dtype)
    return where(b, mask, value, x, x.dtype)


@converter(aten.index_put.default, capability=_index_put_capability)
def index_put(b: GraphBuilder, x: Value, indices: Indices, values: Value, accumulate: bool = False) -> Ref:
    """index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor

    ScatterND of the values broadcast to the indexed result's shape (reordered like x's dims);
    with accumulate, a ScatterElements that adds (_accumulated).
    """
    if any(i is not None and i.dtype == torch.bool for i in indices):
        return _masked_put(b, x, indices, values, accumulate)
    plan = _Plan(b, x, indices)
    cast = b.cast(values, x.dtype)
    updates: Ref = cast
    out_rank = plan.index_rank + len(plan.others)
    order = plan.torch_order(out_rank)
    if order:
        if cast.rank < out_rank:
            updates = b.op("Unsqueeze", cast, b.ints(list(range(out_rank - cast.rank))))
        inverse = [order.index(d) for d in range(out_rank)]
        updates = b.op("Transpose", updates, perm=inverse)
    index_dims = b.op("Slice", b.op("Shape", plan.stacked), b.ints([0]), b.ints([-1]), b.ints([0]))
    kept_dims = b.op("Slice", b.op("Shape", plan.x), b.ints([len(plan.positions)]), b.ints([INT64_MAX]), b.ints([0]))
    updates = b.op("Expand", updates, b.op("Concat", index_dims, kept_dims, axis=0))
    if accumulate:
        out = _accumulated(b, x, plan, updates)
    else:
        out = b.op("ScatterND", plan.x, plan.stacked, updates, dtype=x.dtype)
    if not plan.moved:
        return out
    return b.op("Transpose", out, perm=[plan.perm.index(d) for d in range(x.rank)], dtype=x.dtype)


def _accumulated(b: GraphBuilder, x: Value, plan: _Plan, updates: Ref) -> Ref:
    """plan.x with `updates` added at the stacked indices, repeats summed. TensorRT's ScatterND
    has no reduction but its ScatterElements has 'add': the indexed dims are flattened into one
    (row = the linear index over them), the rest into columns, and each update row is added to
    its row."""
    if len(plan.positions) == 1:
        rows: Ref = plan.stacked
        flat_x = b.op("Reshape", plan.x, b.ints([0, -1]))  # 0 keeps the indexed dim's size
    else:
        sizes = [static(x.shape[p], "an indexed dim") for p in plan.positions]  # as the capability made sure
        strides = [math.prod(sizes[j + 1 :]) for j in range(len(sizes))]
        rows = b.op("ReduceSum", b.op("Mul", plan.stacked, b.ints(strides)), b.ints([-1]), keepdims=1)
        flat_x = b.op("Reshape", plan.x, b.ints([math.prod(sizes), -1]))
    columns = b.op("Slice", b.op("Shape", flat_x), b.ints([1]), b.ints([2]), b.ints([0]))
    flat_updates = b.op("Reshape", updates, b.op("Concat", b.ints([-1]), columns, axis=0))
    flat_rows = b.op("Expand", b.op("Reshape", rows, b.ints([-1, 1])), b.op("Shape", flat_updates))
    summed = b.op("ScatterElements", flat_x, flat_rows, flat_updates, axis=0, reduction="add")
    return b.op("Reshape", summed, b.op("Shape", plan.x), dtype=x.dtype)
