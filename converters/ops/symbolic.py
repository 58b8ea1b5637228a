"""Sizes known only at run time (dynamic shapes): sym_size and Python's arithmetic on them.

A size is a 0-d int64 value computed from Shape, so an engine derives every size from its own
inputs (TensorRT's shape tensors) instead of receiving it from outside.
"""

from __future__ import annotations

import operator

import torch

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.dims import never_negative
from converters.core.registry import converter

aten = torch.ops.aten
Size = Ref | int


def _size(b: GraphBuilder, x: Size) -> Ref:
    return x if isinstance(x, Ref) else b.const(x, torch.int64)


@converter(aten.sym_size.int)
def sym_size(b: GraphBuilder, x: Value, dim: int) -> Ref:
    """sym_size.int(Tensor self, int dim) -> SymInt"""
    return b.op("Gather", b.op("Shape", x), b.const(dim, torch.int64), axis=0, dtype=torch.int64, shape=())


def _arith(b: GraphBuilder, op_type: str, x: Size, y: Size) -> Ref:
    return b.op(op_type, _size(b, x), _size(b, y), dtype=torch.int64, shape=())


@converter(operator.add)
def add(b: GraphBuilder, x: Size, y: Size) -> Ref:
    """SymInt + SymInt"""
    return _arith(b, "Add", x, y)


@converter(operator.sub)
def sub(b: GraphBuilder, x: Size, y: Size) -> Ref:
    """SymInt - SymInt"""
    return _arith(b, "Sub", x, y)


@converter(operator.neg)
def neg(b: GraphBuilder, x: Size) -> Ref:
    """-SymInt (as 0 - x: integer Sub is in every TensorRT's tables)"""
    return _arith(b, "Sub", 0, x)


@converter(operator.mul)
def mul(b: GraphBuilder, x: Size, y: Size) -> Ref:
    """SymInt * SymInt"""
    return _arith(b, "Mul", x, y)


@converter(torch.sym_max)
def sym_max(b: GraphBuilder, x: Size, y: Size) -> Ref:
    """sym_max(SymInt, SymInt), what `max()` of two sizes traces to"""
    return _arith(b, "Max", x, y)


@converter(torch.sym_min)
def sym_min(b: GraphBuilder, x: Size, y: Size) -> Ref:
    """sym_min(SymInt, SymInt), what `min()` of two sizes traces to"""
    return _arith(b, "Min", x, y)


@converter(operator.floordiv)
def floordiv(b: GraphBuilder, x: Size, y: Size) -> Ref:
    """SymInt // SymInt

    ONNX's integer Div truncates, which is Python's floor only where neither side is negative
    (`(s0 - 5) // 2`): elsewhere (x - x % y) / y, exact because ONNX's integer Mod, as Python's %,
    takes the divisor's sign."""
    if all(never_negative(a) for a in b.converting.args):
        return _arith(b, "Div", x, y)
    return _arith(b, "Div", _arith(b, "Sub", x, _arith(b, "Mod", x, y)), y)


@converter(operator.mod)
def mod(b: GraphBuilder, x: Size, y: Size) -> Ref:
    """SymInt % SymInt (ONNX's integer Mod takes the divisor's sign, as Python's % does)"""
    return _arith(b, "Mod", x, y)
