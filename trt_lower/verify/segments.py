"""Any set of captured-graph nodes as an engine of its own: converted by the convert stage exactly
as lowering converts an engine (same converters, target, precision rewrite), built on a backend
into a scratch cache, and fed given values."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from converters.core import target
from splitter.partition import Split
from trt_lower.convert.driver import convert
from trt_lower.engine.engines import build
from trt_lower.values.segment import ConvertedSegment
from trt_lower.values.settings import LoweringSettings
from trt_lower.verify.nodes import Node


def convert_nodes(
    nodes: Sequence[Node],
    outputs: Sequence[Node],
    name: str,
    settings: LoweringSettings,
    constant: Callable[[Node], Any],
    first_inputs: Sequence[Node] = (),
) -> tuple[ConvertedSegment, list[Node]]:
    """`nodes` (of one graph) as one engine segment returning `outputs`, and the nodes whose
    values are its inputs (`first_inputs` first, in order). `constant` gives a get_attr's value."""
    order = {n: i for i, n in enumerate(nodes[0].graph.nodes)} if nodes else {}
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
    for n in sorted(nodes, key=order.__getitem__):
        for a in n.all_input_nodes:
            if a not in env:
                source(a)
        env[n] = graph.node_copy(n, env.__getitem__)
    graph.output(tuple(env[o] for o in outputs))
    # The split stage's shape: a parent graph calling the segment, weights as get_attr.
    root = torch.nn.Module()
    root.add_module(name, torch.fx.GraphModule(torch.nn.Module(), graph))
    parent = torch.fx.Graph()
    args = {
        a: parent.get_attr(a.name) if a in constants else parent.placeholder(a.name)
        for a in env
        if env[a].op == "placeholder"
    }
    for a in constants:
        setattr(root, a.name, constant(a))
    parent.output(parent.call_module(name, tuple(args[a] for a in env if env[a].op == "placeholder")))
    split = Split(torch.fx.GraphModule(root, parent), [name], {})
    (segment,) = convert(split, target.TrtTarget(settings.trt_version), settings.precision, {}, settings.keep_fp32)
    return segment, fed


class ScratchBuilder:
    """Builds node sets on one backend into a scratch engine cache (never the user's: these
    engines are checks, not results)."""

    def __init__(self, backend: str, settings: LoweringSettings) -> None:
        self._scratch = tempfile.TemporaryDirectory(prefix="trt_lower_verify_")
        self.backend = backend
        self.settings = dataclasses.replace(settings, cache_dir=Path(self._scratch.name))

    def run(self, segment: ConvertedSegment, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Build `segment` (one between eager steps), run it on `inputs`, return its outputs."""
        (engine,) = build([segment], self.backend, self.settings, alone=False)
        with torch.no_grad():
            out = engine.module(*inputs)
        return list(out) if segment.tuple_output else [out]
