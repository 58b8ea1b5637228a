"""Code generated for a graph whose nodes call something else than the ops they record.

The graph keeps the ops (the artifact, the report and the splitter read them); the code
torch.fx generates from it calls, for some nodes, a function standing in for the op (a proven
binding, a collective that fails by name, an op checked against the allocation budget). The
nodes are retargeted only while the code is generated."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import torch


@contextlib.contextmanager
def retargeted(
    graph: torch.fx.Graph, target_of: Callable[[torch.fx.Node], Callable[..., Any] | None]
) -> Iterator[None]:
    """Inside: every call_function node of `graph` for which `target_of` gives a function targets
    it (`target_of` sees the graph as it was on entry); after: the graph as it was."""
    swapped = [
        (node, node.target, fn)
        for node in graph.nodes
        if node.op == "call_function" and (fn := target_of(node)) is not None
    ]
    for node, _, fn in swapped:
        node.target = fn
    try:
        yield
    finally:
        for node, op, _ in swapped:
            node.target = op
