"""The quantized ops as sets: what the splitter, the converters and the report need to know of
them, without importing the op families."""
from __future__ import annotations

import torch
from torch.ao.quantization.fx._decomposed import quantized_decomposed_lib  # noqa: F401  (defines the ops)

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed

DEQUANTIZE = frozenset({qd.dequantize_per_tensor.default, qd.dequantize_per_tensor.tensor,
                         qd.dequantize_per_channel.default})
# The ops whose inputs or outputs may be int8 (the splitter allows int8 nowhere else).
INT8_OPS = DEQUANTIZE | {qd.quantize_per_tensor.default, qd.quantize_per_tensor.tensor,
                          qd.quantize_per_channel.default}
# Group-wise dequantizes of INT4 weights held in int8 (converters/ops/int4.py), by name: torchao's
# op exists only where torchao is loaded. The layers reading them compute in float on INT4 weights.
INT4_DEQUANTIZE = frozenset({"quantized_decomposed.dequantize_per_channel_group.default",
                             "torchao.dequantize_affine.default"})
# TensorRT's INT4 block quantization: groups of these many input channels (its quantized-types
# documentation), in ONNX from this opset (INT4, DequantizeLinear's block_size).
INT4_BLOCK_SIZES, INT4_OPSET = (64, 128), 21
# Ops whose result is dequantized int8: TensorRT fuses the DequantizeLinear into the layer reading
# it, which then computes in int8 (the report names those layers).
DEQUANTIZED = DEQUANTIZE | {aten.fake_quantize_per_tensor_affine_cachemask.default,
                             aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams.default,
                             aten.fake_quantize_per_channel_affine_cachemask.default}


def quantized_op(target: object) -> bool:
    """Whether `target` may read or write int8 (quantized codes): the splitter allows int8 nowhere else."""
    return target in INT8_OPS or str(target) in INT4_DEQUANTIZE
