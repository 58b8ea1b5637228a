"""An ONNX Runtime engine's time per layer: a second session over the engine's ONNX, with ONNX
Runtime's profiler on (the lowered module's own session runs unprofiled), and its rows mapped
back to the ONNX nodes the converters wrote, whose names start with their FX node's
(converters/core/builder.py: '<FX node>/<op>')."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any, Iterator

import onnx

from converters.core.segment import OnnxSegment
from trt_lower.engine.ort_session import OPTIMIZED_MODEL, fast_path_works, segment_session
from trt_lower.runtime.ort_module import OrtEngineModule

# ONNX Runtime's profile names a node's run '<node name>_kernel_time'.
_KERNEL = "_kernel_time"
# Nodes ONNX Runtime adds around its blocked-layout (NCHWc) kernels: their time is their neighbour's.
_LAYOUT_OPS = frozenset({"ReorderInput", "ReorderOutput"})


@dataclass(frozen=True)
class Layer:
    """One node of the graph ONNX Runtime ran (after its fusions): its name and op, and the
    ONNX nodes the converters wrote that it computes."""

    name: str
    op: str
    onnx_nodes: tuple[str, ...]


class ProfiledEngine:
    """An engine module like `module` over a profiled session of `segment`; `runs()` then gives
    each run's time per layer."""

    def __init__(self, module: OrtEngineModule, segment: OnnxSegment) -> None:
        self._dir = tempfile.mkdtemp(prefix="trt_lower_profile_")
        self._segment = segment
        try:
            self._session = segment_session(segment, profile_to=self._dir)
        except BaseException:
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        self.module = OrtEngineModule(
            module.name,
            self._session,
            segment,
            module.inputs,
            module.outputs,
            module.tuple_output,
            fast_path=fast_path_works(),
        )

    def finish(self) -> tuple[dict[str, Layer], list[dict[str, float]]]:
        """The layers by name, and per run (in order) the seconds of each layer that ran; the
        session's files are removed."""
        try:
            with open(self._session.end_profiling()) as file:
                events = json.load(file)
            optimized = onnx.load(os.path.join(self._dir, OPTIMIZED_MODEL), load_external_data=False)
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)
        name_inlined(optimized.graph, events)
        return layers(self._segment.model.graph, optimized.graph), run_times(events)


def name_inlined(optimized: onnx.GraphProto, events: list[dict[str, Any]]) -> None:
    """Names the nodes ONNX Runtime made by inlining a function op (HardSwish's HardSigmoid and
    Mul, say) as its profiler does: it saves them unnamed and times them as '<op>_<node index>'.
    The timed nodes the graph does not name, in node index order, are its unnamed nodes in graph
    order (inlining makes a function's nodes in order); where their ops do not line up so, the
    nodes stay unnamed (their time is then the host glue's)."""
    named = {node.name for node in optimized.node}
    timed: dict[str, tuple[int, str]] = {}
    for name, e in _kernels(events):
        args = e.get("args", {})
        if name not in named and str(args.get("node_index", "")).isdigit():
            timed[name] = (int(args["node_index"]), str(args.get("op_name")))
    ordered = sorted(timed, key=lambda name: timed[name][0])
    unnamed = [node for node in optimized.node if not node.name]
    if [timed[name][1] for name in ordered] == [node.op_type for node in unnamed]:
        for node, name in zip(unnamed, ordered):
            node.name = name


def _kernels(events: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each timed run of a node in the profile's events, with the node's name."""
    for e in events:
        name = e.get("name", "")
        if e.get("cat") == "Node" and name.endswith(_KERNEL):
            yield name[: -len(_KERNEL)], e


def run_times(events: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Per run of the session (its 'model_run' events), the seconds of each node ONNX Runtime
    timed within it, by node name."""
    runs = sorted((e for e in events if e.get("name") == "model_run"), key=lambda e: e["ts"])
    times: list[dict[str, float]] = [{} for _ in runs]
    for name, e in _kernels(events):
        for i, run in enumerate(runs):
            if run["ts"] <= e["ts"] <= run["ts"] + run["dur"]:
                times[i][name] = times[i].get(name, 0.0) + e["dur"] * 1e-6
                break
    return times


def layers(original: onnx.GraphProto, optimized: onnx.GraphProto) -> dict[str, Layer]:
    """The nodes of `optimized` (the graph ONNX Runtime ran), each with the nodes of `original`
    it computes. ONNX Runtime names a node it rewrote after the node (a fusion) or the value
    (its NCHWc kernels: '<value>_nchwc') it came from, and a fusion drops the values in between:
    an original node belongs to the node named after it or its output, else to the node that
    makes its output, else to the node its first reader belongs to. A layout node (NCHWc
    reorders) computes nothing of the model: it is mapped to the node whose value it reorders."""
    producer = {out: node for node in optimized.node for out in node.output if out}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in original.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    named = _named(original, optimized)
    owner: dict[str, str] = {}  # original node name -> optimized node name
    for node in reversed(original.node):  # ONNX nodes are in topological order
        made = [producer[out] for out in node.output if out in producer]
        later = [owner[r.name] for out in node.output for r in readers.get(out, []) if r.name in owner]
        if node.name in named:
            owner[node.name] = named[node.name]
        elif made:
            owner[node.name] = _computing(made[0], producer).name
        elif later:
            owner[node.name] = later[0]
    covered: dict[str, list[str]] = {}
    for name, layer in owner.items():
        covered.setdefault(layer, []).append(name)
    # A node that computes none of the original ones (a part of an inlined function op whose result
    # another node gives) computes for the node that reads its output.
    reader = {name: node for node in optimized.node for name in node.input if name}
    result: dict[str, Layer] = {}
    for node in reversed(optimized.node):
        onnx_nodes = covered.get(node.name) or covered.get(_computing(node, producer).name, [])
        after = (reader[out].name for out in node.output if out in reader)
        following = next((name for name in after if name in result), None)
        if not onnx_nodes and following is not None:
            onnx_nodes = list(result[following].onnx_nodes)
        result[node.name] = Layer(node.name, node.op_type, tuple(sorted(onnx_nodes, key=_order(original))))
    return {node.name: result[node.name] for node in optimized.node}


def _named(original: onnx.GraphProto, optimized: onnx.GraphProto) -> dict[str, str]:
    """Original node name -> the optimized node named after it, or after the longest of its
    output values' names that starts the optimized node's name."""
    nodes = {node.name for node in original.node}
    made_by = {out: node.name for node in original.node for out in node.output if out}
    named: dict[str, str] = {}
    for node in optimized.node:
        if node.name in nodes:
            named.setdefault(node.name, node.name)
            continue
        cuts = [i for i, c in enumerate(node.name) if c == "_"]
        value = next((node.name[:i] for i in reversed(cuts) if node.name[:i] in made_by), None)
        if value is not None:
            named.setdefault(made_by[value], node.name)
    return named


def _computing(node: onnx.NodeProto, producer: dict[str, onnx.NodeProto]) -> onnx.NodeProto:
    """`node`, or past layout nodes the node that computed the value they carry."""
    while node.op_type in _LAYOUT_OPS and node.input and node.input[0] in producer:
        node = producer[node.input[0]]
    return node


def _order(graph: onnx.GraphProto) -> Any:
    index = {node.name: i for i, node in enumerate(graph.node)}
    return lambda name: index.get(name, len(index))


def fx_nodes(onnx_nodes: tuple[str, ...]) -> tuple[str, ...]:
    """The FX nodes ONNX nodes were written for (their names' first part), in order, once each."""
    return tuple(dict.fromkeys(name.split("/")[0] for name in onnx_nodes))
