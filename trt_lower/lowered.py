"""Stitching: engine segments become runtime modules inside one GraphModule."""
from __future__ import annotations

import functools
import time
from collections import Counter
from typing import Sequence

import onnx
import sympy
import torch

from converters.core.interpreter import ConversionError, segment_to_onnx
from converters.core.target import Target
from converters.passes import trt_support
from converters.passes.float64 import narrow_float64
from converters.passes.precision import to_fp16
from converters.passes.weights import OnnxSegment
from splitter.partition import Split, is_compute
from trt_lower.report import EngineReport, Fallback, LoweringReport
from trt_lower.runtime import TensorSig
from trt_lower.runtime.factory import engine_module
from trt_lower.runtime.guard import InputGuard
from trt_lower.runtime.signature import SymbolRanges
from trt_lower.settings import LoweringSettings
from trt_lower.spec import TensorSpec


class LoweredModule(torch.fx.GraphModule):
    """The lowered model: a GraphModule whose `engine_<k>` submodules run engines and whose
    remaining nodes run in eager PyTorch. `report` says which is which."""

    report: LoweringReport

    def __init__(self, root: torch.nn.Module, graph: torch.fx.Graph, report: LoweringReport) -> None:
        super().__init__(root, graph, class_name="LoweredModule")
        self.report = report
        # torch.export's pytree codegen reads the input/output specs from the module.
        for attr in ("_in_spec", "_out_spec"):
            if hasattr(root, attr):
                setattr(self, attr, getattr(root, attr))


def _model_inputs(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "placeholder" and isinstance(n.meta.get("val"), torch.Tensor)]


def symbol_ranges(gm: torch.fx.GraphModule, specs: Sequence[TensorSpec]) -> SymbolRanges:
    """Each shape symbol of the graph -> (min, opt, max), read off the specs of the inputs whose
    dynamic dims introduced it."""
    ranges: dict[sympy.Symbol, tuple[int, int, int]] = {}
    for node, spec in zip(_model_inputs(gm), specs):
        for i in spec.dynamic_dims:
            dim = node.meta["val"].shape[i]
            if isinstance(dim, torch.SymInt) and isinstance(dim.node.expr, sympy.Symbol):
                ranges.setdefault(dim.node.expr, (spec.min_shape[i], spec.opt_shape[i], spec.max_shape[i]))
    return ranges


def _guard_inputs(gm: torch.fx.GraphModule, symbols: SymbolRanges) -> None:
    """Check every call's inputs first, with errors that name the input and its range."""
    inputs = _model_inputs(gm)
    gm.add_submodule("_input_guard", InputGuard(tuple(TensorSig.of(n.name, n, symbols) for n in inputs)))
    with gm.graph.inserting_after(inputs[-1] if inputs else None):
        gm.graph.call_module("_input_guard", tuple(inputs))


def _call_node(gm: torch.fx.GraphModule, name: str) -> torch.fx.Node:
    return next(n for n in gm.graph.nodes if n.op == "call_module" and n.target == name)


class UnsupportedOnnx(Exception):
    """A segment's ONNX breaks the target TensorRT's parser limits (converters/passes/trt_support.py)."""


def segment_onnx(sub: torch.fx.GraphModule, name: str, constants: dict[str, torch.Tensor],
                 precision: str, target: Target) -> OnnxSegment:
    """The ONNX an engine is built from: the converters' output, float64 computed as float32
    (TensorRT has none), and with precision="fp16" the fp16 rewrite. `target` is the TensorRT
    whose limits it keeps to (the support audit of the tests reads it)."""
    segment = narrow_float64(segment_to_onnx(sub, name, constants))
    return to_fp16(segment) if precision == "fp16" else segment


def _check_support(sub: torch.fx.GraphModule, model: onnx.ModelProto, goal: Target) -> None:
    """Raise ConversionError, blaming the FX node whose ONNX breaks the target's limits: that
    node then runs in eager, as after any converter failure."""
    problems = trt_support.violations(model, goal.version)
    if not problems:
        return
    nodes = {n.name: n for n in sub.graph.nodes if n.op == "call_function"}
    blamed = nodes.get(problems[0].node.split("/")[0]) or next(iter(nodes.values()))
    raise ConversionError(blamed, UnsupportedOnnx(f"{goal.label}'s ONNX parser would reject {problems[0]}"))


def _dtypes(node: torch.fx.Node) -> set[torch.dtype]:
    vals = [node.meta.get("val"), *(a.meta.get("val") for a in node.all_input_nodes)]
    flat = [v for val in vals for v in (val if isinstance(val, (tuple, list)) else (val,))]
    return {v.dtype for v in flat if isinstance(v, torch.Tensor)}


