"""Bitwise ops and shifts.

Opset 17 has no integer bitwise ops (BitwiseAnd/Or/Xor/Not arrive in opset 18, BitShift takes
unsigned types only) and TensorRT's parser supports none of them, so and/or/xor/not run on bool
tensors (masks) only, as And/Or/Xor/Not. Shifts by a constant are multiplications and floor
divisions by a power of two on int32/int64.
"""

from __future__ import annotations

from typing import Optional

import torch

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.dims import input_val
from converters.core.registry import converter
from converters.core.target import TrtTarget

aten = torch.ops.aten
Operand = Value | int | bool


def _bools_only(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    for arg in node.all_input_nodes:
        if arg.meta["val"].dtype != torch.bool:
            return (
                f"{node.target} on {arg.meta['val'].dtype}: ONNX opset 17 and TensorRT have bitwise ops for bool only"
            )
    scalars = [a for a in node.args if not isinstance(a, torch.fx.Node)]
    if any(not isinstance(s, bool) for s in scalars):
        return f"{node.target} with a non-bool scalar"
    return None


def _logic(b: GraphBuilder, op_type: str, x: Value, y: Operand) -> Ref:
    other = y if isinstance(y, Ref) else b.const(y, torch.bool)
    return b.op(op_type, x, other, dtype=torch.bool)


@converter(aten.bitwise_and.Tensor, aten.bitwise_and.Scalar, capability=_bools_only)
def bitwise_and(b: GraphBuilder, x: Value, y: Operand) -> Ref:
    """bitwise_and.Tensor(Tensor self, Tensor other) -> Tensor; bitwise_and.Scalar(Tensor self, Scalar other)"""
    return _logic(b, "And", x, y)


@converter(aten.bitwise_or.Tensor, aten.bitwise_or.Scalar, capability=_bools_only)
def bitwise_or(b: GraphBuilder, x: Value, y: Operand) -> Ref:
    """bitwise_or.Tensor(Tensor self, Tensor other) -> Tensor; bitwise_or.Scalar(Tensor self, Scalar other)"""
    return _logic(b, "Or", x, y)


@converter(aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar, capability=_bools_only)
def bitwise_xor(b: GraphBuilder, x: Value, y: Operand) -> Ref:
    """bitwise_xor.Tensor(Tensor self, Tensor other) -> Tensor; bitwise_xor.Scalar(Tensor self, Scalar other)"""
    return _logic(b, "Xor", x, y)


@converter(aten.bitwise_and.Scalar_Tensor, capability=_bools_only)
def bitwise_and_scalar_tensor(b: GraphBuilder, x: bool, y: Value) -> Ref:
    """bitwise_and.Scalar_Tensor(Scalar self, Tensor other) -> Tensor  (commutes: the Scalar overload swapped)"""
    return _logic(b, "And", y, x)


@converter(aten.bitwise_or.Scalar_Tensor, capability=_bools_only)
def bitwise_or_scalar_tensor(b: GraphBuilder, x: bool, y: Value) -> Ref:
    """bitwise_or.Scalar_Tensor(Scalar self, Tensor other) -> Tensor"""
    return _logic(b, "Or", y, x)


@converter(aten.bitwise_xor.Scalar_Tensor, capability=_bools_only)
def bitwise_xor_scalar_tensor(b: GraphBuilder, x: bool, y: Value) -> Ref:
    """bitwise_xor.Scalar_Tensor(Scalar self, Tensor other) -> Tensor"""
    return _logic(b, "Xor", y, x)


@converter(aten.bitwise_not.default, capability=_bools_only)
def bitwise_not(b: GraphBuilder, x: Value) -> Ref:
    """bitwise_not(Tensor self) -> Tensor"""
    return b.op("Not", x, dtype=torch.bool)


_BITS = {torch.int32: 32, torch.int64: 64}


def _constant_shift(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    dtype = input_val(node, 0).dtype
    if dtype not in _BITS:
        return f"shifts of {dtype} (TensorRT computes on int32/int64 only)"
    shift = node.args[1]
    # TensorRT 8.6 computes int64 as int32, where 2**31 does not fit.
    limit = _BITS[dtype] if dtype == torch.int32 or trt_target.int64_native else 31
    if not isinstance(shift, int) or not 0 <= shift < limit:
        return f"shift of {dtype} by {shift!r}: only a constant in [0, {limit}) on {trt_target.label}"
    return None


@converter(aten.__lshift__.Scalar, aten.bitwise_left_shift.Tensor_Scalar, capability=_constant_shift)
def left_shift(b: GraphBuilder, x: Value, shift: int) -> Ref:
    """__lshift__.Scalar(Tensor self, Scalar other) -> Tensor;
    bitwise_left_shift.Tensor_Scalar(Tensor self, Scalar other) -> Tensor

    x * 2**shift: two's-complement multiplication wraps exactly as the shift does.
    """
    factor = 1 << shift
    if shift == _BITS[x.dtype] - 1:
        factor = -factor  # 2**(bits-1) is the wrapped minimum: the same bit pattern
    return b.op("Mul", x, b.const(factor, x.dtype), dtype=x.dtype)


@converter(aten.__rshift__.Scalar, aten.bitwise_right_shift.Tensor_Scalar, capability=_constant_shift)
def right_shift(b: GraphBuilder, x: Value, shift: int) -> Ref:
    """__rshift__.Scalar(Tensor self, Scalar other) -> Tensor;
    bitwise_right_shift.Tensor_Scalar(Tensor self, Scalar other) -> Tensor

    Arithmetic shift = floor division by 2**shift: subtract the floor remainder (Mod with fmod=0
    takes the divisor's sign), then divide exactly.
    """
    dtype = x.dtype
    if shift == 0:
        return b.op("Identity", x, dtype=dtype)
    zero = b.const(0, dtype)
    if shift == _BITS[dtype] - 1:
        # 2**(bits-1) is not representable; only the sign survives.
        return b.op("Where", b.op("Less", x, zero), b.const(-1, dtype), zero, dtype=dtype)
    divisor = b.const(1 << shift, dtype)
    exact = b.op("Sub", x, b.op("Mod", x, divisor, fmod=0))
    return b.op("Div", exact, divisor, dtype=dtype)
