"""User-facing lowering options, validated once."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import torch

from converters.core import target
from trt_lower.engine.build_settings import PRECISIONS as PRECISIONS  # the one list; the CLI's too
from trt_lower.engine.tensorrt import installed_version

BACKENDS = ("auto", "tensorrt", "onnxruntime")
TRT_VERSIONS = target.VERSIONS


def _op_name(op: Any) -> str:
    """'aten.relu.default' for an OpOverload, 'aten.relu' for a packet, strings as given."""
    if isinstance(op, str):
        return op.removeprefix("torch.ops.")
    name = str(op)
    if not name.startswith("aten.") and hasattr(op, "_schema"):
        name = f"aten.{op._schema.name.split('::')[-1]}"
    return name


def fp32_nodes(graph: torch.fx.Graph, keep_fp32: frozenset[str]) -> frozenset[str]:
    """The nodes of `graph` that a keep_fp32 setting names, by node name or by op."""
    return frozenset(n.name for n in graph.nodes if n.op == "call_function" and (
        n.name in keep_fp32 or _op_name(n.target) in keep_fp32
        or _op_name(getattr(n.target, "overloadpacket", "")) in keep_fp32))


def default_trt_version() -> str:
    """The installed TensorRT's target, else 10.4 (the last TensorRT that runs on V100s)."""
    installed = installed_version()
    return target.DEFAULT if installed is None else target.for_installed(installed)


@dataclass(frozen=True)
class LoweringSettings:
    backend: str = "auto"
    precision: str = "fp32"
    min_block_size: int = 3
    fallback_ops: frozenset[str] = frozenset()
    require_full: bool = False
    # TensorRT engine cache directory; None: $TRT_LOWER_CACHE_DIR, else the user's cache dir.
    cache_dir: Path | None = None
    # Replay each TensorRT engine from a CUDA graph (static shapes).
    cuda_graphs: bool = False
    # What the converters may emit: the TensorRT version's ONNX parser limits (converters/core/target.py).
    trt_version: str = target.DEFAULT
    # precision="fp16": FX node names and ATen ops whose ONNX stays float32 (debug.fp16_sensitive).
    keep_fp32: frozenset[str] = frozenset()

    @classmethod
    def create(cls, *, backend: str, precision: str, min_block_size: int, fallback_ops: Iterable[Any],
               require_full: bool, cache_dir: str | os.PathLike[str] | None = None,
               cuda_graphs: bool = False, trt_version: str | None = None,
               keep_fp32: Iterable[Any] = ()) -> "LoweringSettings":
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
        if trt_version is not None and trt_version not in TRT_VERSIONS:
            raise ValueError(f"trt_version must be one of {TRT_VERSIONS} or None (the installed TensorRT's), "
                             f"got {trt_version!r}")
        if isinstance(fallback_ops, str):
            fallback_ops = [fallback_ops]
        keep = frozenset(_op_name(op) for op in ([keep_fp32] if isinstance(keep_fp32, str) else keep_fp32))
        if keep and precision != "fp16":
            raise ValueError(f"keep_fp32 applies to precision='fp16' only, got precision={precision!r}")
        return cls(backend, precision, min_block_size, frozenset(_op_name(op) for op in fallback_ops), require_full,
                   None if cache_dir is None else Path(cache_dir).expanduser(), cuda_graphs,
                   default_trt_version() if trt_version is None else trt_version, keep)

    def check_keep_fp32(self, graph: torch.fx.Graph) -> None:
        """ValueError naming each keep_fp32 entry that is neither an op nor a node of `graph`."""
        names = {n.name for n in graph.nodes}
        unknown = sorted(k for k in self.keep_fp32 if not k.startswith("aten.") and k not in names)
        if unknown:
            raise ValueError(f"keep_fp32 names no node of the captured graph: {', '.join(unknown)} "
                             "(give FX node names, as first_divergence/fp16_sensitive report them, or ops like "
                             "'aten.mul.Tensor')")
