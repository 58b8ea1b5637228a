"""How the executors name torch's dtypes: ONNX Runtime's type strings and TensorRT's DataType
member names."""

from __future__ import annotations

import torch

# ONNX Runtime names a tensor type after its ONNX element type: "tensor(float)", "tensor(int64)".
ORT_TYPES: dict[str, torch.dtype] = {
    "tensor(float)": torch.float32,
    "tensor(float16)": torch.float16,
    "tensor(bfloat16)": torch.bfloat16,
    "tensor(double)": torch.float64,
    "tensor(int64)": torch.int64,
    "tensor(int32)": torch.int32,
    "tensor(int16)": torch.int16,
    "tensor(int8)": torch.int8,
    "tensor(uint8)": torch.uint8,
    "tensor(bool)": torch.bool,
}
# TensorRT's DataType member names: by name, since the members differ across versions (INT64 and
# BF16 arrived after 8.6).
TRT_TYPES: dict[str, torch.dtype] = {
    "FLOAT": torch.float32,
    "HALF": torch.float16,
    "BF16": torch.bfloat16,
    "INT8": torch.int8,
    "UINT8": torch.uint8,
    "INT32": torch.int32,
    "INT64": torch.int64,
    "BOOL": torch.bool,
}
