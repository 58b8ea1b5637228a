"""lowered.weight_streaming_budget: how many bytes of each engine's streamable weights stay on the
GPU (docs/weight-streaming.md), from the budget a user gives for the whole module."""

from __future__ import annotations

import math
from typing import Sequence

from converters.core.errors import TrtLowerError

# What a user may give: bytes for the whole module (an int), a fraction of each engine's
# streamable weights (a float from 0.0 to 1.0), or "auto" (TensorRT's automatic budget).
Budget = int | float | str


class WeightStreamingError(TrtLowerError, ValueError):
    """A weight streaming budget refused: not a budget, set on a module without streamable
    weights, or refused by TensorRT (below 10.0's minimum, say)."""


def none_streams() -> WeightStreamingError:
    return WeightStreamingError(
        "weight_streaming_budget: no engine of this module has streamable weights (lower it with "
        "lower_to_trt(..., weight_streaming=True) on TensorRT 10.0 or newer)"
    )


def engine_budgets(budget: Budget, sizes: Sequence[int]) -> list[int | None]:
    """Each engine's budget in bytes (None: TensorRT's automatic budget), for engines with
    `sizes` bytes of streamable weights (each > 0): a byte budget is shared in proportion to them."""
    if budget == "auto":
        return [None] * len(sizes)
    if isinstance(budget, float) and 0.0 <= budget <= 1.0:
        return [math.floor(size * budget) for size in sizes]
    if isinstance(budget, int) and not isinstance(budget, bool) and budget >= 0:
        total = sum(sizes)
        return [min(size, budget * size // total) for size in sizes]
    raise WeightStreamingError(
        "weight_streaming_budget must be bytes (an int >= 0), a fraction of the streamable weights "
        f"(a float from 0.0 to 1.0) or 'auto', got {budget!r}"
    )
