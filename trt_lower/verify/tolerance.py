"""How far an engine's output may be from eager PyTorch's before it counts as a miscompile: a
fraction of the output's scale (its largest finite magnitude) that follows the engine's
precision, measured on bench/bench_verify.py's model zoo so that correct engines pass.

Verification looks for wrong engines, not for rounding: errors are measured against the scale of
the whole output, so an output near zero where others are large is not flagged for the rounding
the large ones carry. TensorRT computes float32 convolutions and matrix products in TF32 on
Ampere and newer GPUs (10 mantissa bits), which the float32 figure allows for.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# Share of the output's scale, by what the engine computes in (bench/README.md, "verify").
SCALE_SHARE = {"fp32": 1e-2, "fp16": 5e-2, "bf16": 1e-1}
# Integer and boolean outputs (argmax, comparisons): the share of elements that may differ, since
# a near tie decides the other way under any rounding.
MISMATCH_SHARE = {"fp32": 1e-2, "fp16": 5e-2, "bf16": 5e-2}
# int8 engines: this many quantization steps of a symmetric int8 tensor of the output's scale
# (scale / 127 each) on top: a rounding that lands one code over propagates.
INT8_STEPS = 4
# FP8 (E4M3) engines: this many steps of FP8 at the output's scale (2^-3 of it each: three mantissa
# bits) on top, for the same reason.
FP8_STEPS = 1
FP8_STEP = 2.0**-3
# Below this the scale is rounding noise of a value that is zero in eager.
_SCALE_FLOOR = 1e-6


@dataclass(frozen=True)
class Tolerance:
    precision: str  # "fp32", "fp16" or "bf16": what the engine's float layers compute in
    int8: bool  # the engine has int8 quantized (Q/DQ) layers
    fp8: bool = False  # ... FP8 ones

    @property
    def share(self) -> float:
        return (
            SCALE_SHARE[self.precision]
            + (INT8_STEPS / 127 if self.int8 else 0.0)
            + (FP8_STEPS * FP8_STEP if self.fp8 else 0.0)
        )

    def describe(self) -> str:
        steps = (f" + {INT8_STEPS} int8 steps" if self.int8 else "") + (f" + {FP8_STEPS} FP8 step" if self.fp8 else "")
        return f"{self.precision}{steps}: {self.share:.3g} of the output's scale"


@dataclass(frozen=True)
class OutputCheck:
    name: str  # the FX node the output stands for
    error: float  # max |engine - eager| / scale; for integer outputs the share of elements that differ
    passed: bool


def check_output(name: str, expected: torch.Tensor, actual: torch.Tensor, tol: Tolerance) -> OutputCheck:
    """`actual` (an engine's) against `expected` (eager's): a NaN or infinity where eager has a
    finite value, or another shape or dtype, is an infinite error."""
    if expected.shape != actual.shape or expected.dtype != actual.dtype:
        return OutputCheck(name, float("inf"), False)
    if expected.numel() == 0:
        return OutputCheck(name, 0.0, True)
    e, a = expected.detach().cpu(), actual.detach().cpu()
    if not (e.is_floating_point() or e.is_complex()):
        share = float((e != a).double().mean())
        return OutputCheck(name, share, share <= MISMATCH_SHARE[tol.precision])
    wide = torch.float64 if e.dtype == torch.float64 else torch.float32  # float32 holds fp16/bf16 exactly
    e, a = e.to(wide), a.to(wide)
    diff = (e - a).abs()
    magnitude = e.abs()
    if not bool(diff.isfinite().all()):  # rare: only then are equal infinities and NaN pairs told apart
        same = (e == a) | (e.isnan() & a.isnan())
        diff = torch.where(same, torch.zeros_like(e), diff.nan_to_num(nan=float("inf")))
        magnitude = torch.where(e.isfinite(), magnitude, torch.zeros_like(e))
    scale = max(float(magnitude.max()), _SCALE_FLOOR)
    error = float(diff.max()) / scale
    return OutputCheck(name, error, error <= tol.share)
