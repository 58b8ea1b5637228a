"""FP8 (E4M3): the forms users bring, as opset-19 QuantizeLinear/DequantizeLinear to and from
FLOAT8E4M3FN, the way TensorRT's parser takes them (explicit quantization, zero point 0).

- torchao's float8 quantize/dequantize ops (`quantize_affine_float8_non_decomposed`, what
  trt_lower.quantization.quantize(dtype="fp8") writes): x / scale, saturated to +-448, rounded to
  the nearest FP8 value; the scale per tensor, or per output channel on a weight.
- casts to and from float8_e4m3fn (ModelOpt-style fake quantization,
  `(x / s).clamp(-448, 448).to(torch.float8_e4m3fn).to(x.dtype) * s`): QuantizeLinear and
  DequantizeLinear of scale 1, the division and product by `s` left as the ops they are. Torch's
  cast saturates to +-448 and rounds to nearest even as QuantizeLinear (saturate=1) does.

A quantized constant (a weight) is folded into an FP8 initializer, computed by the torch op
itself. FP8 values live only between a quantize and its dequantizes, or are weights: no engine
takes or gives them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.dtypes import FP8
from converters.core.fold import constant_value
from converters.core.quantized import FP8_DEQUANTIZE_OP, FP8_QUANTIZE_OP, constant_of, fp8_dequantizes, fp8_quantizes
from converters.core.registry import converter
from converters.core.target import TrtTarget

# Opset 19 gave QuantizeLinear/DequantizeLinear their FP8 types.
FP8_OPSET = 19
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def _boundary_reason(node: torch.fx.Node) -> str | None:
    """FP8 lives only between a quantize and its dequantizes, or is a weight."""
    if fp8_dequantizes(node):
        x = node.args[0]
        if constant_of(node, x) is None and not (isinstance(x, torch.fx.Node) and fp8_quantizes(x)):
            return "it dequantizes a float8_e4m3fn tensor that is neither a weight nor quantized in the graph"
    elif other := [u for u in node.users if not fp8_dequantizes(u)]:
        return f"its float8_e4m3fn result is read by {other[0].target}, not only by dequantizes"
    return None


def _dtype_reason(node: torch.fx.Node) -> str | None:
    x, out = node.args[0], node.meta["val"]
    other = out if fp8_dequantizes(node) else x.meta["val"] if isinstance(x, torch.fx.Node) else None
    if isinstance(other, torch.Tensor) and other.dtype not in _FLOATS:
        return (
            f"a cast between float8_e4m3fn and {str(other.dtype).removeprefix('torch.')}: TensorRT "
            "quantizes float32/float16/bfloat16 only"
        )
    return None


def _scale_reason(node: torch.fx.Node) -> str | None:
    """torchao's ops: a constant positive scale, per tensor or per output channel of a weight."""
    x, scale = node.args[:2]
    scales = constant_of(node, scale)
    if scales is None:
        return "the scale is computed at run time: TensorRT needs constant quantization scales"
    if not bool((scales > 0).all()) or not bool(scales.isfinite().all()):
        return "quantization scales must be positive and finite"
    if scales.numel() == 1:
        return None
    if constant_of(node, x) is None and not fp8_dequantizes(node):
        return "per-channel quantization of an activation: TensorRT quantizes activations per tensor"
    if _channel_axis(node.meta["val"].shape, scales.shape) is None:
        return (
            f"FP8 scales of shape {tuple(scales.shape)} for a tensor of shape {tuple(node.meta['val'].shape)}: "
            "TensorRT takes one scale per tensor or per output channel (axis 0)"
        )
    return None


def fp8_capability(node: torch.fx.Node, trt_target: TrtTarget) -> str | None:
    """Where FP8 goes and what TensorRT takes of it; None for a node that touches no FP8."""
    if not (fp8_quantizes(node) or fp8_dequantizes(node)):
        return None
    if reason := trt_target.fp8_reason():
        return reason
    if reason := _boundary_reason(node) or _dtype_reason(node):
        return reason
    return None if node.target is torch.ops.aten._to_copy.default else _scale_reason(node)


