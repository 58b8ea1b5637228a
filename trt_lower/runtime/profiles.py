"""Which optimization profile of an engine a call runs on: the rule the TensorRT and ONNX Runtime
engine modules share."""

from __future__ import annotations

import math
from typing import Sequence

from trt_lower.values.signature import EngineInputError, ShapeRange, TensorSig, describe_profiles

Shapes = tuple[tuple[int, ...], ...]
# Choices remembered per engine: enough for every batch size of a served model, bounded for
# models whose many dynamic dims make distinct shapes countless.
_REMEMBERED = 4096


def _holds(profile: Sequence[ShapeRange], shapes: Shapes) -> bool:
    return all(
        len(shape) == len(low) and all(lo <= d <= hi for d, lo, hi in zip(shape, low, high))
        for shape, (low, _, high) in zip(shapes, profile)
    )


def _fit(profile: Sequence[ShapeRange], shapes: Shapes) -> tuple[int, int]:
    """How loosely a profile holds the shapes: the number of shapes it spans (the product of its
    dims' range widths), then the distance from the shapes to its opt (what its tactics were
    timed for)."""
    volume = math.prod(hi - lo + 1 for low, _, high in profile for lo, hi in zip(low, high))
    distance = sum(abs(d - o) for shape, (_, opt, _) in zip(shapes, profile) for d, o in zip(shape, opt))
    return volume, distance


class ProfileChoice:
    """The profile each call's input shapes run on: of those that hold them, the tightest (fewest
    shapes spanned), ties to the one whose opt is nearest; remembered per shapes.

    A call whose shapes fit no profile (each input inside the engine's overall range, but no
    profile holding them all) is an EngineInputError (a ValueError) naming the inputs and every
    profile's ranges."""

    def __init__(self, where: str, sigs: Sequence[TensorSig]) -> None:
        self.where = where
        self.sigs = tuple(sigs)
        # Per profile, each input's (min, opt, max).
        self.profiles = tuple(zip(*(s.ranges for s in sigs))) or ((),)
        self._chosen: dict[Shapes, int] = {}

    @property
    def several(self) -> bool:
        return len(self.profiles) > 1

    def __call__(self, shapes: Shapes) -> int:
        index = self._chosen.get(shapes)
        if index is None:
            holding = [k for k, p in enumerate(self.profiles) if _holds(p, shapes)]
            if not holding:
                raise self._refusal(shapes)
            index = min(holding, key=lambda k: _fit(self.profiles[k], shapes))
            if len(self._chosen) < _REMEMBERED:
                self._chosen[shapes] = index
        return index

    def _refusal(self, shapes: Shapes) -> EngineInputError:
        got = ", ".join(f"'{s.source}' {tuple(shape)}" for s, shape in zip(self.sigs, shapes) if not s.is_static)
        ranges = "; ".join(f"profile {k}: {text}" for k, text in enumerate(describe_profiles(self.sigs)))
        return EngineInputError(
            f"{self.where}input {got} fits none of its optimization profiles ({ranges}); call it with shapes "
            "inside one, or lower the model again with a profile for these (lower_to_trt(profiles=...))"
        )
