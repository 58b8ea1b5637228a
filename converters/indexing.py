"""Gathers: embedding, gather, index_select."""
from __future__ import annotations

from typing import Optional

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


def _not_0d(node: torch.fx.Node) -> Optional[str]:
    """torch gathers from a 0-d tensor as if it were 1-D; ONNX Gather/GatherElements need rank >= 1."""
    if node.args[0].meta["val"].dim() == 0:  # type: ignore[union-attr]
        return "gathering from a 0-d tensor"
    return None


@converter(aten.index_select.default, capability=_not_0d)
def index_select(b: GraphBuilder, x: Value, dim: int, index: Value) -> Value:
    """index_select(Tensor self, int dim, Tensor index) -> Tensor"""
    return b.op("Gather", x, index, axis=normalize_dim(dim, x.rank), dtype=x.dtype)


@converter(aten.gather.default, capability=_not_0d)
def gather(b: GraphBuilder, x: Value, dim: int, index: Value, *, sparse_grad: bool = False) -> Value:
    """gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor"""
    return b.op("GatherElements", x, index, axis=normalize_dim(dim, x.rank), dtype=x.dtype)
