"""The new weights of a tensor-parallel model, as its engines hold them: each rank's shard.

torch.export unwraps a DTensor weight `owner.name` into its plain parts, as parameters
`owner.parametrizations.name.original0`, ... (a DTensor's one tensor part is the rank's shard,
`to_local()`), and the lowered graph reads those. A new model's DTensors are unwrapped by the
same torch transform, after checking each is laid out as the lowered model's was: the same shard
shapes can hold another plan's slices (a square weight split by rows or by columns)."""

from __future__ import annotations

from typing import Mapping

from trt_lower.capture.dtensor import layout_mismatch, unwrapped
from trt_lower.refit.errors import WeightUpdateError


def local_shards(given: Mapping[str, object], layouts: Mapping[str, str]) -> dict[str, object]:
    """`given` (name -> new tensor) with each DTensor replaced by its parts (the rank's shard);
    WeightUpdateError naming the weight where its layout is not the one in `layouts` (the lowered
    model's, by name), a plain tensor included."""
    if (problem := layout_mismatch(given, layouts)) is not None:
        raise WeightUpdateError(problem)
    return unwrapped(given)
