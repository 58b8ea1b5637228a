"""One output against its eager value: max abs/rel error and whether it is within tolerance, or
the mismatch (dtype, shape, not a tensor) that makes the values incomparable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class OutputError:
    path: str
    max_abs: float
    max_rel: float
    passed: bool
    # Why the values cannot be compared ("dtype float16, eager float32"); "" when they can.
    mismatch: str = ""

    def __str__(self) -> str:
        if self.mismatch:
            return f"output{self.path}: {self.mismatch}"
        return f"output{self.path}: max abs err {self.max_abs:.3g}, max rel err {self.max_rel:.3g}"


def _mismatch(expected: torch.Tensor, actual: Any) -> str:
    if not isinstance(actual, torch.Tensor):
        return f"{type(actual).__name__}, eager a tensor"
    if expected.dtype != actual.dtype:
        return f"dtype mismatch: {_dtype(actual.dtype)}, eager {_dtype(expected.dtype)}"
    if expected.shape != actual.shape:
        return f"shape mismatch: {tuple(actual.shape)}, eager {tuple(expected.shape)}"
    return ""


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def compare(path: str, expected: torch.Tensor, actual: Any, rtol: float, atol: float) -> OutputError:
    mismatch = _mismatch(expected, actual)
    if mismatch:
        return OutputError(path, float("inf"), float("inf"), False, mismatch)
    if expected.numel() == 0:
        return OutputError(path, 0.0, 0.0, True)
    e, a = expected.detach().double().cpu(), actual.detach().double().cpu()
    diff = (e - a).abs()
    both_nan = e.isnan() & a.isnan()
    diff = torch.where(both_nan | (e == a), torch.zeros_like(diff), diff)
    rel = diff / e.abs().clamp_min(torch.finfo(torch.float64).tiny)
    passed = bool((diff <= atol + rtol * e.abs()).all())
    return OutputError(path, float(diff.max()), float(rel.max()), passed)
