"""Advanced indexing: x[i, j] (index.Tensor) and x[i, j] = v (index_put).

One integer index tensor is a Gather. Several are broadcast, stacked along a new last axis and used
by GatherND / ScatterND over x with the indexed dims moved to the front; torch then places the
broadcast index dims first, or where the indexed dims were when those are adjacent. Negative
indices are made positive first (torch allows them; TensorRT's gathers expect them in range).

Boolean masks select a data-dependent number of elements, which an engine cannot shape, except
x[mask] = scalar: that is a Where.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.dims import INT64_MAX, dim_size_scalar, input_val, node_arg, same_static_shape, static_numel
from converters.core.registry import converter
from converters.core.target import Target
from converters.core.where import where

aten = torch.ops.aten
Indices = Sequence[Optional[Value]]
_INDEX_DTYPES = (torch.int32, torch.int64)
_SCATTER_DTYPES = (torch.float32, torch.float16, torch.int32, torch.int64)  # TensorRT's ScatterND


def _index_vals(node: torch.fx.Node) -> list[torch.Tensor]:
    return [i.meta["val"] for i in node_arg(node, 1, "indices") if i is not None]


def _int_indices(node: torch.fx.Node, target: Target) -> Optional[str]:
    if input_val(node, 0).dim() == 0:
        return "indexing a 0-d tensor"
    for val in _index_vals(node):
        if val.dtype not in _INDEX_DTYPES:
            return f"{val.dtype} index: a boolean mask selects a data-dependent number of elements"
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
    if len(given) == 1:
        axis, i = given[0]
        return b.op("Gather", x, _normalized(b, x, i, axis), axis=axis, dtype=x.dtype)
    plan = _Plan(b, x, indices)
    out = b.op("GatherND", plan.x, plan.stacked, dtype=x.dtype)
    order = plan.torch_order(len(b.out.shape))
    return b.op("Transpose", out, perm=order, dtype=x.dtype) if order else out


def _index_put_capability(node: torch.fx.Node, target: Target) -> Optional[str]:
    x = input_val(node, 0)
    accumulate = node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False)
    if accumulate:
        return "accumulate=True: TensorRT's ScatterND has no reduction"
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
    return None


def _masked_put(b: GraphBuilder, x: Value, indices: Indices, values: Value) -> Ref:
    """x[mask] = v (one value): the mask covers the dims from its position on; trailing dims
    broadcast."""
    position, given = next((p, i) for p, i in enumerate(indices) if i is not None)
    trailing = x.rank - position - given.rank
    mask: Ref = given
    if trailing:
        mask = b.op("Unsqueeze", given, b.ints(list(range(given.rank, given.rank + trailing))))
    value = b.op("Reshape", b.cast(values, x.dtype), b.ints([]))
    return where(b, mask, value, x, x.dtype)


@converter(aten.index_put.default, capability=_index_put_capability)
def index_put(b: GraphBuilder, x: Value, indices: Indices, values: Value, accumulate: bool = False) -> Ref:
    """index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor

    ScatterND of the values broadcast to the indexed result's shape (reordered like x's dims).
    """
    if any(i is not None and i.dtype == torch.bool for i in indices):
        return _masked_put(b, x, indices, values)
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
    out = b.op("ScatterND", plan.x, plan.stacked, updates, dtype=x.dtype)
    if not plan.moved:
        return out
    return b.op("Transpose", out, perm=[plan.perm.index(d) for d in range(x.rank)], dtype=x.dtype)
