"""Acyclic partitioning of an ATen graph into engine segments, using torch.fx's partitioner."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Mapping, TypeGuard

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner, Partition
from torch.fx.passes.utils.fuser_utils import fuse_by_partitions

from splitter.index_check import is_index_test
from splitter.support import ConverterSupport, is_check, is_size

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
    return (
        node.op == "call_function"
        and node.target not in NON_COMPUTE
        and not is_size(node)
        and not is_check(node)
        and not is_index_test(node)
    )


def _copy_size(
    gm: torch.fx.GraphModule,
    node: torch.fx.Node,
    inside: Mapping[torch.fx.Node, object],
    into: Partition | None,
    before: torch.fx.Node,
) -> torch.fx.Node:
    """A copy of size node `node` placed inside partition `into` (or outside any, if None), with
    its own size inputs copied along when they sit on the other side of the boundary."""

    def arg(a: torch.fx.Node) -> torch.fx.Node:
        if is_size(a) and ((a in inside) != (into is not None)):
            return _copy_size(gm, a, inside, into, before)
        return a

    with gm.graph.inserting_before(before):
        copy = gm.graph.node_copy(node, arg)
    copy.meta = dict(node.meta)
    if into is not None:
        into.add_node(copy)
    return copy


def _keep_sizes_local(gm: torch.fx.GraphModule, partitions: list[Partition]) -> None:
    """Engines exchange tensors only: a size crossing a segment boundary is recomputed on the
    other side from the tensors it derives from (a Shape op inside an engine, a Python int
    outside), which is also how TensorRT wants shape arithmetic."""
    for p in partitions:
        for node in list(p.nodes):
            for a in node.all_input_nodes:
                if is_size(a) and a not in p.nodes:
                    node.replace_input_with(a, _copy_size(gm, a, p.nodes, p, node))
            outside_users = [u for u in node.users if u not in p.nodes]
            if is_size(node) and outside_users:
                copy = _copy_size(gm, node, p.nodes, None, outside_users[0])
                for u in outside_users:
                    u.replace_input_with(node, copy)


@dataclass
class Split:
    """The graph with each engine segment fused into a `engine_<k>` submodule (in graph order)
    and why every other call_function node stayed eager."""

    gm: torch.fx.GraphModule
    engines: list[str]
    fallbacks: dict[torch.fx.Node, str]


class _Partitioner(CapabilityBasedPartitioner):
    """The fx partitioner rebuilds dict(gm.named_modules()) for every node it asks about;
    ConverterSupport never looks at submodules, so that work is skipped."""

    def _is_node_supported(self, node: torch.fx.Node) -> bool:
        return self.operator_support.is_node_supported({}, node)


def _mark_outputs(gm: torch.fx.GraphModule, partitions: list[Partition], names: frozenset[str]) -> None:
    """Make each node named in `names` an output of its engine: an unused alias of it after the
    last node, outside every partition. On TensorRT an engine output is materialized, so no fused
    kernel spans it (a "fusion breaker", the repair for a miscompiled fusion)."""
    output = next(iter(gm.graph.find_nodes(op="output")))
    for p in partitions:
        for node in [n for n in p.nodes if n.name in names and all(u in p.nodes for u in n.users)]:
            with gm.graph.inserting_before(output):
                alias = gm.graph.call_function(aten.alias.default, (node,))
            alias.meta = {"val": node.meta.get("val")}


def split(
    gm: torch.fx.GraphModule,
    support: ConverterSupport,
    min_block_size: int,
    extra_outputs: frozenset[str] = frozenset(),
) -> Split:
    """Stage 2. In: the captured graph (partitioned in place), the support oracle,
    min_block_size, and the nodes whose values their engines are to output although only the
    engine reads them (`_mark_outputs`). Out: a Split: the graph with each engine segment fused
    into an `engine_<k>` submodule, and why each other compute node stays eager. Segments with
    fewer than `min_block_size` compute ops stay eager: an engine boundary costs more than they
    save."""
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
    _keep_sizes_local(gm, kept)
    _mark_outputs(gm, kept, extra_outputs)
    fuse_by_partitions(gm, [p.nodes for p in kept], prefix=ENGINE_PREFIX)
    return Split(gm, [f"{ENGINE_PREFIX}{i}" for i in range(len(kept))], fallbacks)


def _in(partitions: list[Partition], node: torch.fx.Node) -> bool:
    return any(node in p.nodes for p in partitions)


def is_constant(arg: object) -> TypeGuard[torch.fx.Node]:
    """A segment argument that is a weight: it becomes an ONNX initializer, not an engine input."""
    return isinstance(arg, torch.fx.Node) and arg.op == "get_attr"


def call_node(gm: torch.fx.GraphModule, name: str) -> torch.fx.Node:
    """The node of `gm` that calls submodule `name`."""
    node: torch.fx.Node = next(n for n in gm.graph.nodes if n.op == "call_module" and n.target == name)
    return node
