"""Elementwise math functions: exp/log and trigonometry, rounding, float predicates, and functions
of two operands (atan2, hypot, copysign, logaddexp, xlogy, heaviside, lerp, addcmul/addcdiv,
fmax/fmin).

Opset 17 has no single op for many of these, so they are short formulas. torch promotes integer
inputs of the float-valued ones; casting to the node's result dtype first does the same.
"""

from __future__ import annotations

import math
from typing import Optional

import torch

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.common import Operand, as_operand, float_inputs
from converters.core.registry import converter
from converters.core.target import TrtTarget
from converters.ops.creation import full_like

aten = torch.ops.aten


def _as_out(b: GraphBuilder, x: Operand) -> Ref:
    return as_operand(b, x, b.out.dtype)


# -- one ONNX op each, and rounding ----------------------------------------------------------
# torch promotes integers to float where the op needs it: the result dtype covers that.
def _one_op(b: GraphBuilder, op_type: str, x: Value) -> Ref:
    return b.op(op_type, b.cast(x, b.out.dtype), dtype=b.out.dtype)


def _rounded(b: GraphBuilder, op_type: str, x: Value) -> Ref:
    """Rounding ops are the identity on integers (torch returns them; TensorRT has no integer Floor)."""
    if x.dtype is not None and not x.dtype.is_floating_point:
        return b.op("Identity", x, dtype=x.dtype)
    return _one_op(b, op_type, x)


@converter(aten.neg.default)
def neg(b: GraphBuilder, x: Value) -> Ref:
    """neg(Tensor self) -> Tensor  (ONNX Neg)"""
    return _one_op(b, "Neg", x)


@converter(aten.abs.default)
def abs_(b: GraphBuilder, x: Value) -> Ref:
    """abs(Tensor self) -> Tensor  (ONNX Abs)"""
    return _one_op(b, "Abs", x)


@converter(aten.sign.default)
def sign(b: GraphBuilder, x: Value) -> Ref:
    """sign(Tensor self) -> Tensor  (ONNX Sign; 0 for NaN as in torch, where ONNX's Sign keeps the NaN)"""
    y = _one_op(b, "Sign", x)
    if not b.out.dtype.is_floating_point:
        return y
    return b.op("Where", b.op("IsNaN", y), b.const(0, b.out.dtype), y, dtype=b.out.dtype)


@converter(aten.exp.default)
def exp(b: GraphBuilder, x: Value) -> Ref:
    """exp(Tensor self) -> Tensor  (ONNX Exp)"""
    return _one_op(b, "Exp", x)


@converter(aten.log.default)
def log(b: GraphBuilder, x: Value) -> Ref:
    """log(Tensor self) -> Tensor  (ONNX Log)"""
    return _one_op(b, "Log", x)


@converter(aten.sqrt.default)
def sqrt(b: GraphBuilder, x: Value) -> Ref:
    """sqrt(Tensor self) -> Tensor  (ONNX Sqrt)"""
    return _one_op(b, "Sqrt", x)


@converter(aten.reciprocal.default)
def reciprocal(b: GraphBuilder, x: Value) -> Ref:
    """reciprocal(Tensor self) -> Tensor  (ONNX Reciprocal)"""
    return _one_op(b, "Reciprocal", x)


@converter(aten.erf.default)
def erf(b: GraphBuilder, x: Value) -> Ref:
    """erf(Tensor self) -> Tensor  (ONNX Erf)"""
    return _one_op(b, "Erf", x)


@converter(aten.sin.default)
def sin(b: GraphBuilder, x: Value) -> Ref:
    """sin(Tensor self) -> Tensor  (ONNX Sin)"""
    return _one_op(b, "Sin", x)


@converter(aten.cos.default)
def cos(b: GraphBuilder, x: Value) -> Ref:
    """cos(Tensor self) -> Tensor  (ONNX Cos)"""
    return _one_op(b, "Cos", x)


@converter(aten.tan.default)
def tan(b: GraphBuilder, x: Value) -> Ref:
    """tan(Tensor self) -> Tensor  (ONNX Tan)"""
    return _one_op(b, "Tan", x)


