"""How far an engine's output may be from the right value before it counts as a miscompile,
element by element, judged against the error eager PyTorch itself makes (the approach of
torch._dynamo's accuracy checker with a float64 reference).

The right value is a float64 run of the same computation fed the same inputs (float64.py). Eager's
distance from it, at each element, is the rounding error of that computation in eager's dtype; an
engine may be a few times as far, scaled to the precision it computes in, plus a few units of
that precision at the size of what was added up to make the value (its magnitude, float64.py:
|ref| itself but for sums and differences, where it is the size of their terms):

    |engine - ref| <= MULTIPLE * |eager - ref| + RTOL_UNITS * u * magnitude + floor
    floor = MULTIPLE * (u / u_eager) * max |eager - ref| over the output (+ the terms below)

`u` is the engine precision's unit roundoff: float32 engines are allowed TF32's (TensorRT computes
convolutions and matrix products in TF32 on Ampere and newer GPUs, 10 mantissa bits). The floor
is the output's own rounding noise (its largest eager error) at the engine's precision: an output
that is zero by cancellation (`softmax(x).sum(-1) - 1`) is all noise and passes at any size, while
an output of magnitude 1e-9 carries noise of 1e-16 and a sign flip of it is caught, as is any
small entry of a large output whose value changed by more than its rounding. Reduced precisions
(fp16, bf16) and checks without a reference also allow a few units at the output's scale (an
output eager computes exactly, such as a sum of small multiples of 1/8, has no noise to measure
the engine's by); int8 and FP8 engines their quantization steps at the output's scale.
Figures: bench/bench_verify.py (bench/README.md, "verify").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trt_lower.verify.float64 import Reference

# Unit roundoff of what the engine's float layers compute in (float32: TF32's), and the smallest
# normal number of its dtype (below it an engine may flush to zero).
UNIT = {"fp32": 2.0**-11, "fp16": 2.0**-11, "bf16": 2.0**-8}
TINY = {p: torch.finfo(d).tiny for p, d in (("fp32", torch.float32), ("fp16", torch.float16), ("bf16", torch.bfloat16))}
# The engine may be this many times as far from float64 as eager is (at the engine's precision).
MULTIPLE = 4
# ... plus this many units of its precision at the value itself (its own rounding, and a few ulps
# of an approximated exp or erf).
RTOL_UNITS = 4
# Integer and boolean outputs (argmax, comparisons): the share of elements that may differ, since
# a near tie decides the other way under any rounding.
MISMATCH_SHARE = {"fp32": 1e-2, "fp16": 5e-2, "bf16": 5e-2}
# int8 engines: this many quantization steps of a symmetric int8 tensor of the output's scale
# (scale / 127 each), on top of a share of the scale, measured on bench_quant.py's models: a
# rounding that lands one code over propagates through every layer after it.
INT8_STEPS = 4
INT8_SHARE = {"fp32": 1e-2, "fp16": 5e-2, "bf16": 1e-1}
# FP8 (E4M3) engines: this many steps of FP8 at the output's scale (2^-3 of it each: three mantissa
# bits) on top, for the same reason.
FP8_STEPS = 1
FP8_STEP = 2.0**-3


@dataclass(frozen=True)
class Tolerance:
    precision: str  # "fp32", "fp16" or "bf16": what the engine's float layers compute in
    int8: bool  # the engine has int8 quantized (Q/DQ) layers
    fp8: bool = False  # ... FP8 ones

    @property
    def unit(self) -> float:
        return UNIT[self.precision]

    @property
    def quantized_share(self) -> float:
        """The share of the output's scale quantization may move a value by (0 without Q/DQ)."""
        if not (self.int8 or self.fp8):
            return 0.0
        steps = (INT8_STEPS / 127 if self.int8 else 0.0) + (FP8_STEPS * FP8_STEP if self.fp8 else 0.0)
        return INT8_SHARE[self.precision] + steps

    def describe(self) -> str:
        steps = (f" + {INT8_STEPS} int8 steps" if self.int8 else "") + (f" + {FP8_STEPS} FP8 step" if self.fp8 else "")
        return (
            f"{self.precision}{steps}: {MULTIPLE}x eager's own error against float64 + "
            f"{RTOL_UNITS} units of {self.unit:.3g} per element"
        )

    def bound(
        self,
        eager_error: torch.Tensor,
        reference: torch.Tensor,
        eager: torch.dtype,
        known: bool,
        magnitude: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Each element's largest allowed |engine - reference| (float64), given eager's error
        there (`eager_error`; `known` False when no reference was computed: it is all zero) and
        the magnitude of what was added up to make it (float64.py; |reference| where not known)."""
        scale = float(reference.abs().max()) if reference.numel() else 0.0
        magnitude = reference.abs() if magnitude is None else magnitude
        widen = max(1.0, self.unit / (torch.finfo(eager.to_real()).eps / 2))
        floor = MULTIPLE * widen * float(eager_error.max()) + TINY[self.precision] + self.quantized_share * scale
        if self.precision != "fp32" or not known:
            floor += MULTIPLE * self.unit * scale
        # In place on the one new tensor: an output of millions of elements makes each copy count.
        allowed = torch.mul(eager_error, MULTIPLE).add_(RTOL_UNITS * self.unit * magnitude)
        return allowed.add_(floor)


@dataclass(frozen=True)
class OutputCheck:
    name: str  # the FX node the output stands for
    # max over elements of |engine - reference| / its bound (passes at <= 1); for integer outputs
    # the share of elements that differ
    error: float
    passed: bool


def check_output(
    name: str,
    expected: torch.Tensor,
    actual: torch.Tensor,
    tol: Tolerance,
    reference: torch.Tensor | Reference | None = None,
) -> OutputCheck:
    """`actual` (an engine's) against `expected` (eager's) and `reference` (the same computation in
    float64, fed the same inputs, with its magnitude where float64.py gives one; without it eager's
    own error is unknown and counted as none):
    a NaN or infinity where eager has a finite value, or another shape or dtype, is an infinite
    error."""
    if expected.shape != actual.shape or expected.dtype != actual.dtype:
        return OutputCheck(name, float("inf"), False)
    if expected.numel() == 0:
        return OutputCheck(name, 0.0, True)
    magnitude = reference.magnitude if isinstance(reference, Reference) else None
    if isinstance(reference, Reference):
        reference = reference.value
    e, a = expected.detach().cpu(), actual.detach().cpu()
    if not (e.is_floating_point() or e.is_complex()):
        share = float((e != a).double().mean())
        return OutputCheck(name, share, share <= MISMATCH_SHARE[tol.precision])
    wide = torch.complex128 if e.is_complex() else torch.float64
    finite = e.isfinite()
    everywhere = bool(finite.all())
    ref = e.to(wide) if reference is None else reference.detach().cpu().to(wide)
    if not (everywhere and bool(ref.isfinite().all())):
        ref = torch.where(finite & ref.isfinite(), ref, torch.where(finite, e.to(wide), torch.zeros((), dtype=wide)))
    eager_error = _distance(e, ref)
    if not everywhere:
        eager_error.masked_fill_(~finite, 0.0)
    if magnitude is not None:
        magnitude = magnitude.detach().cpu().to(torch.float64)
        if not bool(magnitude.isfinite().all()):
            magnitude = torch.where(magnitude.isfinite(), magnitude, ref.abs())
    bound = tol.bound(eager_error, ref, e.dtype, reference is not None, magnitude)
    diff = _distance(a, ref).nan_to_num_(nan=float("inf"))
    if not everywhere:  # eager's infinities and NaNs: the engine must give the same
        same = (e == a) | (e.isnan() & a.isnan())
        diff = torch.where(finite, diff, torch.where(same, 0.0, float("inf")))
    error = float(diff.div_(bound).max())
    return OutputCheck(name, error, error <= 1.0)


def _distance(value: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """|value - reference| in the reference's (wide) dtype, into one new tensor: the subtraction
    widens `value` exactly as a copy in float64 would, without the copy."""
    difference = torch.sub(value, reference)
    return difference.abs() if difference.is_complex() else difference.abs_()
