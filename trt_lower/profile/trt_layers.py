"""A TensorRT engine's time per layer: an IProfiler on the module's execution contexts while
profiling (TRTEngineModule.profiled), and the engine's layers from its inspector (plans are built
with DETAILED profiling verbosity), each mapped to the ONNX nodes TensorRT named it after, whose
names start with their FX node's (ort_layers.fx_nodes reads them)."""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

import onnx
import tensorrt as trt
import torch

from trt_lower.profile.ort_layers import Layer
from trt_lower.runtime.trt_module import TRTEngineModule

# Myelin names a region it compiled after its first and last ONNX node: "{ForeignNode[a...z]}".
_FOREIGN = re.compile(r"\{ForeignNode\[(.+)\.\.\.(.+)\]\}")
# TensorRT joins the names of the nodes it fused with " + "; pointwise fusions read "PWN(a, b)".
_SEPARATORS = re.compile(r" \+ |, |PWN\(|\)")


class _Recorder(trt.IProfiler):
    """Sums the seconds TensorRT reports per layer name into `call`."""

    def __init__(self) -> None:
        trt.IProfiler.__init__(self)
        self.call: dict[str, float] = {}

    def report_layer_time(self, layer_name: str, ms: float) -> None:
        self.call[layer_name] = self.call.get(layer_name, 0.0) + ms * 1e-3


class _Calls(torch.nn.Module):
    """`engine`, each call's layer times kept in `runs` as one run."""

    def __init__(self, engine: TRTEngineModule, recorder: _Recorder) -> None:
        super().__init__()
        self.engine = engine
        self.recorder = recorder
        self.runs: list[dict[str, float]] = []

    def forward(self, *args: Any) -> Any:
        self.recorder.call = {}
        result = self.engine(*args)
        self.runs.append(self.recorder.call)
        return result


class ProfiledTrtEngine:
    """`module` with a profiler on its contexts until `finish()`, which gives its layers and each
    run's time per layer; `onnx_graph` (the engine's ONNX, where known) orders Myelin regions."""

    def __init__(self, module: TRTEngineModule, onnx_graph: onnx.GraphProto | None) -> None:
        self._engine = module.engine
        self._order = [node.name for node in onnx_graph.node] if onnx_graph is not None else []
        recorder = _Recorder()
        self._profiling = contextlib.ExitStack()
        self._profiling.enter_context(module.profiled(recorder))
        self.module = _Calls(module, recorder)

    def finish(self) -> tuple[dict[str, Layer], list[dict[str, float]]]:
        """The layers by name (those the inspector lists, then any other the profiler reported),
        and per run the seconds of each layer; the profiler is off the contexts again."""
        self._profiling.close()
        runs = self.module.runs
        info = json.loads(
            self._engine.create_engine_inspector().get_engine_information(trt.LayerInformationFormat.JSON)
        )
        described = [_described(entry) for entry in info.get("Layers", [])]
        reported = [name for run in runs for name in run]
        names = dict.fromkeys([name for name, _ in described] + reported)
        ops = dict(described)
        return {name: Layer(name, ops.get(name, ""), onnx_nodes(name, self._order)) for name in names}, runs


def _described(entry: Any) -> tuple[str, str]:
    """An inspector's layer entry as (name, layer type): an object with DETAILED verbosity, its
    name alone with LAYER_NAMES_ONLY."""
    if isinstance(entry, dict):
        return str(entry.get("Name", "")), str(entry.get("LayerType", ""))
    return str(entry), ""


def onnx_nodes(layer: str, order: list[str]) -> tuple[str, ...]:
    """The ONNX nodes a TensorRT layer computes, from its name: one node, nodes it fused
    ("a + b"), or a Myelin region ("{ForeignNode[a...z]}": the nodes from a to z in `order`, the
    ONNX graph's). Where `order` is known, parts that name no node of it (TensorRT's own layers,
    such as reformats) are left out."""
    known = set(order)
    region = _FOREIGN.fullmatch(layer)
    if region is not None:
        first, last = region.groups()
        if first in known and last in known:
            return tuple(order[order.index(first) : order.index(last) + 1])
        return (first, last) if not known else tuple(n for n in (first, last) if n in known)
    parts = (part.strip() for part in _SEPARATORS.split(layer))
    return tuple(dict.fromkeys(p for p in parts if p and (not known or p in known)))
