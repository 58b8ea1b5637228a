"""More activations: softplus family, celu/relu6/prelu/rrelu, glu, logit, threshold.

Composite ones (log_sigmoid, prelu, relu6, celu, rrelu, …) stay whole at capture because they
have a converter here (see trt_lower/decompositions.py).
"""
from __future__ import annotations

from typing import Optional

import torch

from converters._common import all_of, float_inputs, normalize_dim, only_first_output_used
from converters._dims import INT64_MAX, dim_size, node_arg
from converters.builder import GraphBuilder, Value
from converters.elementwise import clamp_between
from converters.registry import converter

aten = torch.ops.aten


@converter(aten.softplus.default, capability=float_inputs)
def softplus(b: GraphBuilder, x: Value, beta: float = 1, threshold: float = 20) -> Value:
    """softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor

    log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (as torch; it also keeps
    TensorRT's Softplus away from overflowing exp).
    """
    dtype = x.dtype
    bx = x if beta == 1 else b.op("Mul", x, b.const(beta, dtype))  # type: ignore[arg-type]
    soft = b.op("Softplus", bx)
    if beta != 1:
        soft = b.op("Div", soft, b.const(beta, dtype))  # type: ignore[arg-type]
    return b.op("Where", b.op("Greater", bx, b.const(threshold, dtype)), x, soft, dtype=dtype)  # type: ignore[arg-type]


@converter(aten.mish.default, capability=float_inputs)
def mish(b: GraphBuilder, x: Value) -> Value:
    """mish(Tensor self) -> Tensor  (x * tanh(softplus(x)); the ONNX Mish op is opset 18)"""
    return b.op("Mul", x, b.op("Tanh", b.op("Softplus", x)), dtype=x.dtype)


def _log_sigmoid(b: GraphBuilder, x: Value) -> Value:
    """min(x, 0) - log(1 + exp(-|x|)): exp never overflows."""
    zero, one = b.const(0, x.dtype), b.const(1, x.dtype)  # type: ignore[arg-type]
    tail = b.op("Log", b.op("Add", one, b.op("Exp", b.op("Neg", b.op("Abs", x)))))
    return b.op("Sub", b.op("Min", x, zero), tail, dtype=x.dtype)


@converter(aten.log_sigmoid.default, capability=float_inputs)
def log_sigmoid(b: GraphBuilder, x: Value) -> Value:
    """log_sigmoid(Tensor self) -> Tensor"""
    return _log_sigmoid(b, x)


@converter(aten.log_sigmoid_forward.default, capability=all_of(float_inputs, only_first_output_used))
def log_sigmoid_forward(b: GraphBuilder, x: Value) -> tuple[Value, None]:
    """log_sigmoid_forward(Tensor self) -> (Tensor output, Tensor buffer)  (the buffer is for backward)"""
    return _log_sigmoid(b, x), None


@converter(aten.celu.default, capability=float_inputs)
def celu(b: GraphBuilder, x: Value, alpha: float = 1.0) -> Value:
    """celu(Tensor self, Scalar alpha=1.0) -> Tensor

    alpha * elu(x / alpha): ONNX's Celu op takes float32 only, Elu any float type.
    """
    if alpha == 1:
        return b.op("Elu", x, alpha=1.0, dtype=x.dtype)
    scale = b.const(alpha, x.dtype)  # type: ignore[arg-type]
    return b.op("Mul", b.op("Elu", b.op("Div", x, scale), alpha=1.0), scale, dtype=x.dtype)


@converter(aten.relu6.default)
def relu6(b: GraphBuilder, x: Value) -> Value:
    """relu6(Tensor self) -> Tensor"""
    return clamp_between(b, x, 0, 6)


