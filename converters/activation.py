"""Activations and softmax."""
from __future__ import annotations

import math

import torch

from converters._common import float_inputs
from converters.builder import GraphBuilder, Value
from converters.elementwise import clamp_between
from converters.registry import converter

aten = torch.ops.aten


@converter(aten.relu.default)
def relu(b: GraphBuilder, x: Value) -> Value:
    """relu(Tensor self) -> Tensor"""
    if not x.dtype.is_floating_point:  # type: ignore[union-attr]
        # Neither ONNX Runtime nor TensorRT has an integer Relu kernel.
        return b.op("Max", x, b.const(0, x.dtype), dtype=x.dtype)  # type: ignore[arg-type]
    return b.op("Relu", x, dtype=x.dtype)


@converter(aten.sigmoid.default)
def sigmoid(b: GraphBuilder, x: Value) -> Value:
    """sigmoid(Tensor self) -> Tensor"""
    return b.op("Sigmoid", b.cast(x, b.out.dtype), dtype=b.out.dtype)


@converter(aten.tanh.default)
def tanh(b: GraphBuilder, x: Value) -> Value:
    """tanh(Tensor self) -> Tensor"""
    return b.op("Tanh", b.cast(x, b.out.dtype), dtype=b.out.dtype)


@converter(aten.gelu.default, capability=float_inputs)
def gelu(b: GraphBuilder, x: Value, *, approximate: str = "none") -> Value:
    """gelu(Tensor self, *, str approximate='none') -> Tensor

    Written as its formula: the ONNX Gelu op is opset 20, which TensorRT 8.6 cannot parse;
    TensorRT fuses the Erf/Tanh pattern itself.
    """
    dtype = x.dtype
    half, one = b.const(0.5, dtype), b.const(1.0, dtype)
    if approximate == "tanh":
        cube = b.op("Mul", b.op("Mul", x, x), x)
        inner = b.op("Add", x, b.op("Mul", cube, b.const(0.044715, dtype)))
        inner = b.op("Mul", inner, b.const(math.sqrt(2 / math.pi), dtype))
        gate = b.op("Add", b.op("Tanh", inner), one)
    else:
        gate = b.op("Add", b.op("Erf", b.op("Mul", x, b.const(1 / math.sqrt(2), dtype))), one)
    return b.op("Mul", b.op("Mul", x, half), gate, dtype=dtype)


@converter(aten.silu.default, capability=float_inputs)
def silu(b: GraphBuilder, x: Value) -> Value:
    """silu(Tensor self) -> Tensor"""
    return b.op("Mul", x, b.op("Sigmoid", x), dtype=x.dtype)


@converter(aten.hardsigmoid.default, capability=float_inputs)
def hardsigmoid(b: GraphBuilder, x: Value) -> Value:
    """hardsigmoid(Tensor self) -> Tensor"""
    return b.op("HardSigmoid", x, alpha=1 / 6, beta=0.5, dtype=x.dtype)


@converter(aten.hardswish.default, capability=float_inputs)
def hardswish(b: GraphBuilder, x: Value) -> Value:
    """hardswish(Tensor self) -> Tensor"""
    return b.op("HardSwish", x, dtype=x.dtype)


@converter(aten.hardtanh.default)
def hardtanh(b: GraphBuilder, x: Value, min_val: float = -1.0, max_val: float = 1.0) -> Value:
    """hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor  (integers: Max/Min)"""
    return clamp_between(b, x, min_val, max_val)


@converter(aten.leaky_relu.default, capability=float_inputs)
def leaky_relu(b: GraphBuilder, x: Value, negative_slope: float = 0.01) -> Value:
    """leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor"""
    return b.op("LeakyRelu", x, alpha=float(negative_slope), dtype=x.dtype)


@converter(aten.elu.default, capability=float_inputs)
def elu(b: GraphBuilder, x: Value, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0) -> Value:
    """elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor

    scale * (x if x > 0 else alpha * (exp(input_scale * x) - 1)): input_scale acts on the
    negative side only, so with it Elu gives only that side and the positive side is x.
    """
    dtype = x.dtype
    if input_scale == 1:
        y = b.op("Elu", x, alpha=float(alpha), dtype=dtype)
    else:
        negative = b.op("Elu", b.op("Mul", x, b.const(input_scale, dtype)), alpha=float(alpha))
        y = b.op("Where", b.op("Greater", x, b.const(0, dtype)), x, negative, dtype=dtype)
    return y if scale == 1 else b.op("Mul", y, b.const(scale, dtype), dtype=dtype)


def _along(b: GraphBuilder, op_type: str, x: Value, dim: int) -> Value:
    """Softmax/LogSoftmax along `dim`; a 0-d input as one element (ONNX wants rank >= 1)."""
    dtype = b.out.dtype
    x = b.cast(x, dtype)
    if x.rank == 0:
        one = b.op(op_type, b.op("Unsqueeze", x, b.ints([0])), axis=0)
        return b.op("Squeeze", one, b.ints([0]), dtype=dtype)
    return b.op(op_type, x, axis=dim, dtype=dtype)


@converter(aten._softmax.default, capability=float_inputs)
def softmax(b: GraphBuilder, x: Value, dim: int, half_to_float: bool) -> Value:
    """_softmax(Tensor self, int dim, bool half_to_float) -> Tensor"""
    return _along(b, "Softmax", x, dim)


@converter(aten._log_softmax.default, capability=float_inputs)
def log_softmax(b: GraphBuilder, x: Value, dim: int, half_to_float: bool) -> Value:
    """_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor"""
    return _along(b, "LogSoftmax", x, dim)
