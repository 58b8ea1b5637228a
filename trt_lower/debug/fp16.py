"""fp16_sensitive: the nodes that must stay float32 for an fp16 lowering to match eager."""

from __future__ import annotations

from typing import Any

import torch

from trt_lower.api import lower_to_trt
from trt_lower.debug.accuracy import check_accuracy
from trt_lower.debug.divergence import first_divergence
from trt_lower.values.call import Inputs, model_call


def fp16_sensitive(
    model: torch.nn.Module,
    inputs: Inputs,
    *,
    kwargs: dict[str, Any] | None = None,
    rtol: float,
    atol: float,
    max_rounds: int = 16,
    **lower_kwargs: Any,
) -> list[str]:
    """FX node names to pass as `lower_to_trt(..., precision="fp16", keep_fp32=...)` so that
    `check_accuracy(..., rtol, atol)` passes; [] when fp16 passes as it is.

    Greedy: lower in fp16, and while accuracy fails, keep float32 the node first_divergence
    blames (the first whose fp16 value departs from eager with its inputs right: an overflow,
    a cancellation), then lower again. Each round is one lowering and one divergence search.
    inputs, kwargs: the model's arguments, as lower_to_trt takes them; `lower_kwargs` go to
    lower_to_trt (backend, trt_version, ...).
    """
    args, kwargs = model_call(inputs, kwargs)
    if "precision" in lower_kwargs:
        raise ValueError("fp16_sensitive always lowers with precision='fp16'; drop the precision argument")
    keep = list(lower_kwargs.pop("keep_fp32", ()))
    # The search is this function's, at the caller's tolerance: build-time verification would keep
    # its own choice of nodes float32 (at its tolerance) and hide them from it.
    lower_kwargs.setdefault("verify", False)
    for _ in range(max_rounds):
        lowered = lower_to_trt(model, args, kwargs=kwargs, precision="fp16", keep_fp32=keep, **lower_kwargs)
        if check_accuracy(model, lowered, args, rtol=rtol, atol=atol, kwargs=kwargs):
            return keep
        divergence = first_divergence(model, lowered, args, kwargs=kwargs, rtol=rtol, atol=atol)
        new = [] if divergence is None else [n for n in divergence.nodes if n not in keep]
        if not new:
            raise RuntimeError(
                f"fp16 lowering fails rtol={rtol:g}, atol={atol:g} with {keep or 'no node'} kept float32, but no "
                "node departs from eager on its own (the error adds up across engines): loosen the tolerance, "
                "or keep whole op kinds float32 (keep_fp32=['aten.mm.default', ...])"
            )
        keep += new
    raise RuntimeError(f"fp16_sensitive: still failing after keeping {len(keep)} nodes float32 ({', '.join(keep)})")
