"""The quantized ops as sets: what the splitter, the converters and the report need to know of
them, without importing the op families."""
from __future__ import annotations

import torch
from torch.ao.quantization.fx._decomposed import quantized_decomposed_lib  # noqa: F401  (defines the ops)

from converters.core.target import TrtTarget

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
INT4: torch.dtype = getattr(torch, "int4")  # noqa: B009  (a torch dtype its type stubs leave out)
# FLOAT4E2M1 (NVFP4's values) in ONNX from this opset.
FP4_OPSET = 23
FP4_DTYPES = frozenset({torch.float4_e2m1fn_x2})
# Ops whose result is dequantized int8: TensorRT fuses the DequantizeLinear into the layer reading
# it, which then computes in int8 (the report names those layers).
DEQUANTIZED = DEQUANTIZE | {aten.fake_quantize_per_tensor_affine_cachemask.default,
                             aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams.default,
                             aten.fake_quantize_per_channel_affine_cachemask.default}


def quantized_op(target: object) -> bool:
    """Whether `target` may read or write int8 (quantized codes): the splitter allows int8 nowhere else."""
    return target in INT8_OPS or str(target) in INT4_DEQUANTIZE


def nvfp4_reason(trt_target: TrtTarget) -> str:
    """Why no engine takes NVFP4 (FP4 E2M1 weights held two a byte as float4_e2m1fn_x2, FP8 block
    scales of 16, a float32 global scale): TensorRT reads it as FLOAT4E2M1 DequantizeLinear (ONNX
    opset 23) from 10.8 on Blackwell GPUs, but ONNX Runtime has no FLOAT4E2M1 DequantizeLinear
    kernel, so trt_lower could not check such an engine against eager on any machine."""
    if trt_target.opset < FP4_OPSET:
        return (f"NVFP4 (float4_e2m1fn_x2) needs FLOAT4E2M1 DequantizeLinear (ONNX opset {FP4_OPSET}), and "
                f"trt_lower writes opset {trt_target.opset} for {trt_target.label}")
    return ("NVFP4 (float4_e2m1fn_x2): ONNX Runtime has no FLOAT4E2M1 DequantizeLinear kernel, so trt_lower "
            "cannot check an NVFP4 engine against eager and keeps it eager")
