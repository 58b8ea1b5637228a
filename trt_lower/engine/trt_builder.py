"""ONNX bytes -> serialized TensorRT plan: ONNX parser, builder config, its optimization profiles.

Version branches (docs/tensorrt.md):
- network flags: 8.6's ONNX parser needs an EXPLICIT_BATCH network; 10.x ignores the flag, so
  create_network(0); 11.x removed it.
- fp16: the ONNX is typed fp16 with float32 islands (converters/passes/precision.py). 10.x builds it
  as a STRONGLY_TYPED network, so the islands stay float32 (the FP16 builder flag would let
  TensorRT run them in fp16); 11.x types every network strongly; 8.6 has no strong typing: the
  FP16 flag, with the layers the ONNX keeps float32 pinned to float32 (per-layer precision and
  output types, which OBEY_PRECISION_CONSTRAINTS makes binding).
- int8 (Q/DQ from converters/ops/quantize.py): the INT8 flag on weakly typed 8.6/10.x networks.
- FP8 (Q/DQ from converters/ops/fp8.py, target "latest"): 10.x builds it strongly typed, so the
  types come from the Q/DQ (no FP8 flag, which 11.x removed).
- bf16 (targets "10.12" and "latest"): the ONNX is typed bfloat16 where the model is; 10.x builds it strongly
  typed too, so TensorRT computes in the ONNX's types.
- int4 weights (target "latest": converters/ops/int4.py): 10.x builds the network strongly typed
  as well, so the INT4 DequantizeLinear and the float layers reading it compute in the ONNX's types
  (11.x: always).
- weight streaming (BuilderFlag.WEIGHT_STREAMING, 10.0 on): TensorRT takes it on strongly typed
  networks only, so a streamable 10.x engine is built strongly typed whatever its precision (fp32
  stays fp32: a strongly typed network computes in the ONNX's types); 8.6 has no such flag.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import onnx
import tensorrt as trt

from converters.core.errors import TrtLowerError
from trt_lower.engine import build_progress
from trt_lower.engine.build_options import BuildOptions, InputProfile
from trt_lower.engine.builder_knobs import TACTIC_SOURCES
from trt_lower.engine.errors import TimingCacheError
from trt_lower.runtime.trt_logger import LOGGER, TrtLogger
from trt_lower.values.versions import parse_version

log = logging.getLogger("trt_lower")


class BuildFailure(TrtLowerError):
    """TensorRT refused the network; `fx_node` is the FX node the parser blamed, if it named one."""

    def __init__(self, reason: str, fx_node: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.fx_node = fx_node


def network_flags(major: int, precision: str, typed: bool) -> int:
    """`typed`: the ONNX carries types TensorRT must keep (bfloat16, INT4, FP8)."""
    if major < 10:
        return 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
    if major == 10 and (precision == "fp16" or typed):
        return 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    return 0


def has_quantization(onnx_bytes: bytes) -> bool:
    """Whether the ONNX holds QuantizeLinear/DequantizeLinear nodes (explicit quantization)."""
    return any(
        n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in onnx.load_from_string(onnx_bytes).graph.node
    )


def fx_node_of(onnx_node: str) -> str:
    """GraphBuilder.op names each ONNX node '<FX node>/<OpType>' (converters/core/builder.py)."""
    return onnx_node.split("/", 1)[0]


def _parse_failure(parser: trt.OnnxParser, onnx_bytes: bytes) -> BuildFailure:
    # TensorRT 8.6's ParserError only has the node index; read the names from the ONNX itself.
    nodes = onnx.load_from_string(onnx_bytes).graph.node
    messages, blamed = [], None
    for i in range(parser.num_errors):
        error = parser.get_error(i)
        index = int(error.node())
        if 0 <= index < len(nodes):
            node = nodes[index]
            blamed = blamed or fx_node_of(node.name)
            messages.append(
                f"ONNX node '{node.name}' ({node.op_type}, from FX node '{fx_node_of(node.name)}'): {error.desc()}"
            )
        else:
            messages.append(str(error.desc()))
    return BuildFailure("its ONNX parser failed: " + "; ".join(messages), blamed)


def _pin_float32(network: trt.INetworkDefinition) -> None:
    """Weak typing lets the FP16 flag run any layer in fp16: those computing float32 in the ONNX
    (its islands, e.g. softmax, variance, exp, pow, which overflow in fp16) are held to it."""
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        outputs = [j for j in range(layer.num_outputs) if layer.get_output(j).dtype == trt.DataType.FLOAT]
        if outputs:
            layer.precision = trt.DataType.FLOAT
            for j in outputs:
                layer.set_output_type(j, trt.DataType.FLOAT)


def _dims(shape: tuple[int, ...]) -> trt.Dims:
    return trt.Dims(list(shape))


def _use_timing_cache(
    config: trt.IBuilderConfig, serialized: bytes, logger: TrtLogger, source: Path | None = None
) -> None:
    """`source`: the timing_cache file `serialized` was read from; what TensorRT refuses from it is
    a TimingCacheError (the file is the user's), from the engine cache a warning and a new cache."""
    cache = config.create_timing_cache(serialized)
    # ignore_mismatch=False: another GPU's timings would mislead tactic selection here.
    if cache is not None and config.set_timing_cache(cache, False):
        return
    if source is not None:
        raise TimingCacheError(
            str(source),
            "TensorRT cannot use it ("
            + (logger.take_errors() or "written by another TensorRT or for another GPU")
            + ")",
        )
    log.warning(
        "trt_lower: TensorRT rejected the saved timing cache (%s); starting a new one",
        logger.take_errors() or "no reason given",
    )
    config.set_timing_cache(config.create_timing_cache(b""), False)


def _tactic_sources(names: tuple[str, ...]) -> int:
    """The trt.TacticSource bitmask of `names`; ValueError naming one this TensorRT's API lacks."""
    mask = 0
    for name in names:
        member = getattr(trt.TacticSource, TACTIC_SOURCES[name], None)
        if member is None:
            raise ValueError(f"tactic_sources: TensorRT {trt.__version__} has no tactic source {name!r}")
        mask |= 1 << int(member)
    return mask


def _add_profile(
    builder: trt.Builder, config: trt.IBuilderConfig, ranges: Sequence[InputProfile], logger: TrtLogger
) -> None:
    """One optimization profile: each input's range in it (TensorRT numbers them in this order)."""
    profile = builder.create_optimization_profile()
    for p in ranges:
        profile.set_shape(p.name, _dims(p.min), _dims(p.opt), _dims(p.max))
    if config.add_optimization_profile(profile) < 0:
        raise BuildFailure(
            logger.take_errors()
            or f"TensorRT refused the optimization profile {[(p.name, p.min, p.max) for p in ranges]}"
        )


def build_plan(
    onnx_bytes: bytes,
    profiles: Sequence[Sequence[InputProfile]],
    options: BuildOptions,
    timing_cache: bytes,
    *,
    typed: bool = False,
    path: str | None = None,
    name: str = "engine",
    timing_cache_file: Path | None = None,
) -> tuple[bytes, bytes]:
    """The serialized engine, and the timing cache updated with this build's kernel timings;
    `profiles`: per optimization profile, each input's range; `typed`: the ONNX holds types a 10.x
    network takes strongly typed only: bfloat16 (converters/passes/bfloat16.py: has_bfloat16), INT4
    weights or FP8 (onnx_types.has_int4/has_fp8); `path`: where the model was written, for a model
    whose weights are external data beside it; `name`: the engine's, in the progress log;
    `timing_cache_file`: the timing_cache file `timing_cache` came from, if it did."""
    major, _ = parse_version(trt.__version__)
    if options.weight_streaming:
        if major < 10:
            raise BuildFailure(f"weight streaming needs TensorRT 10.0 or newer, this is {trt.__version__}")
        typed = True  # TensorRT streams weights of strongly typed networks only
    logger = LOGGER
    logger.take_errors()  # what an earlier failure on this thread left behind is not this build's
    try:
        builder = trt.Builder(logger)
    except TypeError as e:  # a null builder (e.g. a runtime-only install without the builder library)
        raise BuildFailure(f"its Builder could not be created ({logger.take_errors() or e})") from e
    network = builder.create_network(network_flags(major, options.precision, typed))
    parser = trt.OnnxParser(network, logger)
    if not (parser.parse(onnx_bytes) if path is None else parser.parse(onnx_bytes, path)):
        raise _parse_failure(parser, onnx_bytes)

    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, options.workspace_bytes)
    config.builder_optimization_level = options.optimization_level
    # Layer names and details for the engine inspector (LoweredModule.profile), in every plan:
    # free at run time, and a saved engine can be profiled later (cache.FORMAT 5 on).
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    if options.precision == "fp16" and major < 10:  # 10.x/11.x: strongly typed, fp16 from the ONNX
        config.set_flag(trt.BuilderFlag.FP16)
        _pin_float32(network)
        config.set_flag(trt.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)
    strongly_typed = major >= 11 or major == 10 and (options.precision == "fp16" or typed)
    if not strongly_typed and has_quantization(onnx_bytes):
        # Q/DQ (explicit quantization) computes in int8 only with the INT8 flag on a weakly typed
        # network; strongly typed ones (and 11.x, which dropped the flag) take it from the Q/DQ.
        config.set_flag(trt.BuilderFlag.INT8)
    # TensorRT may run float32 matmuls and convolutions in TF32 (on by default from Ampere on):
    # float32 means float32 here, for fp32 engines and for the float32 islands of fp16 ones.
    config.clear_flag(trt.BuilderFlag.TF32)
    if options.refittable:
        config.set_flag(trt.BuilderFlag.REFIT)
    if options.weight_streaming:
        config.set_flag(trt.BuilderFlag.WEIGHT_STREAMING)
    if major < 10:
        # A profile serves one execution context at a time on 8.x unless shared (10.0's default);
        # the runtime makes one per thread and stream, and one per CUDA graph.
        config.set_preview_feature(trt.PreviewFeature.PROFILE_SHARING_0806, True)
    if options.tactic_sources is not None and not config.set_tactic_sources(_tactic_sources(options.tactic_sources)):
        raise ValueError(f"tactic_sources: TensorRT {trt.__version__} refused {options.tactic_sources}")
    _use_timing_cache(config, timing_cache, logger, timing_cache_file)
    progress = build_progress.monitor(name)  # held until the build returns: TensorRT only borrows it
    if progress is not None:
        config.progress_monitor = progress
    for ranges in profiles:
        _add_profile(builder, config, ranges, logger)

    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise BuildFailure(logger.take_errors() or "build_serialized_network returned no engine")
    return bytes(plan), bytes(config.get_timing_cache().serialize())
