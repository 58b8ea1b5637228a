"""Quantization: PT2E's quantize/dequantize (quantized_decomposed) and fake quantization, as ONNX
QuantizeLinear/DequantizeLinear the way TensorRT's parser takes them (explicit quantization).

TensorRT quantizes symmetrically to int8: zero point 0 (emitted explicitly, as an int8 constant,
so the output type is int8), constant positive scales, activations per tensor and weights per
channel along their output-channel axis. A quantized constant (a weight) is folded here into an
int8 initializer followed by DequantizeLinear, computed by the torch op itself so it is exactly
what eager holds. Anything else (a non-zero zero point, uint8, a narrowed range on an
activation, another axis) is refused with that reason rather than changed. FP8 is fp8.py's.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch
from torch.ao.quantization.fx._decomposed import quantized_decomposed_lib  # noqa: F401  (defines the ops)

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.common import all_of, only_first_output_used
from converters.core.fold import constant_value
from converters.core.quantized import DEQUANTIZE, INT8_OPS, constant_of
from converters.core.registry import converter
from converters.core.target import TrtTarget

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed

INT8_MIN, INT8_MAX = -128, 127
# TensorRT's per-channel axis: a weight's output channels (0; 1 for a transposed convolution's).
WEIGHT_AXES = (0, 1)


def _is_weight(node: torch.fx.Node, arg: Any) -> bool:
    """A constant, or a constant quantized per channel (convert_pt2e without fold_quantize)."""
    if isinstance(arg, torch.fx.Node) and arg.target is qd.quantize_per_channel.default:
        return constant_of(arg, arg.args[0]) is not None
    return constant_of(node, arg) is not None


def _qparams_reason(
    node: torch.fx.Node, scale: Any, zero_point: Any, quant_min: Any, quant_max: Any, dtype: Any, exact: bool
) -> Optional[str]:
    """Why TensorRT cannot take these quantization parameters, or None."""
    if dtype is not None and dtype != torch.int8:
        return f"{str(dtype).removeprefix('torch.')} quantization: TensorRT quantizes to int8 only (symmetric)"
    if (quant_min, quant_max) == (0, 255):
        return "uint8 quantization (range [0, 255]): TensorRT quantizes to int8 only (symmetric)"
    if not isinstance(quant_min, int) or not isinstance(quant_max, int):
        return "the quantization range is computed at run time: TensorRT needs it constant"
    if not INT8_MIN <= quant_min < quant_max <= INT8_MAX:
        return f"quantization range [{quant_min}, {quant_max}] is not within int8's [-128, 127]"
    if not exact and (quant_min, quant_max) != (INT8_MIN, INT8_MAX):
        # Folding clamps a weight to the range; TensorRT's QuantizeLinear clamps to int8's.
        return (
            f"quantization range [{quant_min}, {quant_max}] on an activation: TensorRT's "
            "QuantizeLinear saturates to int8's [-128, 127]"
        )
    scales = torch.as_tensor(scale) if isinstance(scale, float) else constant_of(node, scale)
    if scales is None:
        return "the scale is computed at run time: TensorRT needs constant quantization scales"
    if not bool((scales > 0).all()) or not bool(scales.isfinite().all()):
        return "quantization scales must be positive and finite"
    zero_points = torch.as_tensor(zero_point) if isinstance(zero_point, int) else constant_of(node, zero_point)
    if zero_point is not None and zero_points is None:
        return "the zero point is computed at run time: TensorRT needs it constant (0)"
    if zero_points is not None and bool((zero_points != 0).any()):
        return (
            f"asymmetric quantization (zero point {zero_points.flatten()[0].item()} ...): TensorRT "
            "quantizes symmetrically, with zero point 0"
        )
    return None


def _per_channel_reason(node: torch.fx.Node, axis: Any) -> Optional[str]:
    if not _is_weight(node, node.args[0]):
        return "per-channel quantization of an activation: TensorRT quantizes activations per tensor"
    if axis not in WEIGHT_AXES:
        return (
            f"per-channel axis {axis}: TensorRT quantizes a weight along its output channels "
            f"(axis {' or '.join(map(str, WEIGHT_AXES))})"
        )
    return None


def _int8_boundary_reason(node: torch.fx.Node) -> Optional[str]:
    """int8 lives only between a quantize and its dequantizes, or is a weight: no engine takes or
    gives it."""
    if node.target in DEQUANTIZE:
        x = node.args[0]
        if not (_is_weight(node, x) or isinstance(x, torch.fx.Node) and x.target in INT8_OPS - DEQUANTIZE):
            return "it dequantizes an int8 tensor that is neither a weight nor quantized in the graph"
    elif other := [u for u in node.users if u.target not in DEQUANTIZE]:
        return f"its int8 result is read by {other[0].target}, not only by dequantizes"
    return None


def _quantize_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    """quantized_decomposed quantize/dequantize: (input, scale, zero_point, quant_min, quant_max, dtype)."""
    x, scale, zero_point, quant_min, quant_max, dtype = node.args[:6]
    if reason := _int8_boundary_reason(node):
        return reason
    # A folded weight is clamped to the range as torch does; dequantizing clamps nothing.
    exact = _is_weight(node, x) or node.target in DEQUANTIZE
    return _qparams_reason(node, scale, zero_point, quant_min, quant_max, dtype, exact)


def _per_channel_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    """quantized_decomposed per-channel: (input, scales, zero_points, axis, quant_min, quant_max, dtype)."""
    x, scales, zero_points, axis, quant_min, quant_max, dtype = node.args[:7]
    return (
        _per_channel_reason(node, axis)
        or _int8_boundary_reason(node)
        or _qparams_reason(node, scales, zero_points, quant_min, quant_max, dtype, exact=True)
    )


def _fake_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    """fake_quantize_per_tensor_affine(_cachemask): (self, scale, zero_point, [enabled,] quant_min, quant_max)."""
    x, scale, zero_point, *rest = node.args
    quant_min, quant_max = rest[-2:]
    if len(rest) == 3 and constant_of(node, rest[0]) is None:
        return "whether fake quantization is enabled is computed at run time"
    return _qparams_reason(node, scale, zero_point, quant_min, quant_max, None, _is_weight(node, x))


def _fake_per_channel_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    """fake_quantize_per_channel_affine(_cachemask): (self, scale, zero_point, axis, quant_min, quant_max)."""
    x, scales, zero_points, axis, quant_min, quant_max = node.args[:6]
    return _per_channel_reason(node, axis) or _qparams_reason(
        node, scales, zero_points, quant_min, quant_max, None, exact=True
    )


# -- emitting ----------------------------------------------------------------------------------
def _constant(b: GraphBuilder, value: Value) -> torch.Tensor:
    array = constant_value(b, value)
    if array is None:
        raise ValueError(f"{value.name} is not a constant the converter can read")
    return torch.from_numpy(np.array(array))


def _weight(b: GraphBuilder, x: Value, quant_min: int, quant_max: int) -> torch.Tensor | None:
    """`x`'s value if it is a constant (a weight, to fold), else None. The capability let a
    narrowed range through only for constants, which QuantizeLinear would not clamp to it."""
    array = constant_value(b, x)
    if array is None and (quant_min, quant_max) != (INT8_MIN, INT8_MAX):
        raise ValueError(
            f"{x.name}: a weight quantized to [{quant_min}, {quant_max}] must be folded, "
            "and its value cannot be read here"
        )
    return None if array is None else torch.from_numpy(np.array(array))


def _scale(b: GraphBuilder, scale: Value | float, per_channel: bool) -> Value:
    """The scale as a float32 initializer: a scalar (per tensor) or 1-D (per channel)."""
    values = _constant(b, scale) if isinstance(scale, Value) else torch.tensor(scale)
    values = values.to(torch.float32).reshape(-1 if per_channel else ())
    return b.const(values.tolist(), torch.float32)


def _zero(b: GraphBuilder, scale: Value) -> Value:
    """The explicit int8 zero point TensorRT wants, shaped like the scale."""
    return b.const(np.zeros(scale.shape, np.int8).tolist(), torch.int8)


def _quantize(b: GraphBuilder, x: Value, scale: Value, axis: int | None) -> Value:
    # Opset 17's QuantizeLinear reads float32 only.
    return b.op(
        "QuantizeLinear", b.cast(x, torch.float32), scale, _zero(b, scale), axis=axis, dtype=torch.int8, shape=x.shape
    )


def _dequantize(b: GraphBuilder, q: Value, scale: Value, axis: int | None, dtype: torch.dtype) -> Value:
    y = b.op("DequantizeLinear", q, scale, _zero(b, scale), axis=axis, dtype=torch.float32, shape=q.shape)
    return b.cast(y, dtype)


def _folded(b: GraphBuilder, quantized: torch.Tensor, scale: Value, axis: int | None, dtype: torch.dtype) -> Value:
    """An int8 weight as an int8 initializer followed by DequantizeLinear."""
    weight = b.initializer(f"{b.converting.name}_int8", quantized.to(torch.int8))
    return _dequantize(b, weight, scale, axis, dtype)


@converter(qd.quantize_per_tensor.default, qd.quantize_per_tensor.tensor, capability=_quantize_capability)
def quantize_per_tensor(
    b: GraphBuilder,
    x: Value,
    scale: Value | float,
    zero_point: Value | int,
    quant_min: int,
    quant_max: int,
    dtype: torch.dtype,
) -> Ref:
    """quantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, int quant_max,
    ScalarType dtype) -> Tensor; .tensor: Tensor scale, Tensor zero_point"""
    weight = _weight(b, x, quant_min, quant_max)
    if weight is not None:  # folded, as torch quantizes it
        scale = float(_constant(b, scale)) if isinstance(scale, Value) else scale
        return b.initializer(
            f"{b.converting.name}_int8", qd.quantize_per_tensor.default(weight, scale, 0, quant_min, quant_max, dtype)
        )
    return _quantize(b, x, _scale(b, scale, per_channel=False), None)


@converter(qd.dequantize_per_tensor.default, qd.dequantize_per_tensor.tensor, capability=_quantize_capability)
def dequantize_per_tensor(
    b: GraphBuilder,
    x: Value,
    scale: Value | float,
    zero_point: Value | int,
    quant_min: int,
    quant_max: int,
    dtype: torch.dtype,
    *,
    out_dtype: torch.dtype | None = None,
) -> Ref:
    """dequantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, int quant_max,
    ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor; .tensor: Tensor scale, Tensor zero_point"""
    return _dequantize(b, x, _scale(b, scale, per_channel=False), None, out_dtype or torch.float32)


@converter(qd.quantize_per_channel.default, capability=_per_channel_capability)
def quantize_per_channel(
    b: GraphBuilder,
    x: Value,
    scales: Value,
    zero_points: Value,
    axis: int,
    quant_min: int,
    quant_max: int,
    dtype: torch.dtype,
) -> Ref:
    """quantize_per_channel(Tensor input, Tensor scales, Tensor zero_points, int axis, int quant_min,
    int quant_max, ScalarType dtype) -> Tensor"""
    # Only a weight gets here (the capability): fold it, as torch quantizes it.
    quantized = qd.quantize_per_channel.default(
        _constant(b, x), _constant(b, scales), _constant(b, zero_points), axis, quant_min, quant_max, dtype
    )
    return b.initializer(f"{b.converting.name}_int8", quantized)


@converter(qd.dequantize_per_channel.default, capability=_per_channel_capability)
def dequantize_per_channel(
    b: GraphBuilder,
    x: Value,
    scales: Value,
    zero_points: Value | None,
    axis: int,
    quant_min: int,
    quant_max: int,
    dtype: torch.dtype,
    *,
    out_dtype: torch.dtype | None = None,
) -> Ref:
    """dequantize_per_channel(Tensor input, Tensor scales, Tensor? zero_points, int axis, int quant_min,
    int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor"""
    return _dequantize(b, x, _scale(b, scales, per_channel=True), axis, out_dtype or torch.float32)


@converter(
    aten.fake_quantize_per_tensor_affine_cachemask.default, capability=all_of(only_first_output_used, _fake_capability)
)
def fake_quantize_per_tensor_affine_cachemask(
    b: GraphBuilder, x: Value, scale: float, zero_point: int, quant_min: int, quant_max: int
) -> tuple[Ref, None]:
    """fake_quantize_per_tensor_affine_cachemask(Tensor self, float scale, int zero_point, int quant_min,
    int quant_max) -> (Tensor output, Tensor mask)"""
    return _fake_quantize(b, x, _scale(b, scale, per_channel=False), None, quant_min, quant_max), None


@converter(
    aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams.default,
    capability=all_of(only_first_output_used, _fake_capability),
)
def fake_quantize_per_tensor_affine_cachemask_tensor_qparams(
    b: GraphBuilder,
    x: Value,
    scale: Value,
    zero_point: Value,
    fake_quant_enabled: Value,
    quant_min: int,
    quant_max: int,
) -> tuple[Ref, None]:
    """_fake_quantize_per_tensor_affine_cachemask_tensor_qparams(Tensor self, Tensor scale,
    Tensor zero_point, Tensor fake_quant_enabled, int quant_min, int quant_max) -> (Tensor output, Tensor mask)"""
    if not bool(_constant(b, fake_quant_enabled).any()):
        return x, None
    return _fake_quantize(b, x, _scale(b, scale, per_channel=False), None, quant_min, quant_max), None


@converter(
    aten.fake_quantize_per_channel_affine_cachemask.default,
    capability=all_of(only_first_output_used, _fake_per_channel_capability),
)
def fake_quantize_per_channel_affine_cachemask(
    b: GraphBuilder, x: Value, scales: Value, zero_points: Value, axis: int, quant_min: int, quant_max: int
) -> tuple[Ref, None]:
    """fake_quantize_per_channel_affine_cachemask(Tensor self, Tensor scale, Tensor zero_point, int axis,
    int quant_min, int quant_max) -> (Tensor output, Tensor mask)"""
    return _fake_quantize(b, x, _scale(b, scales, per_channel=True), axis, quant_min, quant_max), None


def _fake_quantize(b: GraphBuilder, x: Value, scale: Value, axis: int | None, quant_min: int, quant_max: int) -> Value:
    """Quantize and dequantize. A weight is folded: torch's own fake quantization of it, divided by
    the scale, is exactly its int8 value (it is an integer times the scale)."""
    weight = _weight(b, x, quant_min, quant_max)
    if weight is None:
        return _dequantize(b, _quantize(b, x, scale, axis), scale, axis, x.dtype)
    scales = _constant(b, scale)
    shape = [-1 if d == axis else 1 for d in range(x.rank)] if axis is not None else []
    w = weight.float()
    if axis is None:
        faked = torch.fake_quantize_per_tensor_affine(w, float(scales), 0, quant_min, quant_max)
    else:
        faked = torch.fake_quantize_per_channel_affine(
            w, scales, torch.zeros(scales.shape, dtype=torch.int32), axis, quant_min, quant_max
        )
    return _folded(b, torch.round(faked / scales.reshape(shape)), scale, axis, x.dtype)
