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
# Ops whose result is dequantized int8: TensorRT fuses the DequantizeLinear into the layer reading
# it, which then computes in int8 (the report names those layers).
DEQUANTIZED = DEQUANTIZE | {aten.fake_quantize_per_tensor_affine_cachemask.default,
                             aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams.default,
                             aten.fake_quantize_per_channel_affine_cachemask.default}
