"""The eager values verification compares engines with: one eager run of the captured graph on
the example inputs, keeping only the values at engine boundaries; any other node's value is
computed on demand from the nearest kept values (a bisection needs those inside one engine)."""
from __future__ import annotations

import functools
from typing import Any, Sequence

import torch
import torch.utils._pytree as pytree

from trt_lower.verify.nodes import Node, Recorder


class EagerValues:
    """Values by node name of `gm` (the captured graph, unsplit) called with `inputs` (its
    flattened tensors)."""

    def __init__(self, gm: torch.fx.GraphModule, inputs: Sequence[torch.Tensor], keep: frozenset[str]) -> None:
        self.gm = gm
        self.nodes = {n.name: n for n in gm.graph.nodes}
        self.order = {n: i for i, n in enumerate(gm.graph.nodes)}
        recorder = Recorder(gm, keep | {n.name for n in gm.graph.find_nodes(op="placeholder")})
        with torch.no_grad():
            self.outputs = tuple(pytree.tree_leaves(recorder.run(*inputs)))  # the model's, flattened
        self.known: dict[Node, Any] = recorder.values

    def node(self, name: str) -> Node:
        found: Node = self.nodes[name]
        return found

    def __getitem__(self, node: Node | str) -> Any:
        node = self.nodes[node] if isinstance(node, str) else node
        if node not in self.known:
            self._compute(node)
        return self.known[node]

    def _compute(self, node: Node) -> None:
        """`node`'s value and those of its ancestors not known yet, in graph order (no recursion:
        a chain may be thousands of nodes long)."""
        missing: set[Node] = set()
        stack = [node]
        while stack:
            n = stack.pop()
            if n in self.known or n in missing:
                continue
            if n.op == "placeholder":
                raise KeyError(f"no eager value for input {n.name}")
            missing.add(n)
            stack.extend(n.all_input_nodes)
        with torch.no_grad():
            for n in sorted(missing, key=self.order.__getitem__):
                if n.op == "get_attr":
                    self.known[n] = functools.reduce(getattr, str(n.target).split("."), self.gm)
                else:
                    args, kwargs = torch.fx.node.map_arg((n.args, n.kwargs), self.__getitem__)
                    self.known[n] = n.target(*args, **kwargs)  # type: ignore[operator]
