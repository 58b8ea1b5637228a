"""Stitching: engine segments become runtime modules inside one GraphModule."""
from __future__ import annotations

import functools
import time
from collections import Counter
from typing import Sequence

import sympy
import torch

from converters.graph import ConversionError, segment_to_onnx
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


def _build_engine(gm: torch.fx.GraphModule, name: str, backend: str, settings: LoweringSettings,
                  symbols: SymbolRanges) -> tuple[torch.nn.Module, EngineReport, float]:
    """Convert one fused segment; its weights (get_attr args) become ONNX initializers.
    Also returns the seconds spent building the engine (session) from the ONNX bytes."""
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

    model = segment_to_onnx(sub, name, constants)
    out_node = next(n for n in sub.graph.nodes if n.op == "output")
    results = out_node.args[0]
    tuple_output = isinstance(results, (tuple, list))
    out_nodes = list(results) if tuple_output else [results]
    inputs = tuple(TensorSig.of(vi.name, ph, symbols) for vi, ph in zip(model.graph.input, runtime_placeholders))
    outputs = tuple(TensorSig.of(vi.name, n, symbols) for vi, n in zip(model.graph.output, out_nodes))

    onnx_bytes = model.SerializeToString()
    segment_nodes = [n.name for n in sub.graph.nodes if n.op == "call_function"]
    start = time.perf_counter()
    module, cache_hit = engine_module(name, onnx_bytes, inputs, outputs, tuple_output, backend=backend,
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
    return module, report, session_s


def stitch(split: Split, backend: str, settings: LoweringSettings, specs: Sequence[TensorSpec]) -> LoweredModule:
    gm = split.gm
    symbols = symbol_ranges(gm, specs)
    fallbacks = [
        Fallback(node.name, str(node.target), reason) for node, reason in split.fallbacks.items()
    ]
    engines = []
    session_s = 0.0
    for name in split.engines:
        module, report, seconds = _build_engine(gm, name, backend, settings, symbols)
        session_s += seconds
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
        timings={"session": session_s},
    )
    return LoweredModule(gm, gm.graph, report)


__all__ = ["ConversionError", "LoweredModule", "stitch"]
