"""Measure a lowered module's call per engine layer and per eager node (LoweredModule.profile).

The call runs through an FX Interpreter over the lowered graph that times each eager node and
each engine call; an ONNX Runtime engine runs in a profiled session of its own (ort_layers.py),
so the module's own sessions, and its calls outside profiling, are untouched; a TensorRT engine
reports its layers to an IProfiler set on its contexts only while profiling (trt_layers.py). The
profile is that of the median call (by its time): its rows, and the host glue as the rest of it,
add up to the measured call. (Medians per row would not: where other work shares the cores, each call is slowed
at different rows, and the per-row medians add up to less than the median call.)"""

from __future__ import annotations

import operator
import time
from typing import TYPE_CHECKING, Any, cast

import torch
from torch.fx.graph import _PyTreeCodeGen

from converters.core.errors import TrtLowerError
from trt_lower.profile.ort_layers import Layer, ProfiledEngine, fx_nodes
from trt_lower.profile.profile import Profile, Row
from trt_lower.profile.sources import NodeSource, sources_of
from trt_lower.runtime.engine_module import EngineModule
from trt_lower.runtime.inputs import flatten_inputs
from trt_lower.runtime.ort_module import OrtEngineModule
from trt_lower.values.call import model_call

if TYPE_CHECKING:
    from trt_lower.runtime.trt_module import TRTEngineModule


class ProfileError(TrtLowerError, ValueError):
    """LoweredModule.profile's arguments out of range (iterations, warmup)."""


class _Timer(torch.fx.Interpreter):
    """Runs the lowered graph with `engines` in place of the modules of the same names, timing
    each eager call_function node and each engine call (seconds, by node name)."""

    def __init__(self, gm: torch.fx.GraphModule, engines: dict[str, torch.nn.Module]) -> None:
        super().__init__(gm)
        self.engines = engines
        self.seconds: dict[str, float] = {}

    def call_module(self, target: Any, args: Any, kwargs: Any) -> Any:
        module = self.engines.get(target)
        return super().call_module(target, args, kwargs) if module is None else module(*args, **kwargs)

    def run_node(self, n: torch.fx.Node) -> Any:
        if not _timed(n, self.engines):
            return super().run_node(n)
        start = time.perf_counter()
        result = super().run_node(n)
        self.seconds[n.name] = time.perf_counter() - start
        return result


def _timed(n: torch.fx.Node, engines: dict[str, torch.nn.Module]) -> bool:
    """An engine call, or an eager op of the model (a getitem of a tuple costs nothing: glue)."""
    if n.op == "call_module":
        return n.target in engines
    return n.op == "call_function" and n.target is not operator.getitem


def profile(lowered: Any, inputs: Any, kwargs: Any = None, *, iterations: int = 20, warmup: int = 3) -> Profile:
    """LoweredModule.profile (see its docstring)."""
    if iterations < 1 or warmup < 0:
        raise ProfileError(f"iterations must be >= 1 and warmup >= 0, got iterations={iterations}, warmup={warmup}")
    args, keywords = model_call(inputs, kwargs)
    codegen = lowered.graph._codegen
    flat = (
        flatten_inputs((args, keywords), codegen.pytree_info.in_spec) if isinstance(codegen, _PyTreeCodeGen) else args
    )
    calls, nodes, finished = _measure(lowered, flat, iterations, warmup)
    median = sorted(range(iterations), key=calls.__getitem__)[iterations // 2]
    layer_times = {name: (layers, runs[warmup + median]) for name, (layers, runs) in finished.items()}
    rows = _rows(lowered, nodes[median], layer_times, sources_of(lowered))
    backend = getattr(getattr(lowered, "report", None), "backend", "")
    return Profile(calls[median], tuple(rows), backend, iterations, warmup)


Layers = dict[str, tuple[dict[str, Layer], list[dict[str, float]]]]


def _measure(
    lowered: Any, flat: Any, iterations: int, warmup: int
) -> tuple[list[float], list[dict[str, float]], Layers]:
    """Each measured call's seconds and its eager nodes' and engines' seconds; per profiled
    engine its layers and every run's (warm-up included) seconds per layer."""
    engines = {name: m for name, m in lowered.named_children() if isinstance(m, EngineModule)}
    segments = getattr(lowered, "segments", {})
    profiled: dict[str, Any] = {}  # ProfiledEngine or ProfiledTrtEngine: a `module` and `finish()`
    calls, nodes = [], []
    try:  # each profiled session's files are removed, and each profiler taken off, whatever happens
        for name, m in engines.items():
            if isinstance(m, OrtEngineModule) and name in segments:
                profiled[name] = ProfiledEngine(m, segments[name].onnx)
            elif hasattr(m, "profiled"):  # a TRTEngineModule: tensorrt is imported only where one runs
                from trt_lower.profile.trt_layers import ProfiledTrtEngine

                graph = segments[name].onnx.model.graph if name in segments else None
                profiled[name] = ProfiledTrtEngine(cast("TRTEngineModule", m), graph)
        timer = _Timer(lowered, {**engines, **{name: p.module for name, p in profiled.items()}})
        with torch.no_grad():
            for i in range(warmup + iterations):
                timer.seconds = {}
                start = time.perf_counter()
                timer.run(*flat)
                if i >= warmup:
                    calls.append(time.perf_counter() - start)
                    nodes.append(timer.seconds)
    finally:
        finished = {name: p.finish() for name, p in profiled.items()}
    return calls, nodes, finished


def _rows(
    lowered: Any,
    seconds: dict[str, float],
    layer_times: dict[str, tuple[dict[str, Layer], dict[str, float]]],
    sources: dict[str, NodeSource],
) -> list[Row]:
    """One call's rows in execution order: an engine's layers where they were measured, else
    the engine as one row; `seconds` by timed node, `layer_times` by engine."""
    rows = []
    for n in lowered.graph.nodes:
        if n.name not in seconds:
            continue
        if n.name in layer_times:
            layers, times = layer_times[n.name]
            rows += [
                _row(layer.name, "layer", n.name, layer.op, times[layer.name], fx_nodes(layer.onnx_nodes), sources)
                for layer in layers.values()
                if layer.name in times
            ]
        elif n.op == "call_module":
            segment = getattr(lowered, "segments", {}).get(n.target)
            covered = segment.nodes if segment is not None else ()
            rows.append(_row(n.name, "engine", n.target, "engine", seconds[n.name], covered, sources))
        else:
            op = sources[n.name].op if n.name in sources else str(n.target)
            rows.append(_row(n.name, "eager", None, op, seconds[n.name], (n.name,), sources))
    return rows


def _row(
    name: str,
    kind: str,
    engine: str | None,
    op: str,
    seconds: float,
    covered: tuple[str, ...],
    sources: dict[str, NodeSource],
) -> Row:
    """A row whose FX nodes are named by their sources where known, else by name alone."""
    return Row(name, kind, engine, op, seconds, tuple(sources.get(c) or NodeSource(c, "") for c in covered))
