"""Elementwise arithmetic, comparisons, logic, where and clamping.

Math functions (exp/log, trigonometry, rounding, float predicates, atan2, lerp, fmax, …) are in
math_functions.py.
"""

from __future__ import annotations

import math

import torch

from converters.core.builder import GraphBuilder, Ref, Value, onnx_type
from converters.core.common import Operand, as_operand, float_result, promoted_dtype
from converters.core.registry import converter
from converters.core.where import where as select_where
from converters.ops.math_functions import rounded_toward_zero

aten = torch.ops.aten
prims = torch.ops.prims


# torch computes add/mul/maximum/minimum of bools as logic; ONNX's arithmetic has no bool type.
_BOOL_FORM = {"Add": "Or", "Mul": "And", "Max": "Or", "Min": "And"}


def _binary(b: GraphBuilder, op_type: str, x: Operand, y: Operand) -> Ref:
    """`op_type` on both operands cast to the node's result dtype (torch's promotion)."""
    dtype = b.out.dtype
    if dtype == torch.bool:
        op_type = _BOOL_FORM.get(op_type, op_type)
    return b.op(op_type, as_operand(b, x, dtype), as_operand(b, y, dtype), dtype=dtype)


def _scaled(b: GraphBuilder, y: Operand, alpha: float | int) -> Operand:
    if alpha == 1:
        return y
    if not isinstance(y, Ref):
        return y * alpha
    dtype = b.out.dtype
    return b.op("Mul", as_operand(b, y, dtype), b.const(alpha, dtype), dtype=dtype)


# -- arithmetic ------------------------------------------------------------------------------
@converter(aten.add.Tensor, aten.add.Scalar)
def add(b: GraphBuilder, x: Operand, y: Operand, alpha: float = 1) -> Ref:
    """add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    return _binary(b, "Add", x, _scaled(b, y, alpha))


@converter(aten.sub.Tensor, aten.sub.Scalar)
def sub(b: GraphBuilder, x: Operand, y: Operand, alpha: float = 1) -> Ref:
    """sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    return _binary(b, "Sub", x, _scaled(b, y, alpha))


@converter(aten.rsub.Tensor, aten.rsub.Scalar)
def rsub(b: GraphBuilder, x: Operand, y: Operand, alpha: float = 1) -> Ref:
    """rsub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"""
    return _binary(b, "Sub", y, _scaled(b, x, alpha))


@converter(aten.mul.Tensor, aten.mul.Scalar)
def mul(b: GraphBuilder, x: Operand, y: Operand) -> Ref:
    """mul.Tensor(Tensor self, Tensor other) -> Tensor"""
    return _binary(b, "Mul", x, y)


@converter(aten.div.Tensor, aten.div.Scalar)
def div(b: GraphBuilder, x: Operand, y: Operand) -> Ref:
    """div.Tensor(Tensor self, Tensor other) -> Tensor"""
    return _binary(b, "Div", x, y)


def _int_div(b: GraphBuilder, x: Ref, y: Ref, dtype: torch.dtype) -> Ref:
    """ONNX's integer Div, truncating, except by -1, which is negation: the smallest integer
    divided by -1 overflows, and the CPU's division traps, killing the process (found by a sweep
    of special values); torch's floor division gives it back, as negation does."""
    minus_one = b.op("Equal", y, b.const(-1, dtype))
    safe = b.op("Where", minus_one, b.const(1, dtype), y, dtype=dtype)
    return b.op("Where", minus_one, b.op("Neg", x), b.op("Div", x, safe), dtype=dtype)


def _floor_int_div(b: GraphBuilder, x: Ref, y: Ref, dtype: torch.dtype) -> Ref:
    # ONNX integer Div truncates; floor it where the remainder is non-zero and signs differ.
    q = _int_div(b, x, y, dtype)
    r = b.op("Sub", x, b.op("Mul", q, y), dtype=dtype)
    zero = b.const(0, dtype)
    inexact = b.op("Not", b.op("Equal", r, zero))
    signs_differ = b.op("Xor", b.op("Less", r, zero), b.op("Less", y, zero))
    adjust = b.op("Cast", b.op("And", inexact, signs_differ), to=onnx_type(dtype))
    return b.op("Sub", q, adjust, dtype=dtype)


