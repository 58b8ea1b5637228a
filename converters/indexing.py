"""Gathers: embedding, gather, index_select."""
from __future__ import annotations

import torch

from converters._common import normalize_dim
from converters.builder import GraphBuilder, Value
from converters.registry import converter

aten = torch.ops.aten


@converter(aten.embedding.default)
def embedding(b: GraphBuilder, weight: Value, indices: Value, padding_idx: int = -1,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Value:
    """embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False,
    bool sparse=False) -> Tensor"""
    return b.op("Gather", weight, indices, axis=0, dtype=weight.dtype)


@converter(aten.index_select.default)
def index_select(b: GraphBuilder, x: Value, dim: int, index: Value) -> Value:
    """index_select(Tensor self, int dim, Tensor index) -> Tensor"""
    return b.op("Gather", x, index, axis=normalize_dim(dim, max(x.rank, 1)), dtype=x.dtype)


@converter(aten.gather.default)
def gather(b: GraphBuilder, x: Value, dim: int, index: Value, *, sparse_grad: bool = False) -> Value:
    """gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor"""
    return b.op("GatherElements", x, index, axis=normalize_dim(dim, max(x.rank, 1)), dtype=x.dtype)
