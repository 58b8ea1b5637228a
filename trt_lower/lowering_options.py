"""lower_to_trt's keyword options, checked once into the LoweringSettings every stage receives:
each bad value is one ValueError naming its option."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterable

import torch

from converters.core import target
from trt_lower.engine.builder_knobs import OPTIMIZATION_LEVELS, TACTIC_SOURCES
from trt_lower.engine.tensorrt import installed_target, installed_version
from trt_lower.values.collectives import COLLECTIVES, FIRST_RELEASE, refusal
from trt_lower.values.settings import BACKENDS, PRECISIONS, TRT_VERSIONS, LoweringSettings, is_op, op_name
from trt_lower.values.versions import parse_version

__all__ = ["BACKENDS", "PRECISIONS", "TRT_VERSIONS", "LoweringSettings", "create", "default_trt_version"]

# precision given as the dtype the engines compute in.
_DTYPE_PRECISIONS = {torch.float32: "fp32", torch.float16: "fp16"}
# A TensorRT release as tensorrt.__version__ writes it: "10.13", "10.13.0", "11.2.0.1".
_RELEASE = re.compile(r"\d+\.\d+(\.\d+){0,2}")


def default_trt_version() -> str:
    """The installed TensorRT's target, else 10.4 (the last TensorRT that runs on V100s)."""
    return installed_target() or target.DEFAULT


def precision_name(precision: Any) -> str:
    """ "fp32" or "fp16" from a name or a torch dtype; ValueError naming `precision` otherwise."""
    if isinstance(precision, torch.dtype) and precision in _DTYPE_PRECISIONS:
        return _DTYPE_PRECISIONS[precision]
    if isinstance(precision, str) and precision in PRECISIONS:
        return precision
    hint = (
        " (there is no bfloat16 rewrite: a bfloat16 model lowers as it is with precision='fp32')"
        if precision == torch.bfloat16
        else ""
    )
    raise ValueError(f"precision must be one of {PRECISIONS} or torch.float32/torch.float16, got {precision!r}{hint}")


def target_of(trt_version: Any) -> tuple[str, str]:
    """(target, release asked for) from a target's name ("10.4", "latest": release "") or a
    TensorRT release ("10.13", "11.2.0.1"), mapped to the target whose range holds it."""
    if trt_version is None:
        return default_trt_version(), ""
    if trt_version in TRT_VERSIONS:
        return trt_version, ""
    if isinstance(trt_version, str) and _RELEASE.fullmatch(trt_version):
        major, minor = parse_version(trt_version)
        if (major, minor) >= (8, 6):
            return target.for_installed(major, minor), trt_version
    raise ValueError(
        f"trt_version must be one of {TRT_VERSIONS}, a TensorRT release from 8.6 on (as tensorrt.__version__ "
        f"says, e.g. '10.13' or '11.2.0.1') or None (the installed TensorRT's), got {trt_version!r}"
    )


def op_names(option: str, ops: Any, node_names: bool = False) -> frozenset[str]:
    """The ops (or, with `node_names`, FX node names too) an option lists, as names; ValueError
    naming `option` and each entry that names no registered op."""
    names = [op_name(op) for op in ([ops] if isinstance(ops, str) else ops)]
    unknown = [n for n in names if not is_op(n) and not (node_names and not n.startswith("aten."))]
    if unknown:
        raise ValueError(
            f"{option} names no registered op: {', '.join(map(repr, unknown))} (give OpOverloads or packets such "
            "as torch.ops.aten.relu.default, or their names: 'aten.relu.default', 'aten.relu')"
        )
    return frozenset(names)


def optimization_level_of(level: Any) -> int | None:
    if level is None or isinstance(level, int) and not isinstance(level, bool) and level in OPTIMIZATION_LEVELS:
        return level
    raise ValueError(
        f"optimization_level must be an int from {OPTIMIZATION_LEVELS[0]} to {OPTIMIZATION_LEVELS[-1]} "
        f"or None (TensorRT's default, 3), got {level!r}"
    )


def workspace_of(size: Any) -> int | None:
    if size is None or isinstance(size, int) and not isinstance(size, bool) and size > 0:
        return size
    raise ValueError(f"workspace_bytes must be a positive int (bytes) or None (4 GiB), got {size!r}")


def tactic_sources_of(sources: Any) -> frozenset[str] | None:
    """The tactic source names given (an empty set: none but TensorRT's own kernels); ValueError
    naming tactic_sources and each name that is no TensorRT tactic source."""
    if sources is None:
        return None
    if isinstance(sources, str) or not hasattr(sources, "__iter__"):
        raise ValueError(f"tactic_sources must be a set of names such as {{'cublas', 'cudnn'}}, got {sources!r}")
    names = frozenset(sources)
    unknown = sorted(map(repr, names - TACTIC_SOURCES.keys()))
    if unknown:
        raise ValueError(
            f"tactic_sources names no TensorRT tactic source: {', '.join(unknown)} (known: {', '.join(TACTIC_SOURCES)})"
        )
    return names


def timing_cache_of(path: Any) -> Path | None:
    if path is None:
        return None
    if not isinstance(path, (str, os.PathLike)) or str(path) == "":
        raise ValueError(f"timing_cache must be a file path or None, got {path!r}")
    return Path(path).expanduser()


