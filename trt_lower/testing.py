"""assert_lowered_close: the accuracy check for CI, failing with the node that caused it."""

from __future__ import annotations

from typing import Any, Sequence

import torch

from converters.core.errors import TrtLowerError
from trt_lower.api import lower_to_trt
from trt_lower.debug.accuracy import AccuracyResult, check_accuracy
from trt_lower.stitch.lowered import LoweredModule


class LoweredMismatch(TrtLowerError, AssertionError):
    """assert_lowered_close failed; `result` holds the errors per output and the divergence."""

    def __init__(self, message: str, result: AccuracyResult) -> None:
        super().__init__(message)
        self.result = result


def assert_lowered_close(
    model: torch.nn.Module,
    inputs: Sequence[torch.Tensor],
    *,
    rtol: float,
    atol: float,
    lowered: LoweredModule | None = None,
    **lower_kwargs: Any,
) -> LoweredModule:
    """Lower `model` (unless `lowered` is given) and compare every output with eager PyTorch.

    Raises AssertionError (LoweredMismatch) naming each failing output with its max abs/rel error and, computed
    only then, the first diverging node (trt_lower.debug.first_divergence). Returns the lowered
    module.
    """
    if lowered is None:
        lowered = lower_to_trt(model, inputs, **lower_kwargs)
    elif lower_kwargs:
        raise ValueError(f"lower_to_trt options {sorted(lower_kwargs)} given with an already lowered module")
    result = check_accuracy(model, lowered, inputs, rtol=rtol, atol=atol, details=True)
    if not result.passed:
        failing = ", ".join(f"output{o.path}" for o in result.outputs if not o.passed)
        found = (
            ""
            if result.divergence is not None
            else (
                "\nfirst divergence: none (every engine matches eager when fed eager inputs; the error adds up "
                "across engines or comes from eager nodes)"
            )
        )
        raise LoweredMismatch(f"lowered model differs from eager PyTorch in {failing}\n{result}{found}", result)
    return lowered
