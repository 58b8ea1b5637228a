"""A lowering replayed in eager PyTorch: the captured graph, every node's eager value, which
captured nodes each engine of a lowered module computes, and any subset of those nodes converted
and run on the lowered module's backend, fed with eager values.

The lowered module keeps no FX graph of its engines (a TensorRT engine keeps only its plan), so
the model is captured again: torch.export names nodes deterministically, and the lowered graph's
eager nodes, engine inputs and engine outputs carry the captured graph's node names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch
import torch.utils._pytree as pytree

from splitter.partition import ENGINE_PREFIX
from trt_lower import lowering_options
from trt_lower.capture.aten_graph import capture, check_inputs, graph_module
from trt_lower.values.call import Inputs, model_call
from trt_lower.values.segment import ConvertedSegment
from trt_lower.verify.nodes import Node, Recorder
from trt_lower.verify.segments import ScratchBuilder, convert_nodes


@dataclass(frozen=True)
class EngineNodes:
    """One engine of the lowered module, as captured-graph nodes (graph order)."""

    name: str
    nodes: tuple[Node, ...]
    inputs: tuple[Node, ...]  # the engine's runtime inputs, in its input order
    outputs: tuple[Node, ...]  # in its output order


def _engine_calls(lowered: torch.fx.GraphModule) -> list[tuple[Node, Any]]:
    return [
        (n, lowered.get_submodule(str(n.target)))
        for n in lowered.graph.nodes
        if n.op == "call_module" and str(n.target).startswith(ENGINE_PREFIX)
    ]


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
    """`model` captured again for `model(*inputs, **kwargs)`, run eagerly, with `lowered`'s engines
    located in it."""

    def __init__(
        self, model: torch.nn.Module, lowered: torch.nn.Module, inputs: Inputs, kwargs: dict[str, Any] | None = None
    ) -> None:
        report = getattr(lowered, "report", None)
        if report is None or not isinstance(lowered, torch.fx.GraphModule):
            raise ValueError(f"lowered must be what trt_lower.lower_to_trt returned, got {type(lowered).__name__}")
        args, kwargs = model_call(inputs, kwargs)
        specs = check_inputs(model, args, kwargs)
        if any(s.dynamic_dims for s in specs):
            raise ValueError("inputs must be tensors (the values to debug with), not TensorSpecs")
        self.gm = graph_module(capture(model, args, specs, kwargs).program)
        self.settings = lowering_options.create(
            backend=report.backend,
            precision=report.precision,
            min_block_size=1,
            fallback_ops=(),
            require_full=True,
            trt_version=report.trt_version,
            keep_fp32=report.keep_fp32,
        )
        recorder = Recorder(self.gm)
        with torch.no_grad():
            recorder.run(*pytree.tree_leaves((args, kwargs)))
        self.values = recorder.values
        self.order = {n: i for i, n in enumerate(self.gm.graph.nodes)}
        by_name = {n.name: n for n in self.gm.graph.nodes}
        self.engines: list[EngineNodes] = []
        for call, module in _engine_calls(lowered):
            try:
                ins = tuple(by_name[a.name] for a in call.args if isinstance(a, Node))
                outs = tuple(by_name[s.source] for s in module.outputs)
            except KeyError as e:
                raise ValueError(
                    f"{call.target} computes node {e.args[0]}, which capturing {type(model).__name__} "
                    "again did not produce: was `lowered` lowered from this model?"
                ) from None
            nodes = sorted(_members(outs, set(ins)), key=self.order.__getitem__)
            self.engines.append(EngineNodes(str(call.target), tuple(nodes), ins, outs))
        self._builder = ScratchBuilder(self.settings.backend, self.settings)

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
        return [
            n for n in nodes if self.is_tensor(n) and (n in engine.outputs or any(u not in inside for u in n.users))
        ]

    def convert(
        self, nodes: Sequence[Node], outputs: Sequence[Node], name: str, first_inputs: Sequence[Node] = ()
    ) -> tuple[ConvertedSegment, list[Node]]:
        """`nodes` as one engine segment returning `outputs`, converted exactly as lowering
        converts an engine; also the nodes whose eager values are its inputs (`first_inputs`
        first, in order)."""
        return convert_nodes(nodes, outputs, name, self.settings, self.values.__getitem__, first_inputs)

    def run(self, nodes: Sequence[Node], outputs: Sequence[Node], name: str) -> list[torch.Tensor]:
        """Convert `nodes`, build the segment on the lowered module's backend, feed it the eager
        values of its inputs and return its `outputs`."""
        segment, fed = self.convert(nodes, outputs, name)
        return self._builder.run(segment, [self.values[a] for a in fed])
