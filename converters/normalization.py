"""Batch norm (inference) and layer norm."""
from __future__ import annotations

from typing import Sequence

import torch

from converters._common import all_of, constant_args, float_inputs, only_first_output_used
from converters.builder import GraphBuilder, Value
from converters.registry import converter

aten = torch.ops.aten


@converter(
    aten._native_batch_norm_legit_no_training.default,
    capability=all_of(float_inputs, only_first_output_used, constant_args(1, 2, 3, 4)),
)
def batch_norm_inference(
    b: GraphBuilder,
    x: Value,
    weight: Value | None,
    bias: Value | None,
    running_mean: Value,
    running_var: Value,
    momentum: float,
    eps: float,
) -> tuple[Value, None, None]:
    """_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias,
    Tensor running_mean, Tensor running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor)"""
    channels = x.shape[1]  # type: ignore[index]
    scale = weight if weight is not None else b.const([1.0] * channels, x.dtype)  # type: ignore[arg-type]
    shift = bias if bias is not None else b.const([0.0] * channels, x.dtype)  # type: ignore[arg-type]
    y = b.op("BatchNormalization", x, scale, shift, running_mean, running_var, epsilon=float(eps), dtype=x.dtype)
    return y, None, None


@converter(aten.native_layer_norm.default, capability=all_of(float_inputs, only_first_output_used))
def native_layer_norm(
    b: GraphBuilder,
    x: Value,
    normalized_shape: Sequence[int],
    weight: Value | None,
    bias: Value | None,
    eps: float,
) -> tuple[Value, None, None]:
    """native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias,
    float eps) -> (Tensor, Tensor, Tensor)

    Only Y: TensorRT's LayerNormalization has no Mean/InvStdDev outputs.
    """
    if weight is None:
        weight = b.const(torch.ones(list(normalized_shape)).numpy(), x.dtype)  # type: ignore[arg-type]
    y = b.op("LayerNormalization", x, weight, bias, axis=-len(normalized_shape), epsilon=float(eps), dtype=x.dtype)
    return y, None, None