def _fmod_moved(b: GraphBuilder, x: Ref, y: Ref, dtype: torch.dtype) -> tuple[Ref, Ref]:
    """fmod(x, y), and where a floored result moves it to y's sign (non-zero, signs differ).
    torch's floor division and remainder of floats start from fmod, which is exact, not from
    x / y, which rounds: 1 // 0.1 is 9 and 1 % 0.1 is 0.1 - 2^-27 in float32 (found by checking
    what tests/test_fuzz.py's exact inputs could not)."""
    mod = b.op("Mod", x, y, fmod=1, dtype=dtype)
    zero = b.const(0, dtype)
    moved = b.op(
        "And", b.op("Not", b.op("Equal", mod, zero)), b.op("Xor", b.op("Less", y, zero), b.op("Less", mod, zero))
    )
    return mod, moved


def _floor_float_div(b: GraphBuilder, x: Ref, y: Ref, dtype: torch.dtype) -> Ref:
    """c10's floor division of floats: (x - fmod(x, y)) / y, less one where the remainder moves,
    rounded to the nearest integer below; x / y for a zero divisor. An infinite x gives NaN (its
    fmod is NaN), a finite x over an infinite y 0 or -1, as in torch."""
    mod, moved = _fmod_moved(b, x, y, dtype)
    div = b.op("Sub", b.op("Div", b.op("Sub", x, mod), y), b.op("Cast", moved, to=onnx_type(dtype)))
    low = b.op("Floor", div)
    up = b.op("Cast", b.op("Greater", b.op("Sub", div, low), b.const(0.5, dtype)), to=onnx_type(dtype))
    floor = b.op("Add", low, up)
    zero_divisor = b.op("Equal", y, b.const(0, dtype))
    return b.op("Where", zero_divisor, b.op("Div", x, y), floor, dtype=dtype)