@converter(aten.asin.default)
def asin(b: GraphBuilder, x: Value) -> Ref:
    """asin(Tensor self) -> Tensor  (ONNX Asin)"""
    return _one_op(b, "Asin", x)


@converter(aten.acos.default)
def acos(b: GraphBuilder, x: Value) -> Ref:
    """acos(Tensor self) -> Tensor  (ONNX Acos)"""
    return _one_op(b, "Acos", x)


@converter(aten.atan.default)
def atan(b: GraphBuilder, x: Value) -> Ref:
    """atan(Tensor self) -> Tensor  (ONNX Atan)"""
    return _one_op(b, "Atan", x)


@converter(aten.sinh.default)
def sinh(b: GraphBuilder, x: Value) -> Ref:
    """sinh(Tensor self) -> Tensor  (ONNX Sinh)"""
    return _one_op(b, "Sinh", x)


@converter(aten.cosh.default)
def cosh(b: GraphBuilder, x: Value) -> Ref:
    """cosh(Tensor self) -> Tensor  (ONNX Cosh)"""
    return _one_op(b, "Cosh", x)


@converter(aten.asinh.default)
def asinh(b: GraphBuilder, x: Value) -> Ref:
    """asinh(Tensor self) -> Tensor  (ONNX Asinh)"""
    return _one_op(b, "Asinh", x)


@converter(aten.acosh.default)
def acosh(b: GraphBuilder, x: Value) -> Ref:
    """acosh(Tensor self) -> Tensor  (ONNX Acosh)"""
    return _one_op(b, "Acosh", x)


@converter(aten.atanh.default)
def atanh(b: GraphBuilder, x: Value) -> Ref:
    """atanh(Tensor self) -> Tensor  (ONNX Atanh)"""
    return _one_op(b, "Atanh", x)


@converter(aten.floor.default)
def floor(b: GraphBuilder, x: Value) -> Ref:
    """floor(Tensor self) -> Tensor  (ONNX Floor)"""
    return _rounded(b, "Floor", x)


@converter(aten.ceil.default)
def ceil(b: GraphBuilder, x: Value) -> Ref:
    """ceil(Tensor self) -> Tensor  (ONNX Ceil)"""
    return _rounded(b, "Ceil", x)


@converter(aten.round.default)
def round_(b: GraphBuilder, x: Value) -> Ref:
    """round(Tensor self) -> Tensor  (ONNX Round)"""
    return _rounded(b, "Round", x)


@converter(aten.rsqrt.default)
def rsqrt(b: GraphBuilder, x: Value) -> Ref:
    """rsqrt(Tensor self) -> Tensor"""
    return b.op("Reciprocal", b.op("Sqrt", b.cast(x, b.out.dtype)), dtype=b.out.dtype)


@converter(aten.trunc.default)
def trunc(b: GraphBuilder, x: Value) -> Ref:
    """trunc(Tensor self) -> Tensor  (the identity on integers)"""
    return rounded_toward_zero(b, x, x.dtype)


def rounded_toward_zero(b: GraphBuilder, x: Ref, dtype: torch.dtype) -> Ref:
    """`x` (of `dtype`) rounded toward zero."""
    if not dtype.is_floating_point:
        return b.op("Identity", x, dtype=dtype)
    negative = b.op("Less", x, b.const(0, dtype))
    return b.op("Where", negative, b.op("Ceil", x), b.op("Floor", x), dtype=dtype)


@converter(aten.frac.default, capability=float_inputs)
def frac(b: GraphBuilder, x: Value) -> Ref:
    """frac(Tensor self) -> Tensor  (x - trunc(x))"""
    return b.op("Sub", x, trunc(b, x), dtype=x.dtype)


