"""A segment's TensorRT engine: loaded from the engine cache when a valid entry exists, else built
(one log line per engine with its build time) and cached."""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path
from typing import Sequence

import tensorrt as trt

from converters.core.segment import OnnxSegment
from converters.passes.bfloat16 import has_bfloat16
from converters.passes.onnx_types import has_fp8, has_int4
from trt_lower.engine import timing_cache_file
from trt_lower.engine.build_memory import peak_resident
from trt_lower.engine.build_options import BuildOptions, InputProfile, input_profiles
from trt_lower.engine.cache import EngineCache, Key, default_dir
from trt_lower.engine.errors import EngineBuildError
from trt_lower.engine.trt_builder import BuildFailure, build_plan
from trt_lower.runtime.trt_module import DeviceMemoryError, PlanLoadError, TRTEngineModule
from trt_lower.values import device as devices
from trt_lower.values.segment import collective_layers
from trt_lower.values.signature import TensorSig

log = logging.getLogger("trt_lower")


def _fallback(name: str, reason: str, nodes: Sequence[str], blamed: str | None = None) -> EngineBuildError:
    """The nodes to run eagerly instead: the one the parser blamed, else the whole segment."""
    why = f"TensorRT could not build {name}: {reason}"
    if blamed is not None and blamed in nodes:
        return EngineBuildError(name, reason, {blamed: why})
    return EngineBuildError(name, reason, dict.fromkeys(nodes, why))


def _cache_entry(
    segment: OnnxSegment, inputs: tuple[TensorSig, ...], options: BuildOptions, cache_dir: Path | None
) -> tuple[EngineCache, list[list[InputProfile]], Key]:
    """The engine cache, the segment's optimization profiles and its key there: the graph and the
    weights' bytes, hashed in place, with the profiles and build options."""
    cache = EngineCache(cache_dir or default_dir(), trt.__version__, devices.current().identity())
    profiles = input_profiles(inputs)
    return cache, profiles, cache.key(segment, profiles, options)


def discard_engine(
    segment: OnnxSegment, inputs: tuple[TensorSig, ...], options: BuildOptions, cache_dir: Path | None, why: str
) -> None:
    """Remove the segment's cached plan, saying why in the log."""
    cache, _, key = _cache_entry(segment, inputs, options, cache_dir)
    with cache.exclusive(key):
        cache.discard(key, why)


def load_engine(
    name: str,
    segment: OnnxSegment,
    inputs: tuple[TensorSig, ...],
    outputs: tuple[TensorSig, ...],
    tuple_output: bool,
    *,
    nodes: Sequence[str],
    options: BuildOptions,
    cache_dir: Path | None,
    cuda_graphs: bool,
    timing_cache: Path | None = None,
) -> tuple[TRTEngineModule, bool]:
    """The engine module for one segment, and whether it came from the cache.

    `nodes` are the segment's FX nodes: an EngineBuildError names those that must run eagerly.
    `timing_cache`: the timing_cache file a build reads and updates (else the engine cache's).
    """
    # TensorRT parses the self-contained model where it fits one protobuf message, else the graph
    # from a file with its weights beside it (ONNX external data), which has no size limit.
    cache, profiles, key = _cache_entry(segment, inputs, options, cache_dir)

    # One process (or thread) builds a key; the others lowering it at the same time wait, then load it.
    with cache.exclusive(key):
        return _load_or_build(
            name,
            cache,
            key,
            segment,
            profiles,
            inputs,
            outputs,
            tuple_output,
            nodes=nodes,
            options=options,
            cuda_graphs=cuda_graphs,
            timing_cache=timing_cache,
        )


def _load_or_build(
    name: str,
    cache: EngineCache,
    key: Key,
    segment: OnnxSegment,
    profiles: list[list[InputProfile]],
    inputs: tuple[TensorSig, ...],
    outputs: tuple[TensorSig, ...],
    tuple_output: bool,
    *,
    nodes: Sequence[str],
    options: BuildOptions,
    cuda_graphs: bool,
    timing_cache: Path | None,
) -> tuple[TRTEngineModule, bool]:
    collectives = bool(collective_layers(segment))
    cached = cache.load(key)
    if cached is not None:
        try:
            module = TRTEngineModule(
                name, cached, inputs, outputs, tuple_output, cuda_graphs=cuda_graphs, collectives=collectives
            )
        except PlanLoadError as e:
            cache.discard(key, f"TensorRT could not load it: {e}")
        except DeviceMemoryError as e:  # the entry is good; a rebuild would fail the same way
            raise _fallback(name, str(e), nodes) from e
        else:
            log.info("trt_lower: %s: TensorRT engine loaded from cache (%s)", name, cache.engine_path(key))
            return module, True

    log.info("trt_lower: %s: building TensorRT engine (TensorRT %s, %s) ...", name, trt.__version__, cache.device)
    start = time.perf_counter()
    try:
        with peak_resident() as memory:
            plan = _build_and_time(name, cache, segment, profiles, options, timing_cache)
        module = TRTEngineModule(
            name, plan, inputs, outputs, tuple_output, cuda_graphs=cuda_graphs, collectives=collectives
        )
    except BuildFailure as e:
        raise _fallback(name, e.reason, nodes, e.fx_node) from e
    except PlanLoadError as e:
        raise _fallback(name, f"the engine it built does not load: {e}", nodes) from e
    except DeviceMemoryError as e:
        # The plan is good: kept, so that a lowering with memory to spare loads it instead of building.
        cache.store(key, plan)
        raise _fallback(name, str(e), nodes) from e
    cache.store(key, plan)
    measured = memory.peak is not None and memory.start is not None
    growth = f", host memory peak +{((memory.peak or 0) - (memory.start or 0)) / 2**20:.0f} MiB" if measured else ""
    log.info("trt_lower: %s: built TensorRT engine in %.1f s%s", name, time.perf_counter() - start, growth)
    return module, False


def _build_and_time(
    name: str,
    cache: EngineCache,
    segment: OnnxSegment,
    profiles: list[list[InputProfile]],
    options: BuildOptions,
    timing_cache: Path | None,
) -> bytes:
    """The plan, built with the timings of the timing_cache file (else the engine cache's), which
    get this build's timings back."""
    timings = cache.load_timing_cache() if timing_cache is None else timing_cache_file.read(timing_cache)
    plan, timings = _build(name, segment, profiles, options, timings, timing_cache)
    if timing_cache is None:
        cache.store_timing_cache(timings)
    else:
        timing_cache_file.write(timing_cache, timings)
    return plan


def _build(
    name: str,
    segment: OnnxSegment,
    profiles: list[list[InputProfile]],
    options: BuildOptions,
    timings: bytes,
    timing_cache: Path | None,
) -> tuple[bytes, bytes]:
    typed = has_bfloat16(segment.model) or has_int4(segment.model) or has_fp8(segment.model)
    if segment.fits_one_protobuf():
        return build_plan(
            segment.to_bytes(), profiles, options, timings, typed=typed, name=name, timing_cache_file=timing_cache
        )
    with tempfile.TemporaryDirectory(prefix="trt_lower_") as tmp:
        path = segment.save(Path(tmp) / "model.onnx")
        return build_plan(
            path.read_bytes(),
            profiles,
            options,
            timings,
            typed=typed,
            path=str(path),
            name=name,
            timing_cache_file=timing_cache,
        )