@converter(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(b: GraphBuilder, x: Operand, y: Operand, *, rounding_mode: str | None = None) -> Ref:
    """div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor"""
    dtype = b.out.dtype
    xv, yv = as_operand(b, x, dtype), as_operand(b, y, dtype)
    if rounding_mode is None:
        return b.op("Div", xv, yv, dtype=dtype)
    if not dtype.is_floating_point:
        if rounding_mode == "trunc":
            return _int_div(b, xv, yv, dtype)
        return _floor_int_div(b, xv, yv, dtype)
    if rounding_mode == "floor":
        return _floor_float_div(b, xv, yv, dtype)
    return rounded_toward_zero(b, b.op("Div", xv, yv, dtype=dtype), dtype)


@converter(prims.div.default)
def prims_div(b: GraphBuilder, x: Value, y: Value) -> Ref:
    """prims::div(Tensor self, Tensor other) -> Tensor  (of integers: truncated, as in C)"""
    return div_mode(b, x, y, rounding_mode=None if b.out.dtype.is_floating_point else "trunc")


@converter(aten.floor_divide.default, aten.floor_divide.Scalar)
def floor_divide(b: GraphBuilder, x: Operand, y: Operand) -> Ref:
    """floor_divide(Tensor self, Tensor other) -> Tensor"""
    return div_mode(b, x, y, rounding_mode="floor")


@converter(aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor, aten.pow.Scalar, capability=float_result)
def pow(b: GraphBuilder, x: Operand, y: Operand) -> Ref:
    """pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor

    A float base with an integer exponent (BLOOM's ALiBi slopes) runs on the exponent cast to
    the result's dtype, as torch promotes it."""
    if y == 2 and isinstance(x, Value):
        return square(b, x)
    if y in (0.5, -0.5) and isinstance(x, Value) and b.out.dtype.is_floating_point:
        # torch takes these as sqrt and rsqrt: NaN at -inf and -inf at -0.0, where Pow (C's pow)
        # gives +inf, and +inf for -0.5 (found by a sweep of special values).
        root = b.op("Sqrt", b.cast(x, b.out.dtype), dtype=b.out.dtype)
        return root if y == 0.5 else b.op("Reciprocal", root, dtype=b.out.dtype)
    return _binary(b, "Pow", x, y)


@converter(aten.square.default)
def square(b: GraphBuilder, x: Value) -> Ref:
    """square(Tensor self) -> Tensor"""
    xv = b.cast(x, b.out.dtype)
    return b.op("Mul", xv, xv, dtype=b.out.dtype)


@converter(aten.maximum.default)
def maximum(b: GraphBuilder, x: Value, y: Value) -> Ref:
    """maximum(Tensor self, Tensor other) -> Tensor"""
    return _binary(b, "Max", x, y)


@converter(aten.minimum.default)
def minimum(b: GraphBuilder, x: Value, y: Value) -> Ref:
    """minimum(Tensor self, Tensor other) -> Tensor"""
    return _binary(b, "Min", x, y)


@converter(aten.remainder.Tensor, aten.remainder.Scalar)
def remainder(b: GraphBuilder, x: Operand, y: Operand) -> Ref:
    """remainder.Tensor(Tensor self, Tensor other) -> Tensor  (sign of the divisor)"""
    dtype = b.out.dtype
    xv, yv = as_operand(b, x, dtype), as_operand(b, y, dtype)
    if dtype.is_floating_point:
        mod, moved = _fmod_moved(b, xv, yv, dtype)
        return b.op("Where", moved, b.op("Add", mod, yv), mod, dtype=dtype)
    return b.op("Sub", xv, b.op("Mul", _floor_int_div(b, xv, yv, dtype), yv), dtype=dtype)


@converter(aten.fmod.Tensor, aten.fmod.Scalar)
def fmod(b: GraphBuilder, x: Operand, y: Operand) -> Ref:
    """fmod.Tensor(Tensor self, Tensor other) -> Tensor  (sign of the dividend)"""
    dtype = b.out.dtype
    return b.op("Mod", as_operand(b, x, dtype), as_operand(b, y, dtype), fmod=1, dtype=dtype)


# -- comparisons and logic -------------------------------------------------------------------
def _compare(b: GraphBuilder, op_type: str, x: Operand, y: Operand) -> Ref:
    dtype = promoted_dtype(x, y)
    if dtype == torch.bool:
        # ONNX orders numbers only (False < True as 0 < 1); TensorRT compares no bools, not even Equal.
        dtype = torch.int32
    return b.op(op_type, as_operand(b, x, dtype), as_operand(b, y, dtype), dtype=torch.bool)


@converter(aten.eq.Tensor, aten.eq.Scalar)
def eq(b: GraphBuilder, x: Operand, y: Operand) -> Ref:
    """eq.Tensor(Tensor self, Tensor other) -> Tensor"""
    return _compare(b, "Equal", x, y)


@converter(aten.ne.Tensor, aten.ne.Scalar)
def ne(b: GraphBuilder, x: Operand, y: Operand) -> Ref:
    """ne.Tensor(Tensor self, Tensor other) -> Tensor"""
    return b.op("Not", _compare(b, "Equal", x, y), dtype=torch.bool)


@converter(aten.lt.Tensor, aten.lt.Scalar)
def lt(b: GraphBuilder, x: Operand, y: Operand) -> Ref:
    """lt.Tensor(Tensor self, Tensor other) -> Tensor"""
    return _compare(b, "Less", x, y)


@converter(aten.le.Tensor, aten.le.Scalar)
def le(b: GraphBuilder, x: Operand, y: Operand) -> Ref:
    """le.Tensor(Tensor self, Tensor other) -> Tensor"""
    return _compare(b, "LessOrEqual", x, y)


@converter(aten.gt.Tensor, aten.gt.Scalar)
def gt(b: GraphBuilder, x: Operand, y: Operand) -> Ref:
    """gt.Tensor(Tensor self, Tensor other) -> Tensor"""
    return _compare(b, "Greater", x, y)


@converter(aten.ge.Tensor, aten.ge.Scalar)
def ge(b: GraphBuilder, x: Operand, y: Operand) -> Ref:
    """ge.Tensor(Tensor self, Tensor other) -> Tensor"""
    return _compare(b, "GreaterOrEqual", x, y)


def _logical(b: GraphBuilder, op_type: str, x: Value, y: Value) -> Ref:
    out = b.op(op_type, b.cast(x, torch.bool), b.cast(y, torch.bool), dtype=torch.bool)
    return b.cast(out, b.out.dtype)


@converter(aten.logical_not.default)
def logical_not(b: GraphBuilder, x: Value) -> Ref:
    """logical_not(Tensor self) -> Tensor"""
    return b.op("Not", b.cast(x, b.out.dtype), dtype=b.out.dtype)


@converter(aten.logical_and.default)
def logical_and(b: GraphBuilder, x: Value, y: Value) -> Ref:
    """logical_and(Tensor self, Tensor other) -> Tensor"""
    return _logical(b, "And", x, y)


@converter(aten.logical_or.default)
def logical_or(b: GraphBuilder, x: Value, y: Value) -> Ref:
    """logical_or(Tensor self, Tensor other) -> Tensor"""
    return _logical(b, "Or", x, y)


@converter(aten.logical_xor.default)
def logical_xor(b: GraphBuilder, x: Value, y: Value) -> Ref:
    """logical_xor(Tensor self, Tensor other) -> Tensor"""
    return _logical(b, "Xor", x, y)


@converter(aten.where.self, aten.where.ScalarOther, aten.where.ScalarSelf, aten.where.Scalar)
def where(b: GraphBuilder, condition: Value, x: Operand, y: Operand) -> Ref:
    """where.self(Tensor condition, Tensor self, Tensor other) -> Tensor;
    where.ScalarOther(Tensor condition, Tensor self, Scalar other) -> Tensor;
    where.ScalarSelf(Tensor condition, Scalar self, Tensor other) -> Tensor;
    where.Scalar(Tensor condition, Scalar self, Scalar other) -> Tensor"""
    dtype = b.out.dtype
    return select_where(b, b.cast(condition, torch.bool), as_operand(b, x, dtype), as_operand(b, y, dtype), dtype)


@converter(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(b: GraphBuilder, x: Value, mask: Value, value: Operand) -> Ref:
    """masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor"""
    dtype = b.out.dtype
    return select_where(b, b.cast(mask, torch.bool), as_operand(b, value, dtype), b.cast(x, dtype), dtype)


# -- clamping --------------------------------------------------------------------------------
def clamp_between(b: GraphBuilder, x: Value, low: Operand | None, high: Operand | None) -> Ref:
    """Clip for floats (TensorRT fuses it); Max/Min for integers (Clip is float-only there)."""
    dtype = b.out.dtype
    out: Ref = b.cast(x, dtype)
    if any(isinstance(bound, float) and math.isnan(bound) for bound in (low, high)):
        # torch's clamp to a NaN bound is NaN everywhere; Clip ignores one.
        return b.op("Add", out, b.const(math.nan, dtype), dtype=dtype)
    if dtype.is_floating_point and not isinstance(low, Ref) and not isinstance(high, Ref):
        # A missing bound is given as an infinity: ONNX Runtime and TensorRT's parser take it as
        # the largest finite float, which would clamp an infinite input to ±FLT_MAX.
        return b.op(
            "Clip",
            out,
            b.const(-math.inf if low is None else low, dtype),
            b.const(math.inf if high is None else high, dtype),
            dtype=dtype,
        )
    if low is not None:
        out = b.op("Max", out, as_operand(b, low, dtype), dtype=dtype)
    if high is not None:
        out = b.op("Min", out, as_operand(b, high, dtype), dtype=dtype)
    return out


@converter(aten.clamp.default, aten.clamp.Tensor)
def clamp(b: GraphBuilder, x: Value, min: Operand | None = None, max: Operand | None = None) -> Ref:
    """clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor"""
    return clamp_between(b, x, min, max)


@converter(aten.clamp_min.default, aten.clamp_min.Tensor)
def clamp_min(b: GraphBuilder, x: Value, min: Operand) -> Ref:
    """clamp_min(Tensor self, Scalar min) -> Tensor; clamp_min.Tensor(Tensor self, Tensor min) -> Tensor"""
    return clamp_between(b, x, min, None)


@converter(aten.clamp_max.default, aten.clamp_max.Tensor)
def clamp_max(b: GraphBuilder, x: Value, max: Operand) -> Ref:
    """clamp_max(Tensor self, Scalar max) -> Tensor; clamp_max.Tensor(Tensor self, Tensor max) -> Tensor"""
    return clamp_between(b, x, None, max)
