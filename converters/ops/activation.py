"""Activations and softmax.

Composite activations (log_sigmoid, prelu, relu6, celu, rrelu, …) stay whole at capture because
they have a converter here (see trt_lower/capture/decompositions.py).
"""

from __future__ import annotations

import math
from typing import Optional

import torch

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.common import all_of, float_inputs, normalize_dim, only_first_output_used
from converters.core.dims import INT64_MAX, dim_size, node_arg
from converters.core.registry import converter
from converters.core.target import TrtTarget
from converters.ops.elementwise import clamp_between

aten = torch.ops.aten


@converter(aten.relu.default)
def relu(b: GraphBuilder, x: Value) -> Ref:
    """relu(Tensor self) -> Tensor"""
    if not x.dtype.is_floating_point:
        # Neither ONNX Runtime nor TensorRT has an integer Relu kernel.
        return b.op("Max", x, b.const(0, x.dtype), dtype=x.dtype)
    return b.op("Relu", x, dtype=x.dtype)


@converter(aten.sigmoid.default)
def sigmoid(b: GraphBuilder, x: Value) -> Ref:
    """sigmoid(Tensor self) -> Tensor"""
    return b.op("Sigmoid", b.cast(x, b.out.dtype), dtype=b.out.dtype)


@converter(aten.tanh.default)
def tanh(b: GraphBuilder, x: Value) -> Ref:
    """tanh(Tensor self) -> Tensor"""
    return b.op("Tanh", b.cast(x, b.out.dtype), dtype=b.out.dtype)


@converter(aten.gelu.default, capability=float_inputs)
def gelu(b: GraphBuilder, x: Value, *, approximate: str = "none") -> Ref:
    """gelu(Tensor self, *, str approximate='none') -> Tensor

    Written as its formula: the ONNX Gelu op is opset 20, which TensorRT 8.6 cannot parse;
    TensorRT fuses the Erf/Tanh pattern itself. The node order and constants are the ones ONNX
    Runtime's GeluFusion (Div by sqrt(2)) and FastGeluFusion (0.7978845834732056 * x *
    (1 + 0.044715 * x * x)) match, so its CPU sessions run one fused Gelu/FastGelu kernel.
    """
    dtype = x.dtype
    half, one = b.const(0.5, dtype), b.const(1.0, dtype)
    if approximate == "tanh":
        # sqrt(2/pi) * (x + 0.044715 x^3), factored as FastGeluFusion's first formula.
        cubic = b.op("Add", b.op("Mul", b.op("Mul", x, b.const(0.044715, dtype)), x), one)
        inner = b.op("Mul", b.op("Mul", x, b.const(math.sqrt(2 / math.pi), dtype)), cubic)
        gate = b.op("Add", b.op("Tanh", inner), one)
    else:
        gate = b.op("Add", b.op("Erf", b.op("Div", x, b.const(math.sqrt(2), dtype))), one)
    return b.op("Mul", b.op("Mul", x, half), gate, dtype=dtype)


@converter(aten.silu.default, capability=float_inputs)
def silu(b: GraphBuilder, x: Value) -> Ref:
    """silu(Tensor self) -> Tensor"""
    return b.op("Mul", x, b.op("Sigmoid", x), dtype=x.dtype)


@converter(aten.hardsigmoid.default, capability=float_inputs)
def hardsigmoid(b: GraphBuilder, x: Value) -> Ref:
    """hardsigmoid(Tensor self) -> Tensor"""
    return b.op("HardSigmoid", x, alpha=1 / 6, beta=0.5, dtype=x.dtype)


@converter(aten.hardswish.default, capability=float_inputs)
def hardswish(b: GraphBuilder, x: Value) -> Ref:
    """hardswish(Tensor self) -> Tensor"""
    return b.op("HardSwish", x, dtype=x.dtype)


@converter(aten.hardtanh.default)
def hardtanh(b: GraphBuilder, x: Value, min_val: float = -1.0, max_val: float = 1.0) -> Ref:
    """hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor  (integers: Max/Min)"""
    return clamp_between(b, x, min_val, max_val)


@converter(aten.relu6.default)
def relu6(b: GraphBuilder, x: Value) -> Ref:
    """relu6(Tensor self) -> Tensor"""
    return clamp_between(b, x, 0, 6)