@converter(aten.prelu.default, capability=float_inputs)
def prelu(b: GraphBuilder, x: Value, weight: Value) -> Value:
    """prelu(Tensor self, Tensor weight) -> Tensor

    One slope per channel (dim 1): the weight becomes (C, 1, …, 1) to broadcast from there.
    """
    slope = weight
    if x.rank > 2:
        slope = b.op("Reshape", weight, b.ints([-1] + [1] * (x.rank - 2)), dtype=weight.dtype)
    elif x.rank == 0:  # a 0-d input takes the single slope; PRelu's slope must not outrank x
        slope = b.op("Reshape", weight, b.ints([]), dtype=weight.dtype)
    return b.op("PRelu", x, slope, dtype=x.dtype)


@converter(aten._prelu_kernel.default, capability=float_inputs)
def prelu_kernel(b: GraphBuilder, x: Value, weight: Value) -> Value:
    """_prelu_kernel(Tensor self, Tensor weight) -> Tensor  (weight already broadcastable)"""
    dtype = b.out.dtype
    negative = b.op("Mul", x, weight)
    return b.op("Where", b.op("Greater", x, b.const(0, x.dtype)), x, negative, dtype=dtype)  # type: ignore[arg-type]


def _eval_mode(node: torch.fx.Node) -> Optional[str]:
    if node_arg(node, 3, "training", False):
        return "rrelu in training mode draws random slopes"
    return None


@converter(aten.rrelu.default, capability=all_of(float_inputs, _eval_mode))
def rrelu(b: GraphBuilder, x: Value, lower: float = 1 / 8, upper: float = 1 / 3, training: bool = False,
          generator: object = None) -> Value:
    """rrelu(Tensor self, Scalar lower=0.125, Scalar upper=0.3333333333333333, bool training=False,
    Generator? generator=None) -> Tensor  (in eval: leaky_relu with the mean slope)"""
    return b.op("LeakyRelu", x, alpha=(lower + upper) / 2, dtype=x.dtype)


@converter(aten.glu.default, capability=float_inputs)
def glu(b: GraphBuilder, x: Value, dim: int = -1) -> Value:
    """glu(Tensor self, int dim=-1) -> Tensor  (first half * sigmoid(second half))"""
    axis = normalize_dim(dim, x.rank)
    size = x.shape[axis]  # type: ignore[index]
    half = b.ints([size // 2]) if isinstance(size, int) else b.op("Div", dim_size(b, x, axis), b.ints([2]))
    axes = b.ints([axis])
    first = b.op("Slice", x, b.ints([0]), half, axes)
    second = b.op("Slice", x, half, b.ints([INT64_MAX]), axes)
    return b.op("Mul", first, b.op("Sigmoid", second), dtype=x.dtype)


@converter(aten.logit.default)
def logit(b: GraphBuilder, x: Value, eps: float | None = None) -> Value:
    """logit(Tensor self, float? eps=None) -> Tensor  (log(x / (1 - x)), x clamped to [eps, 1 - eps])"""
    dtype = b.out.dtype
    xv = b.cast(x, dtype)
    if eps is not None:
        # torch's kernel: x < eps ? eps : (x > 1 - eps ? 1 - eps : x), which differs from Clip
        # when eps > 0.5 (bounds crossed).
        low, high = b.const(eps, dtype), b.const(1 - eps, dtype)
        xv = b.op("Where", b.op("Less", xv, low), low, b.op("Where", b.op("Greater", xv, high), high, xv))
    return b.op("Log", b.op("Div", xv, b.op("Sub", b.const(1, dtype), xv)), dtype=dtype)


@converter(aten.threshold.default, capability=float_inputs)
def threshold(b: GraphBuilder, x: Value, threshold: float, value: float) -> Value:
    """threshold(Tensor self, Scalar threshold, Scalar value) -> Tensor  (x where x > threshold, else value)"""
    dtype = x.dtype
    above = b.op("Greater", x, b.const(threshold, dtype))  # type: ignore[arg-type]
    return b.op("Where", above, x, b.const(value, dtype), dtype=dtype)  # type: ignore[arg-type]
