"""The one error update_weights raises, for every refusal and every failed check."""

from __future__ import annotations

from converters.core.errors import TrtLowerError


class WeightUpdateError(TrtLowerError, ValueError):
    """New weights refused (a missing, unexpected or reshaped tensor, a DTensor sharded otherwise
    than the lowered model's, a graph that changes with them, an engine that cannot be refitted) or
    failing the check against eager: the module keeps its old weights."""