@converter(aten.round.decimals, capability=float_inputs)
def round_decimals(b: GraphBuilder, x: Value, *, decimals: int = 0) -> Ref:
    """round.decimals(Tensor self, *, int decimals) -> Tensor

    As torch: round(x * 10**d) / 10**d, or round(x / 10**-d) * 10**-d for negative d (half to even).
    """
    dtype = x.dtype
    scale = b.const(10.0 ** abs(decimals), dtype)
    up, down = ("Mul", "Div") if decimals >= 0 else ("Div", "Mul")
    return b.op(down, b.op("Round", b.op(up, x, scale)), scale, dtype=dtype)


# -- logs and exps ---------------------------------------------------------------------------
@converter(aten.log2.default)
def log2(b: GraphBuilder, x: Value) -> Ref:
    """log2(Tensor self) -> Tensor"""
    dtype = b.out.dtype
    return b.op("Div", b.op("Log", _as_out(b, x)), b.const(math.log(2), dtype), dtype=dtype)


@converter(aten.log10.default)
def log10(b: GraphBuilder, x: Value) -> Ref:
    """log10(Tensor self) -> Tensor"""
    dtype = b.out.dtype
    return b.op("Div", b.op("Log", _as_out(b, x)), b.const(math.log(10), dtype), dtype=dtype)


def _unless(b: GraphBuilder, done: Ref, ratio: Ref, dtype: torch.dtype) -> Ref:
    """`ratio`, or 1 where `done` (a case the formula settles without it)."""
    return b.op("Where", done, b.const(1, dtype), ratio)


@converter(aten.log1p.default)
def log1p(b: GraphBuilder, x: Value) -> Ref:
    """log1p(Tensor self) -> Tensor

    log(u) * x / (u - 1) with u = 1 + x (Goldberg's correction: the factor undoes the rounding of
    1 + x), x itself where u rounds to 1. log(1 + x) alone was 19 % off at 1e-7 and 0 below
    6e-8 (found by a sweep of special values). (-0.0 comes out +0.0: ONNX Runtime's Where.)"""
    dtype = b.out.dtype
    xv = _as_out(b, x)
    u = b.op("Add", xv, b.const(1, dtype))
    d = b.op("Sub", u, b.const(1, dtype))
    tiny = b.op("Equal", d, b.const(0, dtype))
    ratio = _unless(b, b.op("Or", tiny, b.op("IsInf", d)), b.op("Div", xv, d), dtype)
    return b.op("Where", tiny, xv, b.op("Mul", b.op("Log", u), ratio), dtype=dtype)


@converter(aten.expm1.default)
def expm1(b: GraphBuilder, x: Value) -> Ref:
    """expm1(Tensor self) -> Tensor

    (u - 1) * x / log(u) with u = exp(x) (Kahan's correction), x where u rounds to 1; -1 and inf
    where u - 1 is. exp(x) - 1 alone was 19 % off at 1e-7 and 0 below 6e-8."""
    dtype = b.out.dtype
    xv = _as_out(b, x)
    u = b.op("Exp", xv)
    um1 = b.op("Sub", u, b.const(1, dtype))
    one = b.op("Equal", u, b.const(1, dtype))
    settled = b.op("Or", one, b.op("Or", b.op("Equal", um1, b.const(-1, dtype)), b.op("IsInf", u)))
    ratio = _unless(b, settled, b.op("Div", xv, b.op("Log", u)), dtype)
    return b.op("Where", one, xv, b.op("Mul", um1, ratio), dtype=dtype)


@converter(aten.exp2.default)
def exp2(b: GraphBuilder, x: Value) -> Ref:
    """exp2(Tensor self) -> Tensor"""
    dtype = b.out.dtype
    return b.op("Pow", b.const(2, dtype), _as_out(b, x), dtype=dtype)


# erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z / 2), z >= 0: the Chebyshev fit of Press et al.,
# Numerical Recipes (erfcc), fractional error under 1.2e-7 everywhere; P's coefficients, t^0 first.
_ERFC_TAIL = (
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
)