@converter(aten.leaky_relu.default, capability=float_inputs)
def leaky_relu(b: GraphBuilder, x: Value, negative_slope: float = 0.01) -> Ref:
    """leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor"""
    return b.op("LeakyRelu", x, alpha=float(negative_slope), dtype=x.dtype)


def _eval_mode(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    if node_arg(node, 3, "training", False):
        return "rrelu in training mode draws random slopes"
    return None


@converter(aten.rrelu.default, capability=all_of(float_inputs, _eval_mode))
def rrelu(
    b: GraphBuilder,
    x: Value,
    lower: float = 1 / 8,
    upper: float = 1 / 3,
    training: bool = False,
    generator: object = None,
) -> Ref:
    """rrelu(Tensor self, Scalar lower=0.125, Scalar upper=0.3333333333333333, bool training=False,
    Generator? generator=None) -> Tensor  (in eval: leaky_relu with the mean slope)"""
    return leaky_relu(b, x, (lower + upper) / 2)


@converter(aten.elu.default, capability=float_inputs)
def elu(b: GraphBuilder, x: Value, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0) -> Ref:
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


@converter(aten.celu.default, capability=float_inputs)
def celu(b: GraphBuilder, x: Value, alpha: float = 1.0) -> Ref:
    """celu(Tensor self, Scalar alpha=1.0) -> Tensor

    alpha * elu(x / alpha): ONNX's Celu op takes float32 only, Elu any float type.
    """
    if alpha == 1:
        return b.op("Elu", x, alpha=1.0, dtype=x.dtype)
    scale = b.const(alpha, x.dtype)
    return b.op("Mul", b.op("Elu", b.op("Div", x, scale), alpha=1.0), scale, dtype=x.dtype)


@converter(aten.softplus.default, capability=float_inputs)
def softplus(b: GraphBuilder, x: Value, beta: float = 1, threshold: float = 20) -> Ref:
    """softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor

    log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (as torch; it also keeps
    TensorRT's Softplus away from overflowing exp).
    """
    dtype = x.dtype
    bx = x if beta == 1 else b.op("Mul", x, b.const(beta, dtype))
    soft = b.op("Softplus", bx)
    if beta != 1:
        soft = b.op("Div", soft, b.const(beta, dtype))
    return b.op("Where", b.op("Greater", bx, b.const(threshold, dtype)), x, soft, dtype=dtype)


@converter(aten.mish.default, capability=float_inputs)
def mish(b: GraphBuilder, x: Value) -> Ref:
    """mish(Tensor self) -> Tensor  (x * tanh(softplus(x)); the ONNX Mish op is opset 18)"""
    return b.op("Mul", x, b.op("Tanh", b.op("Softplus", x)), dtype=x.dtype)


def _log_sigmoid(b: GraphBuilder, x: Value) -> Ref:
    """min(x, 0) - log(1 + exp(-|x|)): exp never overflows."""
    zero, one = b.const(0, x.dtype), b.const(1, x.dtype)
    tail = b.op("Log", b.op("Add", one, b.op("Exp", b.op("Neg", b.op("Abs", x)))))
    return b.op("Sub", b.op("Min", x, zero), tail, dtype=x.dtype)


@converter(aten.log_sigmoid.default, capability=float_inputs)
def log_sigmoid(b: GraphBuilder, x: Value) -> Ref:
    """log_sigmoid(Tensor self) -> Tensor"""
    return _log_sigmoid(b, x)


@converter(aten.log_sigmoid_forward.default, capability=all_of(float_inputs, only_first_output_used))
def log_sigmoid_forward(b: GraphBuilder, x: Value) -> tuple[Ref, None]:
    """log_sigmoid_forward(Tensor self) -> (Tensor output, Tensor buffer)  (the buffer is for backward)"""
    return _log_sigmoid(b, x), None


@converter(aten.prelu.default, capability=float_inputs)
def prelu(b: GraphBuilder, x: Value, weight: Value) -> Ref:
    """prelu(Tensor self, Tensor weight) -> Tensor

    One slope per channel (dim 1): the weight becomes (C, 1, …, 1) to broadcast from there.
    """
    slope: Ref = weight
    if x.rank > 2:
        slope = b.op("Reshape", weight, b.ints([-1] + [1] * (x.rank - 2)), dtype=weight.dtype)
    elif x.rank == 0:  # a 0-d input takes the single slope; PRelu's slope must not outrank x
        slope = b.op("Reshape", weight, b.ints([]), dtype=weight.dtype)
    return b.op("PRelu", x, slope, dtype=x.dtype)


@converter(aten._prelu_kernel.default, capability=float_inputs)
def prelu_kernel(b: GraphBuilder, x: Value, weight: Value) -> Ref:
    """_prelu_kernel(Tensor self, Tensor weight) -> Tensor  (weight already broadcastable)"""
    dtype = b.out.dtype
    negative = b.op("Mul", x, weight)
    return b.op("Where", b.op("Greater", x, b.const(0, x.dtype)), x, negative, dtype=dtype)


@converter(aten.glu.default, capability=float_inputs)
def glu(b: GraphBuilder, x: Value, dim: int = -1) -> Ref:
    """glu(Tensor self, int dim=-1) -> Tensor  (first half * sigmoid(second half))"""
    axis = normalize_dim(dim, x.rank)
    size = x.shape[axis]
    half = b.ints([size // 2]) if isinstance(size, int) else b.op("Div", dim_size(b, x, axis), b.ints([2]))
    axes = b.ints([axis])
    first = b.op("Slice", x, b.ints([0]), half, axes)
    second = b.op("Slice", x, half, b.ints([INT64_MAX]), axes)
    return b.op("Mul", first, b.op("Sigmoid", second), dtype=x.dtype)


@converter(aten.logit.default)
def logit(b: GraphBuilder, x: Value, eps: float | None = None) -> Ref:
    """logit(Tensor self, float? eps=None) -> Tensor  (log(x / (1 - x)), x clamped to [eps, 1 - eps])"""
    dtype = b.out.dtype
    xv: Ref = b.cast(x, dtype)
    if eps is not None:
        # torch's kernel: x < eps ? eps : (x > 1 - eps ? 1 - eps : x), which differs from Clip
        # when eps > 0.5 (bounds crossed).
        low, high = b.const(eps, dtype), b.const(1 - eps, dtype)
        xv = b.op("Where", b.op("Less", xv, low), low, b.op("Where", b.op("Greater", xv, high), high, xv))
    return b.op("Log", b.op("Div", xv, b.op("Sub", b.const(1, dtype), xv)), dtype=dtype)


@converter(aten.threshold.default, capability=float_inputs)
def threshold(b: GraphBuilder, x: Value, threshold: float, value: float) -> Ref:
    """threshold(Tensor self, Scalar threshold, Scalar value) -> Tensor  (value where x <= threshold, else x:
    a NaN stays NaN)"""
    dtype = x.dtype
    at_most = b.op("LessOrEqual", x, b.const(threshold, dtype))
    return b.op("Where", at_most, b.const(value, dtype), x, dtype=dtype)


def _along(b: GraphBuilder, op_type: str, x: Value, dim: int) -> Ref:
    """Softmax/LogSoftmax along `dim`; a 0-d input as one element (ONNX wants rank >= 1)."""
    dtype = b.out.dtype
    x = b.cast(x, dtype)
    if x.rank == 0:
        one = b.op(op_type, b.op("Unsqueeze", x, b.ints([0])), axis=0)
        return b.op("Squeeze", one, b.ints([0]), dtype=dtype)
    return b.op(op_type, x, axis=dim, dtype=dtype)


@converter(aten._softmax.default, capability=float_inputs)
def softmax(b: GraphBuilder, x: Value, dim: int, half_to_float: bool) -> Ref:
    """_softmax(Tensor self, int dim, bool half_to_float) -> Tensor"""
    return _along(b, "Softmax", x, dim)


@converter(aten._log_softmax.default, capability=float_inputs)
def log_softmax(b: GraphBuilder, x: Value, dim: int, half_to_float: bool) -> Ref:
    """_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor"""
    return _along(b, "LogSoftmax", x, dim)


def _inference_dropout(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    p, train = node_arg(node, 1, "p"), node_arg(node, 2, "train")
    if train is not False and p != 0:
        return f"dropout in training mode (train={train}, p={p}) draws random masks"
    return None


@converter(aten.native_dropout.default, capability=_inference_dropout)
def native_dropout(b: GraphBuilder, x: Value, p: float, train: bool | None) -> tuple[Ref, Ref]:
    """native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)

    Inference (or p = 0): the input unchanged and a mask that keeps every element.
    """
    keep = b.op("Expand", b.const(True, torch.bool), b.op("Shape", x), dtype=torch.bool)
    return b.op("Identity", x, dtype=x.dtype), keep
