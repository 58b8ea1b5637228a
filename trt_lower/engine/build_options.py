"""What a TensorRT engine is built from besides its ONNX: input profiles and builder options.

Plain data, importable without TensorRT: the cache key hashes it, the builder applies it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from trt_lower.values.settings import PRECISIONS


@dataclass(frozen=True)
class InputProfile:
    """The shape range one engine input accepts (one optimization profile entry)."""

    name: str
    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]


@dataclass(frozen=True)
class BuildOptions:
    precision: str = "fp32"
    # Scratch memory TensorRT's tactics may use; tactics needing more are skipped.
    workspace_bytes: int = 4 << 30
    # TensorRT's own default: higher levels search longer for faster kernels.
    optimization_level: int = 3
    # BuilderFlag.REFIT: every weight can be replaced after the build (engine/trt_refit.py).
    refittable: bool = False
    # BuilderFlag.WEIGHT_STREAMING (10.0 on, strongly typed networks): weights streamed from host memory.
    weight_streaming: bool = False

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