@converter(aten.erfc.default)
def erfc(b: GraphBuilder, x: Value) -> Ref:
    """erfc(Tensor self) -> Tensor

    1 - erf(x) below 0.5; above, where that difference cancels to nothing (erfc(6) is 2e-17, 1 - erf
    rounds to 0), the tail fit t exp(-x^2 + P(t)) with its relative error under 1.2e-7."""
    dtype = b.out.dtype
    xv = _as_out(b, x)
    t = b.op("Reciprocal", b.op("Add", b.const(1, dtype), b.op("Mul", xv, b.const(0.5, dtype))))
    poly: Ref = b.const(_ERFC_TAIL[-1], dtype)
    for c in reversed(_ERFC_TAIL[:-1]):
        poly = b.op("Add", b.op("Mul", poly, t), b.const(c, dtype))
    tail = b.op("Mul", t, b.op("Exp", b.op("Sub", poly, b.op("Mul", xv, xv))))
    near = b.op("Sub", b.const(1, dtype), b.op("Erf", xv))
    return b.op("Where", b.op("Less", xv, b.const(0.5, dtype)), near, tail, dtype=dtype)


# -- other unary -----------------------------------------------------------------------------
@converter(aten.deg2rad.default)
def deg2rad(b: GraphBuilder, x: Value) -> Ref:
    """deg2rad(Tensor self) -> Tensor"""
    dtype = b.out.dtype
    return b.op("Mul", _as_out(b, x), b.const(math.pi / 180, dtype), dtype=dtype)


@converter(aten.rad2deg.default)
def rad2deg(b: GraphBuilder, x: Value) -> Ref:
    """rad2deg(Tensor self) -> Tensor"""
    dtype = b.out.dtype
    return b.op("Mul", _as_out(b, x), b.const(180 / math.pi, dtype), dtype=dtype)


@converter(aten.sinc.default)
def sinc(b: GraphBuilder, x: Value) -> Ref:
    """sinc(Tensor self) -> Tensor  (sin(pi x) / (pi x), 1 at 0)"""
    dtype = b.out.dtype
    xv = _as_out(b, x)
    px = b.op("Mul", xv, b.const(math.pi, dtype))
    ratio = b.op("Div", b.op("Sin", px), px)
    return b.op("Where", b.op("Equal", xv, b.const(0, dtype)), b.const(1, dtype), ratio, dtype=dtype)


def _signbit(b: GraphBuilder, x: Ref, dtype: torch.dtype) -> Ref:
    """x (of `dtype`) < 0, counting -0.0 as negative (1 / -0.0 is -inf)."""
    zero = b.const(0, dtype)
    if not dtype.is_floating_point:
        return b.op("Less", x, zero, dtype=torch.bool)
    negative_zero = b.op("And", b.op("Equal", x, zero), b.op("Less", b.op("Reciprocal", x), zero))
    return b.op("Or", b.op("Less", x, zero), negative_zero, dtype=torch.bool)


@converter(aten.signbit.default)
def signbit(b: GraphBuilder, x: Value) -> Ref:
    """signbit(Tensor self) -> Tensor"""
    number = b.cast(x, torch.int32) if x.dtype == torch.bool else x
    return _signbit(b, number, number.dtype)


# -- float predicates (constant for integer tensors) -----------------------------------------
@converter(aten.isnan.default)
def isnan(b: GraphBuilder, x: Value) -> Ref:
    """isnan(Tensor self) -> Tensor"""
    if not x.dtype.is_floating_point:
        return full_like(b, x, False)
    return b.op("IsNaN", x, dtype=torch.bool)


@converter(aten.isinf.default)
def isinf(b: GraphBuilder, x: Value) -> Ref:
    """isinf(Tensor self) -> Tensor

    |x| == inf rather than IsInf, which TensorRT 8.6's parser lacks.
    """
    if not x.dtype.is_floating_point:
        return full_like(b, x, False)
    return b.op("Equal", b.op("Abs", x), b.const(math.inf, x.dtype), dtype=torch.bool)


@converter(aten.isposinf.default)
def isposinf(b: GraphBuilder, x: Value) -> Ref:
    """isposinf(Tensor self) -> Tensor"""
    if not x.dtype.is_floating_point:
        return full_like(b, x, False)
    return b.op("Equal", x, b.const(math.inf, x.dtype), dtype=torch.bool)


