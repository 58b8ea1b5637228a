"""What a TensorRT engine is built from besides its ONNX: input profiles and builder options.

Plain data, importable without TensorRT: the cache key hashes it, the builder applies it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

from trt_lower.values.settings import PRECISIONS, LoweringSettings
from trt_lower.values.signature import TensorSig


@dataclass(frozen=True)
class InputProfile:
    """The shape range one engine input accepts (one optimization profile entry)."""

    name: str
    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]


def input_profiles(inputs: Sequence[TensorSig]) -> list[list[InputProfile]]:
    """The engine's optimization profiles: per profile, each input's range in it."""
    per_input = [[InputProfile(s.name, *r) for r in s.ranges] for s in inputs]
    return [list(profile) for profile in zip(*per_input)] or [[]]


@dataclass(frozen=True)
class BuildOptions:
    precision: str = "fp32"
    # Scratch memory TensorRT's tactics may use; tactics needing more are skipped.
    workspace_bytes: int = 4 << 30
    # TensorRT's own default: higher levels search longer for faster kernels.
    optimization_level: int = 3
    # BuilderFlag.REFIT: every weight can be replaced after the build (engine/trt_refit.py).
    refittable: bool = False
    # trt.TacticSource names (engine/builder_knobs.py), sorted; None: TensorRT's default set.
    tactic_sources: tuple[str, ...] | None = None
    # BuilderFlag.WEIGHT_STREAMING (10.0 on, strongly typed networks): weights streamed from host memory.
    weight_streaming: bool = False

    @classmethod
    def of(cls, settings: LoweringSettings) -> BuildOptions:
        """The options `settings`' engines are built with: the knobs it sets, these defaults for the rest."""
        default = cls()
        level, workspace = settings.optimization_level, settings.workspace_bytes
        return cls(
            precision=settings.precision,
            workspace_bytes=default.workspace_bytes if workspace is None else workspace,
            optimization_level=default.optimization_level if level is None else level,
            refittable=settings.refittable,
            tactic_sources=None if settings.tactic_sources is None else tuple(sorted(settings.tactic_sources)),
            weight_streaming=settings.weight_streaming,
        )

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")

    def as_dict(self) -> dict[str, Any]:
        """The options as the cache key hashes them; an option left unset (None) is left out, so
        that the keys of engines built without it stay what they were before it existed."""
        return {k: v for k, v in asdict(self).items() if v is not None}
