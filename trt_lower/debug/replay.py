"""A lowering replayed in eager PyTorch: the captured graph, every node's eager value, which
captured nodes each engine of a lowered module computes, and any subset of those nodes converted
and run on the lowered module's backend, fed with eager values.

The lowered module keeps no FX graph of its engines (a TensorRT engine keeps only its plan), so
the model is captured again: torch.export names nodes deterministically, and the lowered graph's
eager nodes, engine inputs and engine outputs carry the captured graph's node names.
"""
from __future__ import annotations

import dataclasses
import operator
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from converters.core import target
from splitter.partition import ENGINE_PREFIX, Split
from trt_lower.build.engines import build
from trt_lower.capture.graph import capture, check_inputs, graph_module
from trt_lower.convert.driver import convert
from trt_lower.values.segment import ConvertedSegment
from trt_lower import settings as lowering_settings

Node = torch.fx.Node


@dataclass(frozen=True)
class EngineNodes:
    """One engine of the lowered module, as captured-graph nodes (graph order)."""

    name: str
    nodes: tuple[Node, ...]
    inputs: tuple[Node, ...]  # the engine's runtime inputs, in its input order
    outputs: tuple[Node, ...]  # in its output order


class Recorder(torch.fx.Interpreter):
    """Runs the graph in eager PyTorch and keeps every node's value."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self.values: dict[Node, Any] = {}

    def run_node(self, n: Node) -> Any:
        self.values[n] = super().run_node(n)
        return self.values[n]


def _engine_calls(lowered: torch.fx.GraphModule) -> list[tuple[Node, Any]]:
    return [(n, lowered.get_submodule(str(n.target))) for n in lowered.graph.nodes
            if n.op == "call_module" and str(n.target).startswith(ENGINE_PREFIX)]


def _members(outputs: Sequence[Node], inputs: set[Node]) -> set[Node]:
    """The call_function nodes computed between `inputs` and `outputs`: the engine's nodes."""
    found: set[Node] = set()
    stack = list(outputs)
    while stack:
        n = stack.pop()
        if n in found or n in inputs or n.op != "call_function":
            continue
        found.add(n)
        stack.extend(n.all_input_nodes)
    return found