@converter(aten.isneginf.default)
def isneginf(b: GraphBuilder, x: Value) -> Ref:
    """isneginf(Tensor self) -> Tensor"""
    if not x.dtype.is_floating_point:
        return full_like(b, x, False)
    return b.op("Equal", x, b.const(-math.inf, x.dtype), dtype=torch.bool)


@converter(aten.isfinite.default)
def isfinite(b: GraphBuilder, x: Value) -> Ref:
    """isfinite(Tensor self) -> Tensor  (|x| < inf is false for inf and NaN alike)"""
    if not x.dtype.is_floating_point:
        return full_like(b, x, True)
    return b.op("Less", b.op("Abs", x), b.const(math.inf, x.dtype), dtype=torch.bool)


@converter(aten.nan_to_num.default)
def nan_to_num(
    b: GraphBuilder, x: Value, nan: float | None = None, posinf: float | None = None, neginf: float | None = None
) -> Ref:
    """nan_to_num(Tensor self, float? nan=None, float? posinf=None, float? neginf=None) -> Tensor"""
    dtype = x.dtype
    if not dtype.is_floating_point:
        return b.op("Identity", x, dtype=dtype)
    info = torch.finfo(dtype)
    y = b.op("Where", b.op("IsNaN", x), b.const(0.0 if nan is None else nan, dtype), x)
    y = b.op(
        "Where", b.op("Equal", x, b.const(math.inf, dtype)), b.const(info.max if posinf is None else posinf, dtype), y
    )
    return b.op(
        "Where",
        b.op("Equal", x, b.const(-math.inf, dtype)),
        b.const(info.min if neginf is None else neginf, dtype),
        y,
        dtype=dtype,
    )


# -- two operands ----------------------------------------------------------------------------
@converter(aten.atan2.default)
def atan2(b: GraphBuilder, y: Value, x: Value) -> Ref:
    """atan2(Tensor self, Tensor other) -> Tensor  (the angle of the point (other, self))

    As C's atan2: the first-quadrant angle atan(|y| / |x|), mirrored by the sign bits of x and
    y (so -0.0 counts: atan2(±0, -0) = ±pi); two zeros give 0 and two infinities pi/4 before
    mirroring, where |y| / |x| would be NaN. A NaN operand gives NaN.
    """
    dtype = b.out.dtype
    yv, xv = _as_out(b, y), _as_out(b, x)
    ay, ax = b.op("Abs", yv), b.op("Abs", xv)
    zero, inf = b.const(0, dtype), b.const(math.inf, dtype)
    ratio = b.op("Div", ay, ax)
    ratio = b.op("Where", b.op("And", b.op("Equal", ay, inf), b.op("Equal", ax, inf)), b.const(1, dtype), ratio)
    ratio = b.op("Where", b.op("And", b.op("Equal", ay, zero), b.op("Equal", ax, zero)), zero, ratio)
    angle = b.op("Atan", ratio)
    angle = b.op("Where", _signbit(b, xv, dtype), b.op("Sub", b.const(math.pi, dtype), angle), angle)
    # Times ±1: ONNX Runtime's Where picks +0.0 where it should pick -0.0.
    sign = b.op("Where", _signbit(b, yv, dtype), b.const(-1, dtype), b.const(1, dtype))
    return b.op("Mul", angle, sign, dtype=dtype)


