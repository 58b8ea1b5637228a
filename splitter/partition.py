"""Acyclic partitioning of an ATen graph into engine segments, using torch.fx's partitioner."""
from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.utils.fuser_utils import fuse_by_partitions

from splitter.support import ConverterSupport

aten = torch.ops.aten

# Ops that only reinterpret or select from a tensor: they don't count as compute, for coverage
# nor for min_block_size.
NON_COMPUTE = frozenset(
    {
        operator.getitem,
        aten.view.default,
        aten._unsafe_view.default,
        aten.permute.default,
        aten.t.default,
        aten.transpose.int,
        aten.expand.default,
        aten.unsqueeze.default,
        aten.squeeze.default,
        aten.squeeze.dim,
        aten.squeeze.dims,
        aten.alias.default,
        aten.detach.default,
        aten.clone.default,
        aten.slice.Tensor,
        aten.select.int,
        aten.sym_size.int,
    }
)

ENGINE_PREFIX = "engine_"


def is_compute(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target not in NON_COMPUTE


@dataclass
class Split:
    """The graph with each engine segment fused into a `engine_<k>` submodule (in graph order)
    and why every other call_function node stayed eager."""

    gm: torch.fx.GraphModule
    engines: list[str]
    fallbacks: dict[torch.fx.Node, str]


class _Partitioner(CapabilityBasedPartitioner):
    """The fx partitioner rebuilds dict(gm.named_modules()) for every node it asks about (a
    tenth of a second on ResNet-50); ConverterSupport never looks at submodules."""

    def _is_node_supported(self, node: torch.fx.Node) -> bool:
        return self.operator_support.is_node_supported({}, node)


def split(gm: torch.fx.GraphModule, support: ConverterSupport, min_block_size: int) -> Split:
    """Partition `gm` in place. Segments with fewer than `min_block_size` compute ops stay eager:
    an engine boundary costs more than such a segment saves."""
    partitioner = _Partitioner(gm, support, allows_single_node_partition=True)
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    kept = []
    fallbacks: dict[torch.fx.Node, str] = {}
    for partition in partitioner.propose_partitions():
        size = sum(is_compute(n) for n in partition.nodes)
        if size >= max(min_block_size, 1):
            kept.append(partition)
        else:
            for n in partition.nodes:
                if is_compute(n):
                    fallbacks[n] = f"its segment has {size} compute op(s), fewer than min_block_size={min_block_size}"
    for node, reason in support.reasons.items():
        fallbacks.setdefault(node, reason)
    fallbacks = {n: r for n, r in fallbacks.items() if is_compute(n) and not _in(kept, n)}
    kept.sort(key=lambda p: min(order[n] for n in p.nodes))
    fuse_by_partitions(gm, [p.nodes for p in kept], prefix=ENGINE_PREFIX)
    return Split(gm, [f"{ENGINE_PREFIX}{i}" for i in range(len(kept))], fallbacks)


def _in(partitions: list, node: torch.fx.Node) -> bool:
    return any(node in p.nodes for p in partitions)