def _dtype_notes(sub: torch.fx.GraphModule, name: str, goal: Target) -> list[str]:
    """What an engine computes in a narrower dtype than the FX graph says (README "Precision and
    dtypes"): float64 always, int64 on TensorRT 8.6."""
    compute = [n for n in sub.graph.nodes if is_compute(n)]
    notes = []
    wide = [n.name for n in compute if torch.float64 in _dtypes(n)]
    if wide:
        notes.append(f"{name} computes float64 as float32 (TensorRT has no float64): {', '.join(wide)}")
    if not goal.int64_native:
        val = {n: n.meta.get("val") for n in compute}
        ints = [n.name for n, v in val.items() if isinstance(v, torch.Tensor) and v.dtype == torch.int64]
        if ints:
            notes.append(f"{name} computes int64 as int32 on {goal.label} (results beyond int32 would not fit): "
                         f"{', '.join(ints)}")
    return notes


def _build_engine(gm: torch.fx.GraphModule, name: str, backend: str, settings: LoweringSettings,
                  symbols: SymbolRanges) -> tuple[torch.nn.Module, EngineReport, float, list[str]]:
    """Convert one fused segment; its weights (get_attr args) become ONNX initializers.
    Also returns the seconds spent building the engine (session) from the ONNX bytes, and the
    report's notes on dtypes the engine narrows."""
    sub: torch.fx.GraphModule = getattr(gm, name)
    call = _call_node(gm, name)
    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    constants: dict[str, torch.Tensor] = {}
    runtime_args, runtime_placeholders = [], []
    for ph, arg in zip(placeholders, call.args):
        if isinstance(arg, torch.fx.Node) and arg.op == "get_attr":
            constants[ph.target] = functools.reduce(getattr, arg.target.split("."), gm)  # type: ignore[arg-type, union-attr]
        else:
            runtime_args.append(arg)
            runtime_placeholders.append(ph)

    goal = Target(settings.trt_version)
    onnx_segment = segment_onnx(sub, name, constants, settings.precision, goal)
    model = onnx_segment.model
    _check_support(sub, model, goal)
    out_node = next(n for n in sub.graph.nodes if n.op == "output")
    results = out_node.args[0]
    tuple_output = isinstance(results, (tuple, list))
    out_nodes = list(results) if tuple_output else [results]
    inputs = tuple(TensorSig.of(vi.name, ph, symbols) for vi, ph in zip(model.graph.input, runtime_placeholders))
    outputs = tuple(TensorSig.of(vi.name, n, symbols) for vi, n in zip(model.graph.output, out_nodes))

    segment_nodes = [n.name for n in sub.graph.nodes if n.op == "call_function"]
    start = time.perf_counter()
    module, cache_hit = engine_module(name, onnx_segment, inputs, outputs, tuple_output, backend=backend,
                                      nodes=segment_nodes, settings=settings)
    session_s = time.perf_counter() - start
    call.args = tuple(runtime_args)
    compute = [n for n in sub.graph.nodes if is_compute(n)]
    report = EngineReport(
        name=name,
        num_nodes=len(compute),
        ops=dict(Counter(str(n.target) for n in compute)),
        input_shapes=[s.shape for s in inputs],
        output_shapes=[s.shape for s in outputs],
        backend=backend,
        cache_hit=cache_hit,
    )
    return module, report, session_s, _dtype_notes(sub, name, goal)


def stitch(split: Split, backend: str, settings: LoweringSettings, specs: Sequence[TensorSpec]) -> LoweredModule:
    gm = split.gm
    symbols = symbol_ranges(gm, specs)
    fallbacks = [
        Fallback(node.name, str(node.target), reason) for node, reason in split.fallbacks.items()
    ]
    engines, notes = [], []
    session_s = 0.0
    for name in split.engines:
        module, report, seconds, engine_notes = _build_engine(gm, name, backend, settings, symbols)
        session_s += seconds
        notes += engine_notes
        gm.delete_submodule(name)
        gm.add_submodule(name, module)
        engines.append(report)
    for node in list(gm.graph.nodes):
        if node.op == "get_attr" and not node.users:
            gm.graph.erase_node(node)
    _guard_inputs(gm, symbols)

    in_engines = sum(e.num_nodes for e in engines)
    total = in_engines + sum(1 for n in gm.graph.nodes if is_compute(n))
    report = LoweringReport(
        coverage=in_engines / total if total else 1.0,
        engines=engines,
        fallbacks=fallbacks,
        backend=backend,
        precision=settings.precision,
        trt_version=settings.trt_version,
        notes=notes,
        timings={"session": session_s},
    )
    return LoweredModule(gm, gm.graph, report)


__all__ = ["ConversionError", "LoweredModule", "stitch"]
