"""assert_lowered_close: the accuracy check for CI, failing with the node that caused it."""

from __future__ import annotations

import warnings
from typing import Any

import torch

from converters.core.errors import TrtLowerError
from trt_lower.api import lower_to_trt
from trt_lower.debug.accuracy import AccuracyResult, check_accuracy
from trt_lower.stitch.lowered import LoweredModule
from trt_lower.values.call import Inputs


class LoweredMismatch(TrtLowerError, AssertionError):
    """assert_lowered_close failed; `result` holds the errors per output and the divergence."""

    def __init__(self, message: str, result: AccuracyResult) -> None:
        super().__init__(message)
        self.result = result


def assert_lowered_close(
    model: torch.nn.Module,
    lowered: LoweredModule | None | Inputs,
    /,
    inputs: Inputs | None = None,
    *,
    kwargs: dict[str, Any] | None = None,
    rtol: float,
    atol: float,
    **lower_kwargs: Any,
) -> LoweredModule:
    """Compare every output of `lowered` with eager PyTorch's for `model(*inputs, **kwargs)` (the
    arguments as check_accuracy and lower_to_trt take them); `lowered=None`: lower `model` here,
    with `lower_kwargs` as lower_to_trt's options.

    Raises AssertionError (LoweredMismatch) naming each failing output with its max abs/rel error,
    or its dtype or shape mismatch, and, computed only then, the first diverging node
    (trt_lower.debug.first_divergence). Returns the lowered module.

    The former order `assert_lowered_close(model, inputs, lowered=...)` still works, with a
    DeprecationWarning, until the next release.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this helper's
    lowered, inputs = _new_order(lowered, inputs, lower_kwargs)
    if lowered is None:
        lowered = lower_to_trt(model, inputs, kwargs=kwargs, **lower_kwargs)
    elif lower_kwargs:
        raise ValueError(f"lower_to_trt options {sorted(lower_kwargs)} given with an already lowered module")
    result = check_accuracy(model, lowered, inputs, rtol=rtol, atol=atol, details=True, kwargs=kwargs)
    if not result.passed:
        failing = ", ".join(
            f"output{o.path}" + (f" ({o.mismatch})" if o.mismatch else "") for o in result.outputs if not o.passed
        )
        numeric = any(not o.passed and not o.mismatch for o in result.outputs)
        found = (
            "\nfirst divergence: none (every engine matches eager when fed eager inputs; the error adds up "
            "across engines or comes from eager nodes)"
            if numeric and result.divergence is None
            else ""
        )
        raise LoweredMismatch(f"lowered model differs from eager PyTorch in {failing}\n{result}{found}", result)
    return lowered


def _new_order(
    lowered: LoweredModule | None | Inputs, inputs: Inputs | None, lower_kwargs: dict[str, Any]
) -> tuple[LoweredModule | None, Inputs]:
    """(lowered, inputs) from a call in either order: the former `(model, inputs, lowered=...)`
    warns."""
    if "lowered" in lower_kwargs or (inputs is None and not (lowered is None or isinstance(lowered, torch.nn.Module))):
        warnings.warn(
            "assert_lowered_close(model, inputs, lowered=...) is deprecated: call "
            "assert_lowered_close(model, lowered, inputs) (lowered=None to lower here), the order of "
            "check_accuracy and benchmark",
            DeprecationWarning,
            stacklevel=3,
        )
        return lower_kwargs.pop("lowered", None), lowered  # type: ignore[return-value]
    if inputs is None:
        raise ValueError("assert_lowered_close needs inputs: assert_lowered_close(model, lowered, inputs)")
    return lowered, inputs  # type: ignore[return-value]
