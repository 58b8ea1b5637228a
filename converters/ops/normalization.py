"""Normalization: batch norm (inference, and with batch statistics), layer, group, instance and
RMS norm.

Group, instance, RMS and batch-statistics norms are written as ReduceMean formulas: ONNX
GroupNormalization is opset 18, and TensorRT 8.6 runs InstanceNormalization as a plugin unless a
parser flag is set. RMS norm is RMSNormalization where the target's opset (23) has it.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.common import all_of, float_inputs, only_first_output_used
from converters.core.dims import input_val, node_arg, static_numel
from converters.core.registry import converter
from converters.core.target import TrtTarget
from converters.ops.rotary import FUSED_OPSET

aten = torch.ops.aten


@converter(aten._native_batch_norm_legit_no_training.default, capability=all_of(float_inputs, only_first_output_used))
def batch_norm_inference(
    b: GraphBuilder,
    x: Value,
    weight: Value | None,
    bias: Value | None,
    running_mean: Value,
    running_var: Value,
    momentum: float,
    eps: float,
) -> tuple[Ref, None, None]:
    """_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias,
    Tensor running_mean, Tensor running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor)

    BatchNormalization where every parameter is a weight (TensorRT's parser needs them as
    initializers); statistics or affine parameters computed in the graph get the formula
    (x - mean) / sqrt(var + eps) * weight + bias.
    """
    if all(p is None or b.is_initializer(p) for p in (weight, bias, running_mean, running_var)):
        channels = x.shape[1]
        scale = weight if weight is not None else b.const([1.0] * channels, x.dtype)
        shift = bias if bias is not None else b.const([0.0] * channels, x.dtype)
        y = b.op("BatchNormalization", x, scale, shift, running_mean, running_var, epsilon=float(eps), dtype=x.dtype)
        return y, None, None
    shape = b.ints([-1] + [1] * (x.rank - 2))
    mean = b.op("Reshape", b.cast(running_mean, x.dtype), shape)
    std = b.op("Sqrt", b.op("Add", b.op("Reshape", b.cast(running_var, x.dtype), shape), b.const(eps, x.dtype)))
    normalized = b.op("Div", b.op("Sub", x, mean), std, dtype=x.dtype)
    return _per_channel(b, normalized, x.rank, weight, bias), None, None


@converter(aten.native_layer_norm.default, capability=all_of(float_inputs, only_first_output_used))
def native_layer_norm(
    b: GraphBuilder, x: Value, normalized_shape: Sequence[int], weight: Value | None, bias: Value | None, eps: float
) -> tuple[Ref, None, None]:
    """native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias,
    float eps) -> (Tensor, Tensor, Tensor)

    Only Y: TensorRT's LayerNormalization has no Mean/InvStdDev outputs.
    """
    if weight is None:
        weight = b.const(torch.ones(list(normalized_shape)).numpy(), x.dtype)
    y = b.op("LayerNormalization", x, weight, bias, axis=-len(normalized_shape), epsilon=float(eps), dtype=x.dtype)
    return y, None, None


# -- ReduceMean formulas: group, instance, batch-statistics and RMS norm ---------------------
def _standardize(b: GraphBuilder, x: Ref, axes: list[int], eps: float, dtype: torch.dtype) -> Ref:
    """(x (of `dtype`) - mean) / sqrt(biased var + eps) over `axes`."""
    deviation = b.op("Sub", x, b.op("ReduceMean", x, axes=axes, keepdims=1))
    variance = b.op("ReduceMean", b.op("Mul", deviation, deviation), axes=axes, keepdims=1)
    return b.op("Div", deviation, b.op("Sqrt", b.op("Add", variance, b.const(eps, dtype))), dtype=dtype)


def _per_channel(b: GraphBuilder, y: Ref, rank: int, weight: Value | None, bias: Value | None) -> Ref:
    """y * weight + bias with (C,) parameters broadcast along dim 1."""
    shape = b.ints([-1] + [1] * (rank - 2))
    if weight is not None:
        y = b.op("Mul", y, b.op("Reshape", weight, shape), dtype=y.dtype)
    if bias is not None:
        y = b.op("Add", y, b.op("Reshape", bias, shape), dtype=y.dtype)
    return y


def _group_norm(b: GraphBuilder, x: Value, groups: int, weight: Value | None, bias: Value | None, eps: float) -> Ref:
    """Statistics over (C/groups, *) per sample and group: (N, C, *) -> (N, groups, rest).

    The target shape names `rest` rather than -1 where it is static: ONNX cannot infer a -1 when
    another dim is 0 (an empty batch). The 0 copies N, empty or not (no allowzero needed).
    """
    rest = static_numel(x.shape[1:])  # never 0: torch requires C > 0 and HxW > 0
    target = [0, groups, -1 if rest is None else rest // groups]
    grouped = b.op("Reshape", x, b.ints(target), dtype=x.dtype)  # 0: keep N
    normalized = b.op("Reshape", _standardize(b, grouped, [2], eps, x.dtype), b.op("Shape", x), dtype=x.dtype)
    return _per_channel(b, normalized, x.rank, weight, bias)


@converter(aten.native_group_norm.default, capability=all_of(float_inputs, only_first_output_used))
def native_group_norm(
    b: GraphBuilder,
    x: Value,
    weight: Value | None,
    bias: Value | None,
    N: int,
    C: int,
    HxW: int,
    group: int,
    eps: float,
) -> tuple[Ref, None, None]:
    """native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C, SymInt HxW,
    int group, float eps) -> (Tensor, Tensor, Tensor)  (only the output; mean/rstd are for backward)"""
    return _group_norm(b, x, group, weight, bias, eps), None, None


@converter(aten.group_norm.default, capability=float_inputs)
def group_norm(
    b: GraphBuilder,
    x: Value,
    num_groups: int,
    weight: Value | None = None,
    bias: Value | None = None,
    eps: float = 1e-05,
    cudnn_enabled: bool = True,
) -> Ref:
    """group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, float eps=1e-05,
    bool cudnn_enabled=True) -> Tensor"""
    return _group_norm(b, x, num_groups, weight, bias, eps)


def _input_stats(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    if not node_arg(node, 5, "use_input_stats"):
        return "instance norm with running statistics (track_running_stats in eval mode)"
    if input_val(node, 0).dim() < 3:
        return "instance norm needs (N, C, *) with at least one spatial dim"
    return None


@converter(aten.instance_norm.default, capability=all_of(float_inputs, _input_stats))
def instance_norm(
    b: GraphBuilder,
    x: Value,
    weight: Value | None,
    bias: Value | None,
    running_mean: Value | None,
    running_var: Value | None,
    use_input_stats: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool,
) -> Ref:
    """instance_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var,
    bool use_input_stats, float momentum, float eps, bool cudnn_enabled) -> Tensor

    Statistics per sample and channel over the spatial dims (running stats only get updated).
    """
    normalized = _standardize(b, x, list(range(2, x.rank)), eps, x.dtype)
    return _per_channel(b, normalized, x.rank, weight, bias)


@converter(aten._native_batch_norm_legit.no_stats, capability=all_of(float_inputs, only_first_output_used))
def batch_norm_batch_stats(
    b: GraphBuilder, x: Value, weight: Value | None, bias: Value | None, training: bool, momentum: float, eps: float
) -> tuple[Ref, None, None]:
    """_native_batch_norm_legit.no_stats(Tensor input, Tensor? weight, Tensor? bias, bool training,
    float momentum, float eps) -> (Tensor, Tensor, Tensor)

    Statistics of the batch itself, per channel over every other dim (no running stats to use).
    """
    normalized = _standardize(b, x, [0, *range(2, x.rank)], eps, x.dtype)
    return _per_channel(b, normalized, x.rank, weight, bias), None, None


@converter(aten.rms_norm.default, capability=float_inputs)
def rms_norm(
    b: GraphBuilder, x: Value, normalized_shape: Sequence[int], weight: Value | None = None, eps: float | None = None
) -> Ref:
    """rms_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor

    x / sqrt(mean(x²) + eps) over the trailing dims; eps defaults to the dtype's machine epsilon.
    RMSNormalization computes it in float32 (its stash_type) and scales by a weight of x's dtype.
    """
    dtype = x.dtype
    epsilon = torch.finfo(dtype).eps if eps is None else eps
    if b.opset >= FUSED_OPSET and (weight is None or weight.dtype == dtype):
        scale = weight if weight is not None else b.const(torch.ones(list(normalized_shape)).numpy(), dtype)
        return b.op("RMSNormalization", x, scale, axis=-len(normalized_shape), epsilon=float(epsilon), dtype=dtype)
    axes = list(range(x.rank - len(normalized_shape), x.rank))
    mean_square = b.op("ReduceMean", b.op("Mul", x, x), axes=axes, keepdims=1)
    y = b.op("Div", x, b.op("Sqrt", b.op("Add", mean_square, b.const(epsilon, dtype))), dtype=dtype)
    return y if weight is None else b.op("Mul", y, weight, dtype=dtype)
