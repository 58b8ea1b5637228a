"""INT4 weight-only quantization, group-wise, with torchao: what quantize(..., dtype="int4_weight_only")
does.

Every linear layer's weight becomes int4 codes with one float32 scale per group of `group_size`
input channels, symmetric (zero point 0), as torchao's IntxWeightOnlyConfig makes it; activations
stay float. torch.export keeps each weight's `torchao.dequantize_affine`, which lowers to an
opset-21 INT4 DequantizeLinear (converters/ops/int4.py). torchao's Int4WeightOnlyConfig is no
help here: it needs GPU kernels (mslk) to quantize at all, and is asymmetric by default.
"""

from __future__ import annotations

import copy

import torch
from torchao.quantization import IntxWeightOnlyConfig, MappingType, quantize_
from torchao.quantization.granularity import PerGroup

from converters.core.quantized import INT4, INT4_BLOCK_SIZES


def int4_weight_only(model: torch.nn.Module, group_size: int) -> torch.nn.Module:
    """A copy of `model` whose linear layers hold INT4 weights, one scale per `group_size` input
    channels (64 or 128: what TensorRT takes). ValueError naming the layer whose input channels
    `group_size` does not divide."""
    if group_size not in INT4_BLOCK_SIZES:
        raise ValueError(
            f"group_size={group_size!r}: TensorRT dequantizes INT4 weights in groups of "
            f"{' or '.join(map(str, INT4_BLOCK_SIZES))} input channels"
        )
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and module.in_features % group_size:
            raise ValueError(
                f"layer '{name}' has {module.in_features} input channels, which group_size={group_size} does not divide"
            )
    quantized = copy.deepcopy(model).eval()
    quantize_(
        quantized,
        IntxWeightOnlyConfig(weight_dtype=INT4, granularity=PerGroup(group_size), mapping_type=MappingType.SYMMETRIC),
    )
    return quantized
