"""lower_to_trt: the one call users make."""
from __future__ import annotations

import logging
import os
import time
from typing import Any, Iterable, Sequence

import torch

from converters.core import target
from converters.core.interpreter import ConversionError
from converters.core.target import Target
from splitter import ConverterSupport, split
from trt_lower import capture
from trt_lower.engine import tensorrt as trt_engine
from trt_lower.engine.errors import EngineBuildError
from trt_lower.lowered import LoweredModule, stitch
from trt_lower.settings import LoweringSettings, installed_tensorrt
from trt_lower.spec import TensorSpec

log = logging.getLogger("trt_lower")


class UnsupportedOpsError(RuntimeError):
    """require_full=True and some nodes cannot run inside an engine."""


def _resolve_backend(backend: str) -> str:
    if backend == "onnxruntime":
        return backend
    reason = trt_engine.unavailable_reason()
    if reason is None:
        return "tensorrt"
    if backend == "tensorrt":
        raise RuntimeError(f"backend='tensorrt' cannot run here: {reason}")
    log.warning("trt_lower: TensorRT is not usable (%s); running engines on ONNX Runtime", reason)
    return "onnxruntime"


def _check_target(trt_version: str) -> None:
    """Engines built here must parse with the TensorRT installed here: no newer target."""
    installed = installed_tensorrt()
    if installed is not None and not target.Target(target.for_installed(installed)).at_least(trt_version):
        raise ValueError(f"trt_version={trt_version!r} is newer than the installed TensorRT {installed}: "
                         f"its ONNX parser may reject what that version allows; use "
                         f"trt_version={target.for_installed(installed)!r} (or leave it unset)")


def lower_to_trt(
    model: torch.nn.Module,
    inputs: Sequence[torch.Tensor],
    *,
    backend: str = "auto",
    precision: str = "fp32",
    min_block_size: int = 3,
    fallback_ops: Iterable[Any] = (),
    require_full: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
    cuda_graphs: bool = False,
    trt_version: str | None = None,
) -> LoweredModule:
    """Lower `model` for `inputs`: TensorRT-capable regions become engines, the rest stays eager.

    backend: "tensorrt", "onnxruntime", or "auto" (TensorRT when usable, else ONNX Runtime).
    fallback_ops: ATen ops (OpOverload, packet or name like "aten.relu.default") kept in eager.
    require_full: raise UnsupportedOpsError listing every unsupported node instead of falling back.
    cache_dir: where TensorRT engines are cached (default $TRT_LOWER_CACHE_DIR, else ~/.cache/trt_lower).
    cuda_graphs: replay TensorRT engines from CUDA graphs (static shapes; ignored on ONNX Runtime).
    precision: "fp32", or "fp16" (fp16 engines, with softmax/normalizations/reductions/exp/log/pow
        kept fp32 inside; inputs and outputs keep their dtypes).
    trt_version: the TensorRT whose ONNX parser limits the converters respect: "8.6", "10.4" or
        "latest" (10.12+, 11.x). Default: the installed TensorRT's, else "10.4" (last with V100).
    """
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    settings = LoweringSettings.create(
        backend=backend, precision=precision, min_block_size=min_block_size,
        fallback_ops=fallback_ops, require_full=require_full, cache_dir=cache_dir, cuda_graphs=cuda_graphs,
        trt_version=trt_version,
    )
    specs = capture.check_inputs(model, inputs)
    resolved = _resolve_backend(settings.backend)
    if resolved == "tensorrt":
        _check_target(settings.trt_version)
    start = time.perf_counter()
    program = capture.export(model, capture.example_inputs(specs, inputs), specs)
    captured = time.perf_counter()

    lowered = _split_and_convert(program, specs, settings, resolved)
    session = lowered.report.timings.get("session", 0.0)  # stitch timed the engine builds
    lowered.report.timings = {
        "capture": captured - start,
        "convert": time.perf_counter() - captured - session,
        "session": session,
    }
    return lowered


def _split_and_convert(program: torch.export.ExportedProgram, specs: Sequence[TensorSpec],
                       settings: LoweringSettings, resolved: str) -> LoweredModule:
    """Split into engine segments and convert them, retrying with a node kept eager whenever a
    converter or TensorRT fails on it."""
    failed: dict[str, str] = {}
    while True:
        parts = split(capture.graph_module(program), ConverterSupport(Target(settings.trt_version), settings.fallback_ops, failed),
                      settings.min_block_size)
        if settings.require_full and parts.fallbacks:
            listing = "\n".join(f"  {n.name} ({n.target}): {r}" for n, r in parts.fallbacks.items())
            raise UnsupportedOpsError(
                f"require_full=True but {len(parts.fallbacks)} node(s) cannot run in an engine:\n{listing}"
            )
        try:
            lowered = stitch(parts, resolved, settings, specs)
        except ConversionError as e:
            if settings.require_full:
                raise
            # A converter bug must not cost the user their model: keep that node eager, retry.
            log.warning("trt_lower: %s; running it in eager PyTorch", e)
            failed[e.node_name] = e.reason
            continue
        except EngineBuildError as e:
            if settings.require_full:
                raise
            # Same for a segment TensorRT cannot build: its nodes (or the one it names) go eager.
            which = f"node {next(iter(e.nodes))}" if len(e.nodes) == 1 else f"its {len(e.nodes)} nodes"
            log.warning("trt_lower: %s; running %s in eager PyTorch", e, which)
            failed.update(e.nodes)
            continue
        return lowered
