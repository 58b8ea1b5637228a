"""lower_to_trt's keyword options, checked once into the LoweringSettings every stage receives:
each bad value is one ValueError naming its option."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterable

import torch

from converters.core import target
from trt_lower.engine.tensorrt import installed_target
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
    weight_streaming: bool = False,
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
        weight_streaming=weight_streaming,
    )
