"""One output tensor against its eager value: max abs/rel error and whether it is within tolerance."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class OutputError:
    path: str
    max_abs: float
    max_rel: float
    passed: bool


def compare(path: str, expected: torch.Tensor, actual: torch.Tensor, rtol: float, atol: float) -> OutputError:
    if expected.shape != actual.shape or expected.dtype != actual.dtype:
        return OutputError(path, float("inf"), float("inf"), False)
    if expected.numel() == 0:
        return OutputError(path, 0.0, 0.0, True)
    e, a = expected.detach().double().cpu(), actual.detach().double().cpu()
    diff = (e - a).abs()
    both_nan = e.isnan() & a.isnan()
    diff = torch.where(both_nan | (e == a), torch.zeros_like(diff), diff)
    rel = diff / e.abs().clamp_min(torch.finfo(torch.float64).tiny)
    passed = bool((diff <= atol + rtol * e.abs()).all())
    return OutputError(path, float(diff.max()), float(rel.max()), passed)