@converter(aten.hypot.default)
def hypot(b: GraphBuilder, x: Value, y: Value) -> Ref:
    """hypot(Tensor self, Tensor other) -> Tensor

    As big * sqrt(1 + (small / big)²), which does not overflow where x² would; as C's hypot, an
    infinite operand wins over a NaN one.
    """
    dtype = b.out.dtype
    ax, ay = b.op("Abs", _as_out(b, x)), b.op("Abs", _as_out(b, y))
    big, small = b.op("Max", ax, ay), b.op("Min", ax, ay)
    ratio = b.op("Div", small, big)
    out = b.op("Mul", big, b.op("Sqrt", b.op("Add", b.const(1, dtype), b.op("Mul", ratio, ratio))))
    out = b.op("Where", b.op("Equal", big, b.const(0, dtype)), b.const(0, dtype), out)  # not 0 / 0
    out = b.op("Where", b.op("Or", b.op("IsNaN", ax), b.op("IsNaN", ay)), b.const(math.nan, dtype), out)
    inf = b.const(math.inf, dtype)
    return b.op("Where", b.op("Or", b.op("Equal", ax, inf), b.op("Equal", ay, inf)), inf, out, dtype=dtype)


@converter(aten.copysign.Tensor)
def copysign(b: GraphBuilder, x: Value, y: Value) -> Ref:
    """copysign.Tensor(Tensor self, Tensor other) -> Tensor"""
    magnitude = b.op("Abs", _as_out(b, x))
    return b.op("Where", _signbit(b, _as_out(b, y), b.out.dtype), b.op("Neg", magnitude), magnitude, dtype=b.out.dtype)


@converter(aten.copysign.Scalar)
def copysign_scalar(b: GraphBuilder, x: Value, y: float) -> Ref:
    """copysign.Scalar(Tensor self, Scalar other) -> Tensor"""
    magnitude = b.op("Abs", _as_out(b, x), dtype=b.out.dtype)
    return b.op("Neg", magnitude, dtype=b.out.dtype) if math.copysign(1, y) < 0 else magnitude


def _logaddexp(b: GraphBuilder, x: Value, y: Value, base: float) -> Ref:
    """max + log_base(1 + base^-|x - y|); |x - y| is taken as 0 where x == y so that equal
    infinities give that infinity instead of NaN."""
    dtype = b.out.dtype
    xv, yv = _as_out(b, x), _as_out(b, y)
    zero, one = b.const(0, dtype), b.const(1, dtype)
    gap = b.op("Where", b.op("Equal", xv, yv), zero, b.op("Abs", b.op("Sub", xv, yv)))
    if base == math.e:
        tail = b.op("Log", b.op("Add", one, b.op("Exp", b.op("Neg", gap))))
    else:
        tail = b.op("Log", b.op("Add", one, b.op("Pow", b.const(base, dtype), b.op("Neg", gap))))
        tail = b.op("Div", tail, b.const(math.log(base), dtype))
    return b.op("Add", b.op("Max", xv, yv), tail, dtype=dtype)


@converter(aten.logaddexp.default)
def logaddexp(b: GraphBuilder, x: Value, y: Value) -> Ref:
    """logaddexp(Tensor self, Tensor other) -> Tensor"""
    return _logaddexp(b, x, y, math.e)


@converter(aten.logaddexp2.default)
def logaddexp2(b: GraphBuilder, x: Value, y: Value) -> Ref:
    """logaddexp2(Tensor self, Tensor other) -> Tensor"""
    return _logaddexp(b, x, y, 2.0)


@converter(aten.xlogy.Tensor, aten.xlogy.Scalar_Other)
def xlogy(b: GraphBuilder, x: Value, y: Operand) -> Ref:
    """xlogy.Tensor(Tensor self, Tensor other) -> Tensor; xlogy.Scalar_Other(Tensor self, Scalar other)

    x * log(y), 0 where x == 0, NaN where y is NaN.
    """
    dtype = b.out.dtype
    xv, yv = _as_out(b, x), _as_out(b, y)
    product = b.op("Mul", xv, b.op("Log", yv))
    out = b.op("Where", b.op("Equal", xv, b.const(0, dtype)), b.const(0, dtype), product)
    return b.op("Where", b.op("IsNaN", yv), b.const(math.nan, dtype), out, dtype=dtype)


