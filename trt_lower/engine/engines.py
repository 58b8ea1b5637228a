"""Stage 4, build: each converted segment -> the module that runs its engine, on one backend."""

from __future__ import annotations

from dataclasses import replace

from converters.passes.bfloat16 import has_bfloat16
from trt_lower.engine.build_options import BuildOptions
from trt_lower.engine.errors import EngineBuildError
from trt_lower.engine.ort_session import SESSION_ERRORS, fast_path_works, segment_session
from trt_lower.engine.tensorrt import installed_version
from trt_lower.runtime.ort_module import OrtEngineModule
from trt_lower.values import progress
from trt_lower.values.segment import ConvertedSegment, Engine
from trt_lower.values.settings import LoweringSettings


def build_options(settings: LoweringSettings) -> BuildOptions:
    """The builder options the settings ask for: what an engine is built with, and cached under."""
    return BuildOptions(
        precision=settings.precision, refittable=settings.refittable, weight_streaming=settings.weight_streaming
    )


def _engine(segment: ConvertedSegment, backend: str, settings: LoweringSettings, alone: bool) -> Engine:
    if backend == "onnxruntime":
        try:
            session = segment_session(segment.onnx, spin_between_runs=alone)
            module = OrtEngineModule(
                segment.name,
                session,
                segment.onnx,
                segment.inputs,
                segment.outputs,
                segment.tuple_output,
                fast_path=fast_path_works(),
            )
        except SESSION_ERRORS as e:  # ONNX we emitted that ONNX Runtime refuses: a converter bug
            reason = f"{type(e).__name__}: {e}"
            why = f"ONNX Runtime could not build {segment.name}: {reason}"
            raise EngineBuildError(segment.name, reason, dict.fromkeys(segment.nodes, why), "ONNX Runtime") from e
        if has_bfloat16(segment.onnx.model):
            note = (
                f"{segment.name} computes bfloat16 as float32 on ONNX Runtime (no bfloat16 kernels on its CPU provider)"
            )
            segment = replace(segment, notes=(*segment.notes, note))
        return Engine(segment, module, None)
    # Imports tensorrt, so only here: backend resolution has checked that it is usable.
    from trt_lower.engine.trt_engines import load_engine

    trt_module, cache_hit = load_engine(
        segment.name,
        segment.onnx,
        segment.inputs,
        segment.outputs,
        segment.tuple_output,
        nodes=segment.nodes,
        options=build_options(settings),
        cache_dir=settings.cache_dir,
        cuda_graphs=settings.cuda_graphs,
    )
    return Engine(segment, trt_module, cache_hit)


def built_by(engine: Engine, backend: str) -> str:
    """What built `engine`: "TensorRT 10.13.0" or "ONNX Runtime 1.23.2"."""
    if backend == "onnxruntime":
        import onnxruntime

        return f"ONNX Runtime {onnxruntime.__version__}"
    return f"TensorRT {installed_version()}"


def forget(engine: Engine, settings: LoweringSettings, why: str) -> None:
    """Drop `engine`'s plan from the TensorRT engine cache (verification found it wrong: the cache
    is to keep the repaired plan, not this one); nothing on ONNX Runtime, which caches nothing."""
    if engine.cache_hit is None:
        return
    from trt_lower.engine.trt_engines import discard_engine

    segment = engine.segment
    discard_engine(segment.onnx, segment.inputs, build_options(settings), settings.cache_dir, why)


def engine_is_whole_call(engines: int, eager_ops: int) -> bool:
    """Whether a lowered call computes nothing but its one engine (then ONNX Runtime's workers
    spin between the engine's runs, see engine/ort_session.py)."""
    return engines == 1 and not eager_ops


def build(segments: list[ConvertedSegment], backend: str, settings: LoweringSettings, *, alone: bool) -> list[Engine]:
    """Stage 4. In: the converted segments, the resolved backend ("tensorrt" or "onnxruntime"),
    the settings (precision, engine cache directory, CUDA graphs) and whether the engine is the
    whole lowered call (`engine_is_whole_call`; measured in bench/bench_spinning.py). Out: one Engine per
    segment, in order: an ONNX Runtime session, or a TensorRT engine loaded from the engine cache
    or built (and cached). Raises EngineBuildError naming the FX nodes to run eagerly instead
    when TensorRT cannot build a segment, or ONNX Runtime cannot load one."""
    return [
        _engine(segment, backend, settings, alone)
        for segment in progress.track(segments, "trt_lower: building engines")
    ]
