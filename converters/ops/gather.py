"""Gathers: embedding, gather, index_select, as_strided (a gather at positions its strides name)."""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch._prims_common import is_non_overlapping_and_dense_or_false

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.common import normalize_dim
from converters.core.dims import input_val, node_arg
from converters.core.registry import converter
from converters.core.target import Target

aten = torch.ops.aten


@converter(aten.embedding.default)
def embedding(b: GraphBuilder, weight: Value, indices: Value, padding_idx: int = -1,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Ref:
    """embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False,
    bool sparse=False) -> Tensor"""
    return b.op("Gather", weight, indices, axis=0, dtype=weight.dtype)


def _not_0d(node: torch.fx.Node, target: Target) -> Optional[str]:
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
        return "as_strided with a dynamic shape, stride or offset"
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


def _gather_strides(node: torch.fx.Node, target: Target) -> Optional[str]:
    positions = _strided_positions(node)
    return positions if isinstance(positions, str) else None


@converter(aten.as_strided.default, capability=_gather_strides)
def as_strided(b: GraphBuilder, x: Value, size: Sequence[int], stride: Sequence[int],
               storage_offset: int | None = None) -> Ref:
    """as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor(a)

    A gather of the flattened input at constant positions (a reshape where they are in order).
    """
    positions = _strided_positions(b.converting)
    assert isinstance(positions, torch.Tensor), positions
    flat = b.op("Reshape", x, b.ints([-1]), dtype=x.dtype)
    n = input_val(b.converting, 0).numel()
    if positions.numel() == n and torch.equal(positions.flatten(), torch.arange(n)):
        return b.op("Reshape", flat, b.ints(list(size)), allowzero=1 if 0 in size else None, dtype=x.dtype)
    return b.op("Gather", flat, b.initializer("as_strided_positions", positions), axis=0, dtype=x.dtype)