def _not_bool(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    for arg in node.all_input_nodes:
        if arg.meta["val"].dtype == torch.bool:
            return f"{node.target} of bool tensors (ONNX compares numbers only)"
    return None


@converter(aten.heaviside.default, capability=_not_bool)
def heaviside(b: GraphBuilder, x: Value, values: Value) -> Ref:
    """heaviside(Tensor self, Tensor values) -> Tensor  (NaN counts as negative, as in torch)"""
    dtype = b.out.dtype
    xv = _as_out(b, x)
    zero = b.const(0, dtype)
    below = b.op("Less", xv, zero)
    if dtype.is_floating_point:
        below = b.op("Or", below, b.op("IsNaN", xv))
    steps = b.op("Where", below, zero, b.const(1, dtype))
    return b.op("Where", b.op("Equal", xv, zero), _as_out(b, values), steps, dtype=dtype)


@converter(aten.lerp.Scalar, aten.lerp.Tensor)
def lerp(b: GraphBuilder, start: Value, end: Value, weight: Operand) -> Ref:
    """lerp.Scalar(Tensor self, Tensor end, Scalar weight) -> Tensor;
    lerp.Tensor(Tensor self, Tensor end, Tensor weight) -> Tensor

    torch's two-sided form (from `end` where |weight| >= 0.5), which is exact at weight 1.
    """
    dtype = b.out.dtype
    s, e = _as_out(b, start), _as_out(b, end)
    diff = b.op("Sub", e, s)
    if not isinstance(weight, Ref):
        far = abs(weight) >= 0.5
        coeff = b.const(weight - 1 if far else weight, dtype)
        return b.op("Add", b.op("Mul", coeff, diff), e if far else s, dtype=dtype)
    w = _as_out(b, weight)
    far_from_start = b.op("GreaterOrEqual", b.op("Abs", w), b.const(0.5, dtype))
    coeff_t = b.op("Where", far_from_start, b.op("Sub", w, b.const(1, dtype)), w)
    return b.op("Add", b.op("Mul", coeff_t, diff), b.op("Where", far_from_start, e, s), dtype=dtype)


@converter(aten.addcmul.default)
def addcmul(b: GraphBuilder, x: Value, t1: Value, t2: Value, *, value: float = 1) -> Ref:
    """addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor"""
    dtype = b.out.dtype
    scaled = _as_out(b, t1) if value == 1 else b.op("Mul", b.const(value, dtype), _as_out(b, t1))
    return b.op("Add", _as_out(b, x), b.op("Mul", scaled, _as_out(b, t2)), dtype=dtype)


@converter(aten.addcdiv.default, capability=float_inputs)
def addcdiv(b: GraphBuilder, x: Value, t1: Value, t2: Value, *, value: float = 1) -> Ref:
    """addcdiv(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor"""
    dtype = b.out.dtype
    scaled = _as_out(b, t1) if value == 1 else b.op("Mul", b.const(value, dtype), _as_out(b, t1))
    return b.op("Add", _as_out(b, x), b.op("Div", scaled, _as_out(b, t2)), dtype=dtype)


def _nan_ignoring(b: GraphBuilder, op_type: str, bool_op: str, x: Value, y: Value) -> Ref:
    dtype = b.out.dtype
    xv, yv = _as_out(b, x), _as_out(b, y)
    if dtype == torch.bool:
        return b.op(bool_op, xv, yv, dtype=dtype)
    out = b.op(op_type, xv, yv, dtype=dtype)
    if not dtype.is_floating_point:
        return out
    out = b.op("Where", b.op("IsNaN", yv), xv, out)
    return b.op("Where", b.op("IsNaN", xv), yv, out, dtype=dtype)


@converter(aten.fmax.default)
def fmax(b: GraphBuilder, x: Value, y: Value) -> Ref:
    """fmax(Tensor self, Tensor other) -> Tensor  (a NaN loses to a number)"""
    return _nan_ignoring(b, "Max", "Or", x, y)


@converter(aten.fmin.default)
def fmin(b: GraphBuilder, x: Value, y: Value) -> Ref:
    """fmin(Tensor self, Tensor other) -> Tensor  (a NaN loses to a number)"""
    return _nan_ignoring(b, "Min", "And", x, y)
