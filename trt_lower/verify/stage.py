"""Stage 4b, verify: every built engine against eager PyTorch, and the repair of one that disagrees.

The captured graph runs eagerly once on the example inputs, keeping the values at engine
boundaries. Each engine is fed its inputs' eager values and its outputs compared, element by
element, with a float64 run of its subgraph on the same values (float64.py), allowing a multiple
of eager's own error at its precision (tolerance.py). The first engine that fails is bisected to
the smallest run of nodes that fails alone (bisect.py); its first node is the culprit, and the plan
tries, one round each, splitting the engine there (an extra engine output, which on TensorRT
breaks the fusion across it), keeping the run float32 (fp16 engines), keeping it eager. api.py
then splits, converts and builds again and verifies again; past MAX_ROUNDS a failing engine runs
eagerly as a whole, and past twice that verification gives up.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import math
import operator
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from converters.core.interpreter import ConversionError
from converters.passes.bfloat16 import has_bfloat16
from splitter.partition import Split, call_node, is_constant
from splitter.support import target_label
from trt_lower.capture.aten_graph import CapturedGraph
from trt_lower.engine.engines import built_by, forget
from trt_lower.engine.errors import EngineBuildError
from trt_lower.report.entries import Repair
from trt_lower.values.errors import UnsupportedOpsError
from trt_lower.values.probe import Probe
from trt_lower.values.segment import ConvertedSegment, Engine
from trt_lower.values.settings import LoweringSettings
from trt_lower.verify.bisect import smallest_failing
from trt_lower.verify.eager import EagerValues
from trt_lower.verify.float64 import graph_float64, run_float64
from trt_lower.verify.nodes import Node, ambiguous, is_quantized, module_of, source_line, units
from trt_lower.verify.segments import ScratchBuilder, convert_nodes
from trt_lower.verify.tolerance import OutputCheck, Tolerance, check_output

log = logging.getLogger("trt_lower")

# Repair rounds (each a split, convert, build and verify) before verification gives up.
MAX_ROUNDS = 8


# Float64 outputs of each engine of a split, by its name.
References = dict[str, list[Any]]


class VerificationError(UnsupportedOpsError):
    """An engine disagrees with eager PyTorch, and require_full=True forbids repairing it (or the
    repairs did not converge)."""


def tolerance_of(segment: ConvertedSegment, precision: str) -> Tolerance:
    return Tolerance(
        "bf16" if has_bfloat16(segment.onnx.model) else precision, bool(segment.int8_ops), bool(segment.fp8_ops)
    )


@dataclass(frozen=True)
class EngineVerdict:
    engine: str
    tolerance: Tolerance
    outputs: list[OutputCheck]

    @property
    def worst(self) -> OutputCheck:
        """The output furthest off (none compared: every output had several right values)."""
        return max(self.outputs, key=lambda c: c.error, default=OutputCheck("no comparable output", 0.0, True))

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.outputs)


def input_sources(parts: Split, segments: Sequence[ConvertedSegment]) -> dict[str, list[str]]:
    """Each engine's inputs as captured-graph node names: an input another engine computes is
    named after the node it outputs (the split graph reads it through a new getitem)."""
    made = {s.name: s for s in segments}

    def source(arg: Node) -> str:
        call, index = (arg.args[0], arg.args[1]) if arg.target is operator.getitem else (arg, 0)
        if isinstance(call, Node) and call.op == "call_module" and call.target in made:
            return made[str(call.target)].outputs[index if isinstance(index, int) else 0].source
        return arg.name

    return {
        name: [source(a) for a in call_node(parts.gm, name).args if isinstance(a, Node) and not is_constant(a)]
        for name in made
    }


def float64_outputs(parts: Split, name: str, inputs: list[str], values: EagerValues) -> list[Any]:
    """Engine `name`'s FX subgraph computed in float64, fed the eager values of its `inputs` (node
    names, as input_sources gives them) and its weights."""
    fed = iter(inputs)
    args = [
        functools.reduce(getattr, str(a.target).split("."), parts.gm)
        if is_constant(a)
        else values[next(fed)]
        if isinstance(a, Node)
        else a
        for a in call_node(parts.gm, name).args
    ]
    return graph_float64(getattr(parts.gm, name), args)


def check_engine(
    engine: Engine, graph: torch.fx.Graph, inputs: list[str], values: EagerValues, precision: str, reference: list[Any]
) -> EngineVerdict:
    """The engine (whose FX subgraph is `graph`) fed the eager values of its `inputs` (node names),
    each output against its eager value and its float64 `reference` (float64_outputs)."""
    segment = engine.segment
    # The subgraph's nodes carry the captured graph's names and targets: whether an output has one
    # right value is read there, not in the captured graph unsplit (which would be built for it).
    nodes = {n.name: n for n in graph.nodes}
    device = getattr(engine.module, "device", None)  # the example inputs may be elsewhere
    with torch.no_grad():
        out = engine.module(*(values[name].to(device) if device else values[name] for name in inputs))
    actual = list(out) if segment.tuple_output else [out]
    tol = tolerance_of(segment, precision)
    return EngineVerdict(
        segment.name,
        tol,
        [
            check_output(s.source, values[s.source], a, tol, r)
            for s, a, r in zip(segment.outputs, actual, reference)
            if not ambiguous(nodes[s.source])
        ],
    )


@dataclass
class RepairPlan:
    """What the next split, convert and build do differently: nodes whose outputs become extra
    engine outputs, nodes kept float32, nodes kept eager (with the reason the report shows)."""

    breakers: set[str] = field(default_factory=set)
    fp32: set[str] = field(default_factory=set)
    eager: dict[str, str] = field(default_factory=dict)
    # Culprit -> how many of ACTIONS it has had.
    tried: dict[str, int] = field(default_factory=dict)

    ACTIONS = ("split", "fp32", "eager")

    def apply(self, run: list[Node], engine: ConvertedSegment, precision: str, why: str) -> tuple[str, list[str]]:
        """Take the culprit's (run[0]'s) next action that changes something; the action and those
        tried before it. Past the last, the whole engine stays eager."""
        culprit = run[0].name
        names = [n.name for n in run]
        # Split at each value of the run but its last (a run of one: after it): only at a single
        # tensor (a multi-output node after its getitems: no engine output is a tuple), never at
        # an int8 or FP8 value (a quantize's codes are no engine input or output).
        tensors = [n for n in run if isinstance(n.meta.get("val"), torch.Tensor)]
        taken = {s.source for s in engine.outputs} | self.breakers
        cut = [n.name for n in tensors[:-1] or tensors if n.name not in taken and not is_quantized(n)]
        possible = {"split": bool(cut), "fp32": precision == "fp16" and not set(names) <= self.fp32, "eager": True}
        done = self.tried.get(culprit, 0)
        tried = [a for a in self.ACTIONS[:done] if possible[a]]
        for i in range(done, len(self.ACTIONS)):
            action = self.ACTIONS[i]
            if possible[action]:
                self.tried[culprit] = i + 1
                if action == "split":
                    self.breakers.update(cut)
                elif action == "fp32":
                    self.fp32.update(names)
                else:
                    self.eager.update(dict.fromkeys(names, why))
                return action, tried
        return self.whole_engine(engine, why), [*tried, "eager"]

    def whole_engine(self, engine: ConvertedSegment, why: str) -> str:
        self.eager.update(dict.fromkeys(engine.nodes, why))
        return "engine eager"


class Verifier:
    """Verifies each round's engines against eager values computed once; plans the repairs."""

    def __init__(self, captured: CapturedGraph, inputs: tuple[torch.Tensor, ...], backend: str) -> None:
        self.captured, self.inputs, self.backend = captured, inputs, backend
        self.values: EagerValues | None = None
        self._eager: concurrent.futures.Future[tuple[EagerValues, References]] | None = None
        # The float64 references of the first split's engines, computed with the eager values.
        self._references: tuple[Split, References] | None = None
        self.plan = RepairPlan()
        self.repairs: list[Repair] = []
        self.verdicts: list[EngineVerdict] = []
        self.rounds = 0

    def probe(self) -> Probe | None:
        """The example inputs and eager's outputs for them, once verification has run."""
        return None if self.values is None else Probe(self.inputs, self.values.outputs)

    def start(self, parts: Split, segments: Sequence[ConvertedSegment]) -> None:
        """Starts the eager run on the first split to be built, beside the build: a build leaves
        cores idle (ONNX Runtime's graph optimisation is mostly single-threaded), so verification
        adds little more than the engine calls. Not with inputs on a GPU: eager kernels beside
        TensorRT's timing of its tactics would skew its choice; `passes` runs eager then."""
        if self._eager is None and self.values is None and all(t.device.type == "cpu" for t in self.inputs):
            pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="trt_lower_verify")
            self._eager = pool.submit(self._eager_values, parts, segments)
            pool.shutdown(wait=False)  # the thread ends with the run

    def _eager_values(self, parts: Split, segments: Sequence[ConvertedSegment]) -> tuple[EagerValues, References]:
        """Eager's values, and the float64 reference of each engine of `parts` (beside the build
        too: float64 costs about two and a half eager passes on a CPU)."""
        sources = input_sources(parts, segments)
        outputs = {s.name: [o.source for o in s.outputs] for s in segments}
        keep = frozenset(n for names in (*sources.values(), *outputs.values()) for n in names)
        values = EagerValues(parts.gm, self.inputs, keep, outputs, self.captured.graph_module)
        return values, {s.name: float64_outputs(parts, s.name, sources[s.name], values) for s in segments}

    def passes(self, parts: Split, engines: list[Engine], settings: LoweringSettings) -> bool:
        """True when every engine agrees with eager; else the first that does not is evicted from
        the engine cache, bisected, and a repair planned (VerificationError under require_full)."""
        segments = [e.segment for e in engines]
        sources = input_sources(parts, segments)
        if self.values is None:
            found = self._eager.result() if self._eager is not None else self._eager_values(parts, segments)
            self.values, self._references = found[0], (parts, found[1])
        computed = self._references[1] if self._references is not None and self._references[0] is parts else {}
        self._references = None  # used once: a repair makes another split
        self.verdicts = []
        for engine in engines:
            name = engine.segment.name
            reference = computed.get(name) or float64_outputs(parts, name, sources[name], self.values)
            verdict = check_engine(
                engine, getattr(parts.gm, name).graph, sources[name], self.values, settings.precision, reference
            )
            self.verdicts.append(verdict)
            if not verdict.passed:
                forget(engine, settings, f"it disagrees with eager PyTorch ({verdict.worst.error:.3g}x its tolerance)")
                self._repair(parts, engine, verdict, settings)
                return False
        worst = max((v.worst.error for v in self.verdicts), default=0.0)
        for repair in self.repairs:
            if repair.error_after is None:
                repair.error_after = worst
        if self.repairs:
            log.warning(
                "trt_lower: %d engine(s) disagreed with eager PyTorch and were repaired (%s); see report.repairs",
                len(self.repairs),
                ", ".join(f"{r.node}: {r.action}" for r in self.repairs),
            )
        return True

    def _repair(self, parts: Split, engine: Engine, verdict: EngineVerdict, settings: LoweringSettings) -> None:
        assert self.values is not None
        self.rounds += 1
        run, _ = self._locate(parts, engine, verdict.tolerance, settings)
        culprit = run[0]
        path, _kind = module_of(culprit)
        worst = verdict.worst
        evidence = (
            f"{engine.segment.name} ({built_by(engine, self.backend)}) disagrees with eager PyTorch: output "
            f"{worst.name} is off by {worst.error:.3g}x its tolerance ({verdict.tolerance.describe()}); "
            f"the smallest run of nodes that fails alone: {', '.join(n.name for n in run)}; culprit "
            f"{culprit.name} ({target_label(culprit.target)}) in {path or '<model>'} at {source_line(culprit)}"
        )
        if settings.require_full:
            raise VerificationError(
                f"{evidence}. require_full=True: not repaired (keep the culprit eager with "
                "fallback_ops, or float32 with keep_fp32)"
            )
        if self.rounds > 2 * MAX_ROUNDS:
            raise VerificationError(f"{evidence}. {2 * MAX_ROUNDS} rounds of repairs did not make every engine agree")
        why = (
            f"verification: {engine.segment.name} disagreed with eager PyTorch here ({worst.error:.3g}x its tolerance)"
        )
        if self.rounds > MAX_ROUNDS:  # the repairs by node did not converge: the failing engine runs eagerly
            action, tried = self.plan.whole_engine(engine.segment, why), ["split", "fp32", "eager"]
        else:
            action, tried = self.plan.apply(run, engine.segment, settings.precision, why)
        self.repairs.append(
            Repair(
                culprit.name,
                target_label(culprit.target),
                path,
                source_line(culprit),
                engine.segment.name,
                built_by(engine, self.backend),
                [n.name for n in run],
                worst.error if math.isfinite(worst.error) else None,
                None,
                action,
                tried,
            )
        )

    def _locate(
        self, parts: Split, engine: Engine, tol: Tolerance, settings: LoweringSettings
    ) -> tuple[list[Node], float | None]:
        """The smallest run of the engine's nodes that fails built alone and fed eager inputs."""
        values = self.values
        assert values is not None
        sub = getattr(parts.gm, engine.segment.name)
        nodes = sorted(
            (values.nodes[n.name] for n in sub.graph.nodes if n.op == "call_function" and n.name in values.nodes),
            key=values.order.__getitem__,
        )
        engine_outputs = {values.node(s.source) for s in engine.segment.outputs}
        builder = ScratchBuilder(self.backend, settings)

        def fails(run: list[Node]) -> float | None:
            inside = set(run)
            outputs = [
                n
                for n in run
                if isinstance(values[n], torch.Tensor)
                and not ambiguous(n)
                and (n in engine_outputs or any(u not in inside for u in n.users))
            ]
            if not outputs:
                return None
            try:
                segment, fed = convert_nodes(run, outputs, f"{engine.segment.name}_probe", settings, values.__getitem__)
                actual = builder.run(segment, [values[a] for a in fed])
            except (ConversionError, EngineBuildError):
                return None  # a run that cannot stand alone proves nothing
            reference = run_float64(run, values.__getitem__, outputs)
            errors = [
                c.error
                for o, a in zip(outputs, actual)
                if not (c := check_output(o.name, values[o], a, tol, reference[o])).passed
            ]
            return max(errors, default=None)

        return smallest_failing(units(nodes), fails)