def refuse_performance_tuner(performance_tuner: Any) -> None:
    """TensorRT 11.1's Global Performance Tuner: its Python API (build routes, and the accuracy
    bound of its verification) is not pinned down by NVIDIA's public documentation, so trt_lower
    refuses it on every TensorRT version rather than guess at it (docs/build-options.md)."""
    if performance_tuner is not False:
        raise ValueError(
            f"performance_tuner={performance_tuner!r}: trt_lower does not drive TensorRT's Global Performance "
            "Tuner on any TensorRT version yet (11.1 has it, through trtexec); leave it False"
        )


def collectives_of(collectives: Any, backend: str, trt_target: str, release: str) -> str:
    """Where collectives run; ValueError naming `collectives` for another value, and
    InEngineCollectivesError for "engine" on ONNX Runtime or on a TensorRT older than 11.0: the
    release given as trt_version, else the installed TensorRT's where it is of the target (the
    target "latest" alone also stands for 10.15-10.x, which have no DistCollective layer)."""
    if collectives not in COLLECTIVES:
        raise ValueError(f"collectives must be one of {COLLECTIVES}, got {collectives!r}")
    if collectives == "eager":
        return "eager"
    check_collectives_backend(collectives, backend)
    installed = installed_version()
    version = release or (installed if installed is not None and installed_target() == trt_target else None)
    if version is None or parse_version(version) < FIRST_RELEASE:
        if trt_target != "latest":
            given = f"target {trt_target!r}, older than 11.0"
        elif version is None:
            given = "target 'latest' without a release (it also stands for 10.15-10.x)"
        else:
            given = f"TensorRT {version}"
        raise refusal(
            f"needs TensorRT {FIRST_RELEASE[0]}.{FIRST_RELEASE[1]} or newer (its DistCollective layer), and the "
            f"engines are lowered for {given}; give trt_version='11.0' or newer"
        )
    return "engine"


def check_collectives_backend(collectives: str, backend: str) -> None:
    """InEngineCollectivesError for collectives="engine" on a backend other than TensorRT (only
    TensorRT's engines run collectives; ONNX Runtime's run them between engines), or on an
    installed TensorRT older than 11.0, which could not build what was lowered for 11. `backend`:
    as given, or as "auto" resolved."""
    if collectives != "engine":
        return
    if backend not in ("tensorrt", "auto"):
        raise refusal(
            f"runs on the tensorrt backend only (TensorRT's DistCollective layers), and the backend is {backend!r}; "
            "leave collectives='eager' there (collectives run between the engines)"
        )
    installed = installed_version()
    if backend == "tensorrt" and installed is not None and parse_version(installed) < FIRST_RELEASE:
        raise refusal(
            f"needs TensorRT {FIRST_RELEASE[0]}.{FIRST_RELEASE[1]} or newer to build its engines (its DistCollective "
            f"layer), and the installed TensorRT is {installed}"
        )


def create(
    *,
    backend: str,
    precision: Any,
    min_block_size: int,
    fallback_ops: Iterable[Any],
    require_full: bool,
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
) -> LoweringSettings:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    precision = precision_name(precision)
    if not isinstance(min_block_size, int) or min_block_size < 1:
        raise ValueError(f"min_block_size must be a positive int, got {min_block_size!r}")
    if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike)):
        raise ValueError(f"cache_dir must be a path or None, got {type(cache_dir).__name__}")
    flags = {"require_full": require_full, "cuda_graphs": cuda_graphs, "refittable": refittable}
    for name, flag in {**flags, "weight_streaming": weight_streaming}.items():
        if not isinstance(flag, bool):
            raise ValueError(f"{name} must be True or False, got {flag!r}")
    trt_target, release = target_of(trt_version)
    if weight_streaming and trt_target == "8.6":
        raise ValueError(
            "weight_streaming=True needs TensorRT 10.0 or newer (BuilderFlag.WEIGHT_STREAMING, on a strongly "
            f"typed network), and trt_version={trt_version!r} is TensorRT 8.6, which has neither"
        )
    keep = op_names("keep_fp32", keep_fp32, node_names=True)  # node names are checked against the graph later
    if keep and precision != "fp16":
        raise ValueError(f"keep_fp32 applies to precision='fp16' only, got precision={precision!r}")
    refuse_performance_tuner(performance_tuner)
    return LoweringSettings(
        backend=backend,
        precision=precision,
        min_block_size=min_block_size,
        fallback_ops=op_names("fallback_ops", fallback_ops),
        require_full=require_full,
        cache_dir=None if cache_dir is None else Path(cache_dir).expanduser(),
        cuda_graphs=cuda_graphs,
        trt_version=trt_target,
        trt_release=release,
        keep_fp32=keep,
        refittable=refittable,
        optimization_level=optimization_level_of(optimization_level),
        workspace_bytes=workspace_of(workspace_bytes),
        tactic_sources=tactic_sources_of(tactic_sources),
        timing_cache=timing_cache_of(timing_cache),
        weight_streaming=weight_streaming,
        collectives=collectives_of(collectives, backend, trt_target, release),
    )


# The builder knobs ONNX Runtime has no use for, as the settings name them.
_BUILDER_KNOBS = ("optimization_level", "workspace_bytes", "tactic_sources", "timing_cache")


def ignored_on_onnxruntime(settings: LoweringSettings) -> list[str]:
    """The TensorRT-only options `settings` sets, as `name=value` (ONNX Runtime ignores them, with a warning)."""
    given = [f"{name}={getattr(settings, name)!r}" for name in _BUILDER_KNOBS if getattr(settings, name) is not None]
    flags = [f"{name}=True" for name in ("cuda_graphs", "weight_streaming") if getattr(settings, name)]
    return flags + given
