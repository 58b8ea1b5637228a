"""Gathers: embedding, gather, index_select."""
from __future__ import annotations

from typing import Optional

import torch

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.common import normalize_dim
from converters.core.dims import input_val
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