def _channel_axis(shape: Any, scale_shape: Any) -> int | None:
    """0 where the scales are one per slice of axis 0 (shape (C, 1, ...)), else None."""
    if len(scale_shape) == len(shape) and scale_shape[0] == shape[0] and all(d == 1 for d in scale_shape[1:]):
        return 0
    return None


# -- emitting ----------------------------------------------------------------------------------
def _check_opset(b: GraphBuilder) -> None:
    if b.opset < FP8_OPSET:  # the capability refuses this on every such target
        raise ValueError(
            f"{b.converting.name}: FP8 QuantizeLinear/DequantizeLinear need opset {FP8_OPSET}, "
            f"the graph is opset {b.opset}"
        )


def _qparams(b: GraphBuilder, scale: torch.Tensor, shape: Any) -> tuple[Value, Value, int | None]:
    """The scale (a float32 scalar, or 1-D per channel), the explicit FP8 zero point shaped like
    it (its type makes QuantizeLinear's output FP8) and the axis."""
    axis = None if scale.numel() == 1 else _channel_axis(shape, scale.shape)
    values = scale.to(torch.float32).reshape(() if axis is None else (-1,))
    return b.const(values.tolist(), torch.float32), b.const(np.zeros(values.shape).tolist(), FP8), axis


def _quantize(b: GraphBuilder, x: Value, scale: torch.Tensor, folded: Any) -> Value:
    """QuantizeLinear of `x`, or `folded()` (torch's own FP8 values of a weight) as an initializer."""
    _check_opset(b)
    weight = constant_value(b, x)
    if weight is not None:
        return b.initializer(f"{b.converting.name}_fp8", folded(torch.from_numpy(np.array(weight))))
    s, zero, axis = _qparams(b, scale, x.shape)
    # QuantizeLinear's scale has its input's type: ours is float32.
    return b.op("QuantizeLinear", b.cast(x, torch.float32), s, zero, axis=axis, dtype=FP8, shape=x.shape)


def _dequantize(b: GraphBuilder, q: Value, scale: torch.Tensor, dtype: torch.dtype) -> Ref:
    _check_opset(b)
    s, zero, axis = _qparams(b, scale, q.shape)
    y = b.op("DequantizeLinear", q, s, zero, axis=axis, dtype=torch.float32, shape=q.shape)
    return b.cast(y, dtype)


def _scales(b: GraphBuilder, scale: Value) -> torch.Tensor:
    array = constant_value(b, scale)
    if array is None:  # the capability let only constant scales through
        raise ValueError(f"{scale.name} is not a constant the converter can read")
    return torch.from_numpy(np.array(array))


def cast(b: GraphBuilder, x: Value) -> Ref:
    """A cast to or from float8_e4m3fn (aten._to_copy's converter hands it here)."""
    one = torch.tensor(1.0)
    if b.out.dtype == FP8:
        return _quantize(b, x, one, lambda w: w.to(FP8))
    return _dequantize(b, x, one, b.out.dtype)


@converter(FP8_QUANTIZE_OP, capability=fp8_capability)
def quantize_affine_float8(b: GraphBuilder, x: Value, scale: Value, float8_dtype: torch.dtype = FP8) -> Ref:
    """torchao::quantize_affine_float8_non_decomposed(Tensor tensor, Tensor scale,
    ScalarType float8_dtype=float8_e4m3fn) -> Tensor"""
    scales = _scales(b, scale)
    return _quantize(b, x, scales, lambda w: b.converting.target(w, scales, float8_dtype))  # type: ignore[operator]


@converter(FP8_DEQUANTIZE_OP, capability=fp8_capability)
def dequantize_affine_float8(b: GraphBuilder, x: Value, scale: Value, output_dtype: torch.dtype = torch.float32) -> Ref:
    """torchao::dequantize_affine_float8_non_decomposed(Tensor tensor, Tensor scale,
    ScalarType output_dtype=float32) -> Tensor"""
    return _dequantize(b, x, _scales(b, scale), output_dtype)