class Replay:
    """`model` captured again for `inputs`, run eagerly, with `lowered`'s engines located in it."""

    def __init__(self, model: torch.nn.Module, lowered: torch.nn.Module, inputs: Sequence[torch.Tensor]) -> None:
        report = getattr(lowered, "report", None)
        if report is None or not isinstance(lowered, torch.fx.GraphModule):
            raise ValueError(f"lowered must be what trt_lower.lower_to_trt returned, got {type(lowered).__name__}")
        tensors = tuple(inputs)
        specs = check_inputs(model, tensors)
        if any(s.dynamic_dims for s in specs):
            raise ValueError("inputs must be tensors (the values to debug with), not TensorSpecs")
        self.gm = graph_module(capture(model, tensors, specs).program)
        self.settings = lowering_settings.create(
            backend=report.backend, precision=report.precision, min_block_size=1, fallback_ops=(),
            require_full=True, trt_version=report.trt_version, keep_fp32=report.keep_fp32)
        recorder = Recorder(self.gm)
        with torch.no_grad():
            recorder.run(*tensors)
        self.values = recorder.values
        self.order = {n: i for i, n in enumerate(self.gm.graph.nodes)}
        by_name = {n.name: n for n in self.gm.graph.nodes}
        self.engines: list[EngineNodes] = []
        for call, module in _engine_calls(lowered):
            try:
                ins = tuple(by_name[a.name] for a in call.args if isinstance(a, Node))
                outs = tuple(by_name[s.source] for s in module.outputs)
            except KeyError as e:
                raise ValueError(f"{call.target} computes node {e.args[0]}, which capturing {type(model).__name__} "
                                 "again did not produce: was `lowered` lowered from this model?") from None
            nodes = sorted(_members(outs, set(ins)), key=self.order.__getitem__)
            self.engines.append(EngineNodes(str(call.target), tuple(nodes), ins, outs))
        self._scratch = tempfile.TemporaryDirectory(prefix="trt_lower_debug_")

    def engine(self, name: str) -> EngineNodes:
        for e in self.engines:
            if e.name == name:
                return e
        raise ValueError(f"no engine {name!r}; the lowered module has {[e.name for e in self.engines]}")

    def is_tensor(self, n: Node) -> bool:
        return isinstance(self.values.get(n), torch.Tensor)

    def boundary(self, nodes: Sequence[Node], engine: EngineNodes) -> list[Node]:
        """What a segment of `nodes` must output: its tensors read outside it or by the model."""
        inside = set(nodes)
        return [n for n in nodes if self.is_tensor(n)
                and (n in engine.outputs or any(u not in inside for u in n.users))]

    def convert(self, nodes: Sequence[Node], outputs: Sequence[Node], name: str,
                first_inputs: Sequence[Node] = ()) -> tuple[ConvertedSegment, list[Node]]:
        """`nodes` as one engine segment returning `outputs`, converted by the convert stage
        exactly as lowering converts an engine (same converters, target, precision rewrite);
        also the nodes whose eager values are its inputs (`first_inputs` first, in order)."""
        graph = torch.fx.Graph()
        env: dict[Node, Node] = {}
        fed: list[Node] = []
        constants: list[Node] = []

        def source(a: Node) -> None:
            env[a] = graph.placeholder(a.name)
            env[a].meta = dict(a.meta)
            (constants if a.op == "get_attr" else fed).append(a)

        for a in first_inputs:
            source(a)
        for n in sorted(nodes, key=self.order.__getitem__):
            for a in n.all_input_nodes:
                if a not in env:
                    source(a)
            env[n] = graph.node_copy(n, env.__getitem__)
        graph.output(tuple(env[o] for o in outputs))
        # The split stage's shape: a parent graph calling the segment, weights as get_attr.
        root = torch.nn.Module()
        root.add_module(name, torch.fx.GraphModule(torch.nn.Module(), graph))
        parent = torch.fx.Graph()
        args = {a: parent.get_attr(a.name) if a in constants else parent.placeholder(a.name) for a in env
                if env[a].op == "placeholder"}
        for a in constants:
            setattr(root, a.name, self.values[a])
        parent.output(parent.call_module(name, tuple(args[a] for a in env if env[a].op == "placeholder")))
        split = Split(torch.fx.GraphModule(root, parent), [name], {})
        (segment,) = convert(split, target.Target(self.settings.trt_version), self.settings.precision, {},
                             self.settings.keep_fp32)
        return segment, fed

    def run(self, nodes: Sequence[Node], outputs: Sequence[Node], name: str) -> list[torch.Tensor]:
        """Convert `nodes`, build the segment on the lowered module's backend, feed it the eager
        values of its inputs and return its `outputs`."""
        segment, fed = self.convert(nodes, outputs, name)
        settings = dataclasses.replace(self.settings, cache_dir=Path(self._scratch.name))  # not the user's cache
        (engine,) = build([segment], self.settings.backend, settings, alone=False)  # between eager steps
        with torch.no_grad():
            return list(engine.module(*(self.values[a] for a in fed)))


def units(nodes: Sequence[Node]) -> list[list[Node]]:
    """The nodes grouped so that a multi-output node and its getitems are never split apart, nor
    a quantize and the dequantizes reading its int8 (no engine takes or gives int8)."""
    groups: dict[Node, list[Node]] = {}
    group_of: dict[Node, Node] = {}
    for n in nodes:
        base = n.args[0] if n.target is operator.getitem and n.args[0] in groups else n
        int8 = [a for a in n.all_input_nodes if a in group_of and _is_int8(a)]
        base = group_of[int8[0]] if int8 else base
        groups.setdefault(base, []).append(n)  # type: ignore[arg-type]
        group_of[n] = base  # type: ignore[assignment]
    return list(groups.values())


def _is_int8(node: Node) -> bool:
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and val.dtype == torch.int8
