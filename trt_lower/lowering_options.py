"""lower_to_trt's keyword options, checked once into the LoweringSettings every stage receives."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

from converters.core import target
from trt_lower.engine.tensorrt import installed_target
from trt_lower.values.settings import BACKENDS, PRECISIONS, TRT_VERSIONS, LoweringSettings, op_name

__all__ = ["BACKENDS", "PRECISIONS", "TRT_VERSIONS", "LoweringSettings", "create", "default_trt_version"]


def default_trt_version() -> str:
    """The installed TensorRT's target, else 10.4 (the last TensorRT that runs on V100s)."""
    return installed_target() or target.DEFAULT


def create(
    *,
    backend: str,
    precision: str,
    min_block_size: int,
    fallback_ops: Iterable[Any],
    require_full: bool,
    cache_dir: str | os.PathLike[str] | None = None,
    cuda_graphs: bool = False,
    trt_version: str | None = None,
    keep_fp32: Iterable[Any] = (),
    refittable: bool = False,
) -> LoweringSettings:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if not isinstance(min_block_size, int) or min_block_size < 1:
        raise ValueError(f"min_block_size must be a positive int, got {min_block_size!r}")
    if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike)):
        raise ValueError(f"cache_dir must be a path or None, got {type(cache_dir).__name__}")
    if not isinstance(cuda_graphs, bool):
        raise ValueError(f"cuda_graphs must be True or False, got {cuda_graphs!r}")
    if not isinstance(refittable, bool):
        raise ValueError(f"refittable must be True or False, got {refittable!r}")
    if trt_version is not None and trt_version not in TRT_VERSIONS:
        raise ValueError(
            f"trt_version must be one of {TRT_VERSIONS} or None (the installed TensorRT's), got {trt_version!r}"
        )
    if isinstance(fallback_ops, str):
        fallback_ops = [fallback_ops]
    keep = frozenset(op_name(op) for op in ([keep_fp32] if isinstance(keep_fp32, str) else keep_fp32))
    if keep and precision != "fp16":
        raise ValueError(f"keep_fp32 applies to precision='fp16' only, got precision={precision!r}")
    return LoweringSettings(
        backend,
        precision,
        min_block_size,
        frozenset(op_name(op) for op in fallback_ops),
        require_full,
        None if cache_dir is None else Path(cache_dir).expanduser(),
        cuda_graphs,
        default_trt_version() if trt_version is None else trt_version,
        keep,
        refittable,
    )
