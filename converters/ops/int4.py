"""INT4 weight-only quantization, group-wise: a weight's int4 codes (held in int8, as torch has no
int4 arithmetic) dequantized with one scale per group of input channels, as ONNX opset-21
DequantizeLinear with `block_size`, the codes stored as an INT4 initializer (two a byte).

The forms users bring: torchao's int4 weight-only tensors (IntxWeightOnlyConfig with
weight_dtype=torch.int4 and PerGroup granularity), which torch.export leaves as
`torchao.dequantize_affine`, and PT2E's `quantized_decomposed.dequantize_per_channel_group`.
TensorRT takes blocked quantization for INT4 weights only: a constant 2-D weight, blocks along its
input channels (the last axis) of 64 or 128, a 2-D constant scale, zero point 0
(docs/tensorrt.md). Anything else is refused with that reason.
"""

from __future__ import annotations

import functools
from typing import Any, Optional, Sequence

import ml_dtypes
import numpy as np
import torch
from numpy.typing import NDArray
from onnx import numpy_helper
from torch.ao.quantization.fx._decomposed import quantized_decomposed_lib  # noqa: F401  (defines the ops)

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.quantized import INT4, INT4_BLOCK_SIZES, INT4_OPSET
from converters.core.registry import converter
from converters.core.segment import is_external
from converters.core.target import TrtTarget

qd = torch.ops.quantized_decomposed

INT4_MIN, INT4_MAX = -8, 7


def _weight(node: torch.fx.Node, arg: Any) -> torch.Tensor | None:
    """The tensor a get_attr argument reads (a weight, its scales), else None."""
    if not isinstance(arg, torch.fx.Node) or arg.op != "get_attr":
        return None
    value = functools.reduce(getattr, str(arg.target).split("."), node.graph.owning_module)
    return value if isinstance(value, torch.Tensor) else None


def _group_reason(
    node: torch.fx.Node,
    trt_target: TrtTarget,
    codes: Any,
    scales: Any,
    zero_points: Any,
    quant_range: tuple[Any, Any],
    group: Any,
) -> Optional[str]:
    """Why TensorRT cannot take this group-wise dequantize, or None. `group`: how many elements
    of each axis share a scale."""
    if trt_target.opset < INT4_OPSET:
        return (
            f"INT4 weights need ONNX opset {INT4_OPSET} (INT4 DequantizeLinear with block_size), and "
            f"trt_lower writes opset {trt_target.opset} for {trt_target.label}: lower for trt_version='latest'"
        )
    if quant_range != (INT4_MIN, INT4_MAX):
        return (
            f"group-wise quantization to [{quant_range[0]}, {quant_range[1]}]: TensorRT's block "
            f"quantization is INT4 ([{INT4_MIN}, {INT4_MAX}]) only"
        )
    weight = _weight(node, codes)
    if weight is None or weight.dtype != torch.int8 or weight.dim() != 2:
        return "INT4 block quantization dequantizes a constant 2-D weight only (TensorRT: weight-only)"
    size = group[-1]
    if len(group) != 2 or group[0] != 1 or size not in INT4_BLOCK_SIZES:
        return (
            f"group of {'x'.join(map(str, group))} elements: TensorRT's INT4 blocks lie along the input "
            f"channels (the last axis), {' or '.join(map(str, INT4_BLOCK_SIZES))} long"
        )
    scale = _weight(node, scales)
    if scale is None or scale.numel() != weight.numel() // size:
        return "the group scales must be constant, one per group"
    if not bool((scale > 0).all()) or not bool(scale.isfinite().all()):
        return "quantization scales must be positive and finite"
    if zero_points is not None:
        zero = _weight(node, zero_points)
        if zero is None:
            return "the zero points must be constant (0)"
        if bool((zero != 0).any()):
            return (
                f"asymmetric quantization (zero point {zero.flatten()[zero.flatten() != 0][0].item()} ...): "
                "TensorRT dequantizes INT4 symmetrically, with zero point 0"
            )
    return None


def _per_channel_group_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    codes, scales, zero_points, quant_min, quant_max, _, group_size = node.args[:7]
    return _group_reason(node, trt_target, codes, scales, zero_points, (quant_min, quant_max), (1, group_size))


def _affine_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    codes, block_size, scale, zero_point = node.args[:4]
    quant_min = node.args[5] if len(node.args) > 5 else node.kwargs.get("quant_min")
    quant_max = node.args[6] if len(node.args) > 6 else node.kwargs.get("quant_max")
    return _group_reason(node, trt_target, codes, scale, zero_point, (quant_min, quant_max), block_size)


def _array(b: GraphBuilder, x: Value) -> NDArray[Any]:
    """The values of the weight `x` (an initializer: the capability let only constants through)."""
    tensor = next((t for t in b.initializers if t.name == x.name), None)
    if tensor is None:
        raise ValueError(f"{x.name}: INT4 codes and their scales must be weights (initializers)")
    return b.weights[tensor.name] if is_external(tensor) else numpy_helper.to_array(tensor)


def _dequantize(b: GraphBuilder, x: Value, scales: Value, group_size: int, dtype: torch.dtype) -> Value:
    """DequantizeLinear of `x`'s codes stored as INT4, one scale per `group_size` input channels.
    No zero point: it defaults to 0 of the input's type, which is what TensorRT takes."""
    rows, columns = x.shape
    packed = b.packed_initializer(f"{b.converting.name}_int4", _array(b, x).astype(ml_dtypes.int4), INT4)
    shape = (rows, columns // group_size)
    if scales.dtype != torch.float32 or scales.shape != shape:  # DequantizeLinear's output type is the scale's
        array = np.asarray(_array(b, scales), np.float32).reshape(shape)
        scales = b.initializer(f"{b.converting.name}_scale", torch.from_numpy(array))
    y = b.op("DequantizeLinear", packed, scales, axis=1, block_size=group_size, dtype=torch.float32, shape=x.shape)
    return b.cast(y, dtype)


@converter(qd.dequantize_per_channel_group.default, capability=_per_channel_group_capability)
def dequantize_per_channel_group(
    b: GraphBuilder,
    x: Value,
    scales: Value,
    zero_points: Value | None,
    quant_min: int,
    quant_max: int,
    dtype: torch.dtype,
    group_size: int,
    output_dtype: torch.dtype = torch.float32,
) -> Ref:
    """dequantize_per_channel_group(Tensor input, Tensor scales, Tensor? zero_points, int quant_min,
    int quant_max, ScalarType dtype, int group_size, ScalarType output_dtype) -> Tensor"""
    return _dequantize(b, x, scales, group_size, output_dtype)


@converter("torchao.dequantize_affine.default", capability=_affine_capability)
def dequantize_affine(
    b: GraphBuilder,
    x: Value,
    block_size: Sequence[int],
    scale: Value,
    zero_point: Value | None,
    input_dtype: torch.dtype,
    quant_min: int | None = None,
    quant_max: int | None = None,
    output_dtype: torch.dtype = torch.float32,
) -> Ref:
    """torchao::dequantize_affine(Tensor input, SymInt[] block_size, Tensor scale, Tensor? zero_point,
    ScalarType input_dtype, Scalar? quant_min=None, Scalar? quant_max=None, ScalarType output_dtype=float32)
    -> Tensor"""
    return _dequantize(b, x, scale, block_size[-1], output_dtype)
