"""lower_to_trt: the one call users make, and the pipeline it runs:
capture -> split -> convert -> build -> verify -> stitch."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
import warnings
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

import torch

from converters.core.interpreter import ConversionError
from converters.core.target import TrtTarget
from converters.core.user import plugin_refusals
from splitter import ConverterSupport, Split, split
from trt_lower import lowering_options
from trt_lower.capture.aten_graph import CapturedGraph, capture, check_inputs, example_call
from trt_lower.capture.profiles import checked_call, profile_specs
from trt_lower.convert.driver import convert
from trt_lower.engine.backend import check_target, resolve_backend
from trt_lower.engine.build_memory import PeakMemory, peak_resident
from trt_lower.engine.engines import build, engine_is_whole_call
from trt_lower.engine.errors import EngineBuildError
from trt_lower.stitch.lowered import LoweredModule
from trt_lower.stitch.swap import stitch
from trt_lower.values.call import Inputs, model_call
from trt_lower.values.errors import UnsupportedOpsError
from trt_lower.values.segment import ConvertedSegment
from trt_lower.values.settings import LoweringSettings
from trt_lower.verify.samples import reference_inputs
from trt_lower.verify.stage import RepairPlan, Verifier

log = logging.getLogger("trt_lower")


@dataclass(frozen=True)
class Lowering:
    """What lower_to_trt made a module from: LoweredModule.update_weights splits and converts it
    again with new weights (trt_lower/refit/), and checks the result on the example inputs."""

    captured: CapturedGraph
    settings: LoweringSettings
    failed: dict[str, str]  # nodes kept eager after a converter or engine build failed on them
    inputs: tuple[Any, ...]  # the example inputs updates are checked on (tensors at every leaf)
    kwargs: dict[str, Any]
    plan: RepairPlan  # what verification changed: fusion breakers, nodes kept float32 or eager

    def split(self, gm: torch.fx.GraphModule) -> Split:
        """`gm` (one of captured.graph_module()'s) split as lower_to_trt splits it."""
        support = ConverterSupport(
            TrtTarget(self.settings.trt_version),
            self.settings.fallback_ops,
            {**self.failed, **self.plan.eager},
            collectives_in_engine=self.settings.collectives == "engine",
        )
        return split(gm, support, self.settings.min_block_size, frozenset(self.plan.breakers))

    def convert(self, parts: Split) -> list[ConvertedSegment]:
        return convert(
            parts,
            TrtTarget(self.settings.trt_version),
            self.settings.precision,
            self.captured.symbols,
            self.settings.keep_fp32 | self.plan.fp32,
            self.captured.profiles,
        )


def lower_to_trt(
    model: torch.nn.Module,
    inputs: Inputs,
    *,
    kwargs: dict[str, Any] | None = None,
    backend: str = "auto",
    precision: str | torch.dtype = "fp32",
    min_block_size: int = 3,
    fallback_ops: Iterable[Any] = (),
    require_full: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
    cuda_graphs: bool = False,
    trt_version: str | None = None,
    keep_fp32: Iterable[Any] = (),
    refittable: bool = False,
    optimization_level: int | None = None,
    workspace_bytes: int | None = None,
    tactic_sources: Iterable[str] | None = None,
    timing_cache: str | os.PathLike[str] | None = None,
    performance_tuner: bool = False,
    weight_streaming: bool = False,
    collectives: str = "eager",
    verify: bool = True,
    verify_inputs: Inputs | None = None,
    verify_kwargs: dict[str, Any] | None = None,
    profiles: Sequence[Any] | None = None,
) -> LoweredModule:
    """Lower `model` for `model(*inputs, **kwargs)`: TensorRT-capable regions become engines, the rest
    stays eager.

    inputs, kwargs: the positional arguments (a tuple or list; one tensor stands for `(x,)`) and the
        keyword arguments (a dict), any pytrees torch.export takes (tuples, lists, dicts,
        transformers' caches) with a tensor or a TensorSpec (where a size varies) at each leaf.
        The lowered module takes the same structure. check_accuracy, benchmark and every other
        function that runs a model take them alike.

    backend: "tensorrt", "onnxruntime", or "auto" (TensorRT when usable, else ONNX Runtime).
    fallback_ops: ATen ops (OpOverload, packet or name like "aten.relu.default") kept in eager; a
        name that is no registered op is a ValueError.
    require_full: raise UnsupportedOpsError listing every unsupported node instead of falling back.
    cache_dir: where TensorRT engines are cached (default $TRT_LOWER_CACHE_DIR, else ~/.cache/trt_lower).
    cuda_graphs: replay TensorRT engines from CUDA graphs (static shapes; on ONNX Runtime it is
        ignored, with a warning).
    precision: "fp32" (or torch.float32), or "fp16" (or torch.float16: fp16 engines, with
        softmax/normalizations/reductions/exp/log/pow kept fp32 inside; inputs and outputs keep
        their dtypes).
    trt_version: the TensorRT whose ONNX parser limits the converters respect: a target, "8.6",
        "10.4" (10.0-10.11), "10.12" (10.12-10.14) or "latest" (10.15+, 11.x; ONNX opset 23), or a
        release as tensorrt.__version__ says ("10.13", "11.2.0.1"), lowered for its target (the
        report shows both). Default: the installed TensorRT's, else "10.4" (last with V100).
    keep_fp32: with precision="fp16", FX node names or ATen ops that stay float32 (e.g. what
        trt_lower.debug.fp16_sensitive returns).
    refittable: build TensorRT engines refittable, so that `lowered.update_weights` replaces their
        weights in place (docs/refit.md); ONNX Runtime engines take new weights either way.
    optimization_level: TensorRT's builder optimization level, 0 (fastest build) to 5 (longest
        search for faster kernels); None: TensorRT's default, 3 (docs/build-options.md).
    workspace_bytes: the scratch memory TensorRT's kernels may use (tactics needing more are
        skipped); None: 4 GiB.
    tactic_sources: the TensorRT tactic sources kernels may come from, by name: "cublas",
        "cublas_lt", "cudnn", "edge_mask_convolutions", "jit_convolutions" (an empty set: TensorRT's
        own kernels only); None: TensorRT's default set.
    timing_cache: a TensorRT timing cache file, read before each engine build when it exists and
        written back (atomically) after, to share kernel timings across builds and machines with
        the same GPU and TensorRT; one TensorRT cannot use is a TimingCacheError naming it.
    performance_tuner: TensorRT 11.1's Global Performance Tuner; refused (ValueError) on every
        TensorRT version for now (docs/build-options.md says why).
    The builder knobs change the engine cache key, except timing_cache; ONNX Runtime ignores them
    (with a warning).
    weight_streaming: build TensorRT engines (10.0 or newer) whose weights stay in host memory and
        stream to the GPU as layers need them, for a model larger than the GPU;
        `lowered.weight_streaming_budget` sets how many bytes stay on the GPU
        (docs/weight-streaming.md). Refused for TensorRT 8.6; on ONNX Runtime it is ignored, with a
        warning.
    collectives: where torch.distributed's functional collectives (all_reduce, all_gather_into_tensor,
        reduce_scatter_tensor and their waits) of a tensor-parallel model run: "eager" (between
        engines, through torch.distributed) or "engine" (inside them, as TensorRT 11's
        DistCollective layers over the process group's NCCL communicator: collectives over the
        whole world, on GPUs from Ampere on; docs/distributed-lowering.md). "engine" is refused
        (InEngineCollectivesError) on ONNX Runtime, on TensorRT older than 11.0 and, when the
        engines load, over a process group that is not NCCL.
    verify: feed each engine the values eager PyTorch computes for its inputs from the example
        inputs and compare its outputs with eager's, at its precision's tolerance; an engine that
        disagrees is bisected to its culprit and repaired (split there, kept float32, kept eager),
        listed in report.repairs (docs/verify.md). Under require_full=True it raises
        VerificationError instead.
    verify_inputs: real sample tensors, in the structure of `inputs` (one tensor stands for
        `(x,)`), to verify with where `inputs` holds TensorSpecs (without them verification is
        skipped, with a report note).
    verify_kwargs: real samples for the TensorSpecs in `kwargs`, in its structure (default: kwargs).
    profiles: several optimization profiles per engine (docs/dynamic-shapes.md, "Several profiles"):
        a list of profiles, each in the structure of `inputs` with a TensorSpec (its min, opt and
        max) inside the declared range at each dynamic leaf, or a dict with "inputs" and/or
        "kwargs" in theirs. Each engine is built with one profile per entry; a call runs on the
        tightest profile that holds its shapes, and one that fits none is a ValueError naming
        the ranges. Default: one profile, the range `inputs` declares.
    """
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    settings = lowering_options.create(
        backend=backend,
        precision=precision,
        min_block_size=min_block_size,
        fallback_ops=fallback_ops,
        require_full=require_full,
        cache_dir=cache_dir,
        cuda_graphs=cuda_graphs,
        trt_version=trt_version,
        keep_fp32=keep_fp32,
        refittable=refittable,
        optimization_level=optimization_level,
        workspace_bytes=workspace_bytes,
        tactic_sources=tactic_sources,
        timing_cache=timing_cache,
        performance_tuner=performance_tuner,
        weight_streaming=weight_streaming,
        collectives=collectives,
    )
    inputs, kwargs = model_call(inputs, kwargs)
    if verify_inputs is not None:
        verify_inputs = model_call(verify_inputs, name="verify_inputs")[0]
    if verify_kwargs is not None:
        verify_kwargs = model_call((), verify_kwargs, kwargs_name="verify_kwargs")[1]
    specs = check_inputs(model, inputs, kwargs)
    ranges = profile_specs(profiles, inputs, kwargs, specs)
    resolved = resolve_backend(settings.backend)
    lowering_options.check_collectives_backend(settings.collectives, resolved)
    if resolved == "tensorrt":
        check_target(settings.trt_version)
    elif ignored := lowering_options.ignored_on_onnxruntime(settings):
        warnings.warn(
            f"lower_to_trt: {', '.join(ignored)} {'is' if len(ignored) == 1 else 'are'} ignored on the {resolved} "
            "backend (they set up TensorRT's engines and their builds only)",
            stacklevel=2,
        )
    # Wall seconds per stage (LoweringReport.timings), summed over retries and repair rounds.
    timings = dict.fromkeys(("capture", "split", "convert", "build", "verify", "stitch"), 0.0)
    # The tensors traced with (made from the specs where not given): update_weights checks on them.
    args, keywords = example_call(specs, inputs, kwargs)
    with _timed(timings, "capture"):
        captured = capture(model, args, specs, keywords, TrtTarget(settings.trt_version), ranges)
    settings.check_keep_fp32(captured.program.graph)
    sample, skipped = (
        reference_inputs(model, inputs, kwargs, specs, verify_inputs, captured.program, verify_kwargs)
        if verify
        else (None, None)
    )
    verifier = None if sample is None else Verifier(captured, sample, resolved)
    # Nodes kept eager with the reason: those a try failed to convert or build, and from the start
    # those whose user converter emits a TensorRT plugin when the engines run elsewhere.
    failed: dict[str, str] = plugin_refusals(captured.graph_module(), resolved)
    plan = verifier.plan if verifier is not None else RepairPlan()  # what verification changes
    lowering = Lowering(
        captured, settings, failed, *checked_call(specs, inputs, kwargs, (args, keywords), ranges), plan
    )
    builds: list[PeakMemory] = []  # the host memory of each round's build stage
    while True:
        run_settings = dataclasses.replace(settings, keep_fp32=settings.keep_fp32 | plan.fp32)
        try:
            with _timed(timings, "split"):
                parts = lowering.split(captured.graph_module())
                _require_full(parts.fallbacks, settings)
            with _timed(timings, "convert"):
                segments = lowering.convert(parts)
            if verifier is not None:
                verifier.start(parts, segments)  # eager's reference values, computed beside the build
            with _timed(timings, "build"), peak_resident() as memory:
                builds.append(memory)
                alone = engine_is_whole_call(len(parts.engines), len(parts.fallbacks))
                engines = build(segments, resolved, run_settings, alone=alone)
            with _timed(timings, "verify"):
                if verifier is not None and not verifier.passes(parts, engines, run_settings):
                    continue  # repair planned: split, convert and build again
            with _timed(timings, "stitch"):
                lowered = stitch(
                    parts, engines, captured.symbols, resolved, run_settings, captured.conditions_over(parts.gm)
                )
            break
        except (ConversionError, EngineBuildError) as e:
            eager = _keep_eager(e, settings)
            if eager.keys() <= failed.keys():  # kept eager already, failed again: retrying cannot end
                raise
            failed.update(eager)
    lowered.report.timings = timings
    _report_build_memory(lowered, builds)
    lowered.report.trt_release = settings.trt_release
    lowered.report.notes[:0] = captured.notes
    lowered.lowering = lowering
    if verifier is not None:
        lowered.probe = verifier.probe()
        lowered.report.verify_errors = {v.engine: v.worst.error for v in verifier.verdicts}
        lowered.report.repairs = verifier.repairs
    elif skipped:
        lowered.report.notes.append(skipped)
    return lowered


def _report_build_memory(lowered: LoweredModule, builds: list[PeakMemory]) -> None:
    measured = [m for m in builds if m.peak is not None and m.start is not None]
    if measured:
        lowered.report.build_peak_rss_bytes = max(m.peak or 0 for m in measured)
        lowered.report.build_rss_growth_bytes = max((m.peak or 0) - (m.start or 0) for m in measured)


@contextlib.contextmanager
def _timed(timings: dict[str, float], phase: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        timings[phase] += time.perf_counter() - start


def _require_full(fallbacks: dict[torch.fx.Node, str], settings: LoweringSettings) -> None:
    if settings.require_full and fallbacks:
        listing = "\n".join(f"  {n.name} ({n.target}): {r}" for n, r in fallbacks.items())
        raise UnsupportedOpsError(f"require_full=True but {len(fallbacks)} node(s) cannot run in an engine:\n{listing}")


def _keep_eager(error: ConversionError | EngineBuildError, settings: LoweringSettings) -> dict[str, str]:
    """The nodes to keep eager on the next try, so that a converter bug or a segment TensorRT
    cannot build does not cost the user their model; under require_full, the error itself."""
    if settings.require_full:
        raise UnsupportedOpsError(f"require_full=True but {error}") from error
    if isinstance(error, ConversionError):
        log.warning("trt_lower: %s; running it in eager PyTorch", error)
        return {error.node_name: error.reason}
    which = f"node {next(iter(error.nodes))}" if len(error.nodes) == 1 else f"its {len(error.nodes)} nodes"
    log.warning("trt_lower: %s; running %s in eager PyTorch", error, which)
    return error.nodes
