"""first_divergence: the node where an engine first departs from eager PyTorch.

Method (the same on ONNX Runtime and TensorRT): every engine is replayed with the eager values of
its inputs and its outputs compared with eager; the first engine (in graph order) that fails is
bisected. Each half is converted on its own by the same converters, built on the same backend,
fed the eager values of its inputs, and its outputs compared; the search goes into the first half
that fails, down to one node (with its getitems). So a node is blamed only when its own inputs
were right, and no intermediate tensor of the real engine is ever marked as an output: on
TensorRT, marking a tensor as a network output forces it to be materialized, which breaks the
fusions that would have consumed it (conv+bias+activation, pointwise chains, attention) and so
changes the very kernels whose numbers are in question. A divergence that shows only when two
halves run together (a fusion across them, or errors that only add up) is reported with the
nodes of the smallest range that still fails.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from trt_lower.debug.compare import compare
from trt_lower.debug.replay import EngineNodes, Replay
from trt_lower.values.call import Inputs
from trt_lower.verify.nodes import Node, module_of, source_line, units


@dataclass(frozen=True)
class NodeError:
    """One compared value: the node's engine-computed value against its eager value, with the
    checked segment fed eager inputs."""

    engine: str
    node: str
    op: str
    segment: str  # the nodes converted together for this check ("first..last (n nodes)")
    max_abs: float
    max_rel: float
    passed: bool


@dataclass(frozen=True)
class Divergence:
    """The first node whose engine-computed value departs from eager while its inputs are eager's:
    its engine, ATen op, ONNX nodes, module path and source line, and every check on the way."""

    engine: str
    node: str  # the FX node (its name in the captured graph and in report.fallbacks)
    op: str
    onnx_nodes: list[str]  # what the converters made of it, in the engine's ONNX
    module_path: str  # nn_module_stack: the submodule that called the op ("" for the top module)
    module_type: str
    source: str  # the innermost stack_trace frame outside torch: "file:line in fn: code"
    max_abs: float
    max_rel: float
    # More than one when the divergence shows only with these nodes converted together.
    nodes: list[str] = field(default_factory=list)
    table: list[NodeError] = field(default_factory=list)

    def __str__(self) -> str:
        where = f"{self.module_path or '<model>'} ({self.module_type})" if self.module_type else self.module_path
        lines = [
            f"first divergence: node {self.node} ({self.op}) in {self.engine}, "
            f"max abs err {self.max_abs:.3g}, max rel err {self.max_rel:.3g}",
            f"  module: {where}",
            f"  source: {self.source}",
            f"  ONNX nodes: {', '.join(self.onnx_nodes)}",
        ]
        if len(self.nodes) > 1:
            lines.append(
                f"  diverges only with these {len(self.nodes)} nodes in one segment "
                f"(a fusion or accumulated error): {', '.join(self.nodes)}"
            )
        lines.append(format_table(self.table))
        return "\n".join(lines)


def format_table(rows: Sequence[NodeError]) -> str:
    lines = ["  checks (segment fed eager inputs -> value compared with eager):"]
    for r in rows:
        lines.append(
            f"    {r.engine:<10} {r.node:<32} abs {r.max_abs:9.3g}  rel {r.max_rel:9.3g}  "
            f"{'ok  ' if r.passed else 'FAIL'}  in {r.segment}"
        )
    return "\n".join(lines)


def _describe(nodes: Sequence[Node]) -> str:
    return nodes[0].name if len(nodes) == 1 else f"{nodes[0].name}..{nodes[-1].name} ({len(nodes)} nodes)"


class _Search:
    def __init__(self, replay: Replay, rtol: float, atol: float) -> None:
        self.replay, self.rtol, self.atol = replay, rtol, atol
        self.table: list[NodeError] = []
        self.checks = 0

    def failures(self, engine: EngineNodes, nodes: list[Node]) -> list[NodeError]:
        """Run `nodes` as one segment fed eager inputs; the rows of its outputs that fail."""
        outputs = self.replay.boundary(nodes, engine)
        if not outputs:
            return []
        self.checks += 1
        actual = self.replay.run(nodes, outputs, f"{engine.name}_check{self.checks}")
        rows = []
        for n, a in zip(outputs, actual):
            err = compare(n.name, self.replay.values[n], a, self.rtol, self.atol)
            rows.append(
                NodeError(engine.name, n.name, str(n.target), _describe(nodes), err.max_abs, err.max_rel, err.passed)
            )
        self.table += rows
        return [r for r in rows if not r.passed]

    def bisect(self, engine: EngineNodes) -> tuple[list[Node], NodeError] | None:
        groups = units(engine.nodes)
        failed = self.failures(engine, list(engine.nodes))
        if not failed:
            return None
        while len(groups) > 1:
            half = len(groups) // 2
            for part in (groups[:half], groups[half:]):
                part_failed = self.failures(engine, [n for g in part for n in g])
                if part_failed:
                    groups, failed = part, part_failed
                    break
            else:
                break  # only the two halves together diverge
        return [n for g in groups for n in g], failed[0]


def first_divergence(
    model: torch.nn.Module,
    lowered: torch.nn.Module,
    inputs: Inputs,
    *,
    kwargs: dict[str, Any] | None = None,
    rtol: float,
    atol: float,
) -> Divergence | None:
    """The first node, in graph order, whose engine-computed value departs from eager PyTorch
    beyond `atol + rtol * |eager|` when its own inputs are eager's, for `model(*inputs, **kwargs)`
    (as lower_to_trt takes them); None when no engine departs."""
    replay = Replay(model, lowered, inputs, kwargs)
    search = _Search(replay, rtol, atol)
    for engine in replay.engines:
        found = search.bisect(engine)
        if found is None:
            continue
        nodes, row = found
        blamed = next(n for n in nodes if n.name == row.node)
        if blamed.target is operator.getitem and isinstance(blamed.args[0], Node):
            blamed = blamed.args[0]  # the multi-output op its converter made
        segment, _ = replay.convert(engine.nodes, engine.outputs, engine.name, engine.inputs)
        onnx_nodes = [n.name for n in segment.onnx.model.graph.node if n.name.split("/")[0] == blamed.name]
        path, kind = module_of(blamed)
        return Divergence(
            engine.name,
            blamed.name,
            str(blamed.target),
            onnx_nodes,
            path,
            kind,
            source_line(blamed),
            row.max_abs,
            row.max_rel,
            [n.name for n in nodes if n.target is not operator.getitem],
            search.table,
        )
    return None
