"""The lowered graph as the report keeps it (LoweringReport.graph, what the picture draws)."""

from __future__ import annotations

import operator

import torch

from splitter.partition import ENGINE_PREFIX
from splitter.support import target_label
from trt_lower.report.entries import GraphNode


def _tensor(val: object) -> str:
    if isinstance(val, torch.Tensor):
        dims = "×".join(str(d) for d in val.shape) or "scalar"
        return f"{dims} {str(val.dtype).removeprefix('torch.')}"
    return type(val).__name__ if val is not None else ""


def describe(graph: torch.fx.Graph) -> list[GraphNode]:
    """The lowered graph as the picture shows it: getitems folded into the edge from the node
    they select from, weights (get_attr) and the input guard left out."""
    source: dict[torch.fx.Node, torch.fx.Node] = {}  # a getitem -> the node it selects from
    nodes = []
    for node in graph.nodes:
        selected = node.args[0] if node.target is operator.getitem else None
        if isinstance(selected, torch.fx.Node) and selected in source:
            source[node] = source[selected]
            continue
        source[node] = node
        if node.op in ("get_attr", "call_module") and not str(node.target).startswith(ENGINE_PREFIX):
            continue
        kind = {"placeholder": "input", "output": "output", "call_module": "engine"}.get(node.op, "eager")
        edges = tuple(
            (source[a].name, _tensor(a.meta.get("val")))
            for a in node.all_input_nodes
            if source.get(a, a).op != "get_attr"
        )
        nodes.append(GraphNode(node.name, kind, target_label(node.target), edges))
    return nodes
