"""Stage 5, stitch: the split graph with its segments swapped for engines, and the report."""

from __future__ import annotations

import operator
from collections import Counter

import torch

from splitter.partition import Split, call_node, is_compute, is_constant
from splitter.support import target_label
from trt_lower.report.entries import EngineReport, Fallback
from trt_lower.report.report import LoweringReport
from trt_lower.runtime.engine_module import EngineModule
from trt_lower.runtime.guard import InputGuard
from trt_lower.stitch.lowered import LoweredModule
from trt_lower.values.ranges import SymbolRanges, signature_of
from trt_lower.values.segment import Engine
from trt_lower.values.settings import LoweringSettings
from trt_lower.values.signature import describe_profiles


def _guard_inputs(gm: torch.fx.GraphModule, symbols: SymbolRanges, conditions: tuple[str, ...]) -> None:
    """Check every call's inputs first, with errors that name the input and its range (or the size
    condition it breaks)."""
    inputs = [n for n in gm.graph.nodes if n.op == "placeholder" and isinstance(n.meta.get("val"), torch.Tensor)]
    sigs = tuple(signature_of(n.name, n, symbols) for n in inputs)
    gm.add_submodule("_input_guard", InputGuard(sigs, conditions))
    with gm.graph.inserting_after(inputs[-1] if inputs else None):
        gm.graph.call_module("_input_guard", tuple(inputs))


def _swap(gm: torch.fx.GraphModule, engine: Engine, backend: str) -> EngineReport:
    """Replace the segment's submodule by its engine, called with the runtime inputs only."""
    name = engine.segment.name
    compute = [n for n in getattr(gm, name).graph.nodes if is_compute(n)]
    call = call_node(gm, name)
    weights = {str(a.target) for a in call.args if is_constant(a)}
    weight_bytes = sum(t.nbytes for w in weights if isinstance(t := operator.attrgetter(w)(gm), torch.Tensor))
    call.args = tuple(a for a in call.args if not is_constant(a))
    gm.delete_submodule(name)
    gm.add_submodule(name, engine.module)
    return EngineReport(
        name=name,
        num_nodes=len(compute),
        ops=dict(Counter(str(n.target) for n in compute)),
        input_shapes=[s.shape for s in engine.segment.inputs],
        output_shapes=[s.shape for s in engine.segment.outputs],
        backend=backend,
        cache_hit=engine.cache_hit,
        int8_ops=dict(engine.segment.int8_ops),
        fused_ops=engine.segment.fused_ops,
        int4_ops=dict(engine.segment.int4_ops),
        fp8_ops=dict(engine.segment.fp8_ops),
        profiles=describe_profiles(engine.segment.inputs),
        streamable_bytes=engine.module.streamable_bytes if isinstance(engine.module, EngineModule) else 0,
        weight_bytes=weight_bytes,
        collectives=engine.segment.collectives,
    )


def stitch(
    split: Split,
    engines: list[Engine],
    symbols: SymbolRanges,
    backend: str,
    settings: LoweringSettings,
    conditions: tuple[str, ...] = (),
) -> LoweredModule:
    """Stage 5. In: the split graph, the engine of each of its segments, the shape symbols'
    ranges and the size conditions (for the input guard), the backend the engines run on and the
    settings (for the report). Out: the LoweredModule, the split graph itself with each
    `engine_<k>` submodule replaced by its engine, weights the engines took in dropped, an
    InputGuard checking every call's inputs first, and its LoweringReport (timings are api.py's to
    fill in)."""
    gm = split.gm
    reports = [_swap(gm, engine, backend) for engine in engines]
    for node in list(gm.graph.nodes):
        if node.op == "get_attr" and not node.users:
            gm.graph.erase_node(node)
    _guard_inputs(gm, symbols, conditions)

    in_engines = sum(e.num_nodes for e in reports)
    total = in_engines + sum(1 for n in gm.graph.nodes if is_compute(n))
    report = LoweringReport(
        coverage=in_engines / total if total else 1.0,
        engines=reports,
        fallbacks=[Fallback(node.name, target_label(node.target), reason) for node, reason in split.fallbacks.items()],
        backend=backend,
        precision=settings.precision,
        trt_version=settings.trt_version,
        keep_fp32=sorted(settings.keep_fp32),
        notes=[note for engine in engines for note in engine.segment.notes],
    )
    lowered = LoweredModule(gm, gm.graph, report)
    lowered.segments = {engine.segment.name: engine.segment for engine in engines}
    return lowered
