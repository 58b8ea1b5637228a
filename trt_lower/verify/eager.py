"""The eager values verification compares engines with: one eager run of the split graph on the
example inputs (its engine segments still FX subgraphs), keeping only the values at engine
boundaries; any other node's value is computed on demand, in the captured graph unsplit, from
the nearest kept values (a bisection needs those inside one engine)."""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import torch
import torch.utils._pytree as pytree

from trt_lower.verify.nodes import Node

Values = dict[str, Any]


class _SplitRecorder(torch.fx.Interpreter):
    """Runs the split graph eagerly, keeping by captured-graph node name the values of the nodes
    in `keep`: of its own nodes, and of each engine segment's outputs (`outputs`: segment ->
    the node each output stands for)."""

    def __init__(self, gm: torch.fx.GraphModule, keep: frozenset[str], outputs: dict[str, list[str]]) -> None:
        super().__init__(gm)
        self.keep, self.outputs = keep, outputs
        self.values: Values = {}

    def run_node(self, n: Node) -> Any:
        value = super().run_node(n)
        names = self.outputs.get(str(n.target)) if n.op == "call_module" else None
        if names is not None:
            results = value if isinstance(value, (tuple, list)) else (value,)
            self.values.update((k, v) for k, v in zip(names, results) if k in self.keep)
        elif n.name in self.keep or n.op == "placeholder":
            self.values[n.name] = value
        return value


class EagerValues:
    """Eager values by captured-graph node name, for the split graph `split` called with `inputs`
    (its flattened tensors); `flat` makes the captured graph unsplit, when a value not kept is
    asked for."""

    def __init__(
        self,
        split: torch.fx.GraphModule,
        inputs: Sequence[torch.Tensor],
        keep: frozenset[str],
        outputs: dict[str, list[str]],
        flat: Callable[[], torch.fx.GraphModule],
    ) -> None:
        recorder = _SplitRecorder(split, keep, outputs)
        with torch.no_grad():
            self.outputs = tuple(
                t
                for t in pytree.tree_leaves(recorder.run(*inputs))  # the model's, flattened
                if isinstance(t, torch.Tensor)
            )
        self.known: Values = recorder.values
        self._flat = flat

    @functools.cached_property
    def gm(self) -> torch.fx.GraphModule:
        return self._flat()

    @functools.cached_property
    def nodes(self) -> dict[str, Node]:
        return {n.name: n for n in self.gm.graph.nodes}

    @functools.cached_property
    def order(self) -> dict[Node, int]:
        return {n: i for i, n in enumerate(self.gm.graph.nodes)}

    def node(self, name: str) -> Node:
        return self.nodes[name]

    def __getitem__(self, node: Node | str) -> Any:
        name = node if isinstance(node, str) else node.name
        if name not in self.known:
            self._compute(self.nodes[name])
        return self.known[name]

    def _compute(self, node: Node) -> None:
        """`node`'s value and those of its ancestors not known yet, in graph order (no recursion:
        a chain may be thousands of nodes long)."""
        missing: set[Node] = set()
        stack = [node]
        while stack:
            n = stack.pop()
            if n.name in self.known or n in missing:
                continue
            if n.op == "placeholder":
                raise KeyError(f"no eager value for input {n.name}")
            missing.add(n)
            stack.extend(n.all_input_nodes)
        with torch.no_grad():
            for n in sorted(missing, key=self.order.__getitem__):
                if n.op == "get_attr":
                    self.known[n.name] = functools.reduce(getattr, str(n.target).split("."), self.gm)
                else:
                    args, kwargs = torch.fx.node.map_arg((n.args, n.kwargs), self.__getitem__)
                    self.known[n.name] = n.target(*args, **kwargs)  # type: ignore[operator]
