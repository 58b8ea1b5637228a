"""The converters' dtype tables: torch dtypes as ONNX element types and numpy types, and which
dtypes an engine may carry (docs/tensorrt.md). The executors' names for dtypes are
trt_lower/values/dtypes.py's."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import torch
from numpy.typing import NDArray
from onnx import TensorProto

ONNX_TYPES: dict[torch.dtype, int] = {
    torch.float32: TensorProto.FLOAT,
    torch.float16: TensorProto.FLOAT16,
    torch.bfloat16: TensorProto.BFLOAT16,
    torch.float64: TensorProto.DOUBLE,
    torch.int64: TensorProto.INT64,
    torch.int32: TensorProto.INT32,
    torch.int16: TensorProto.INT16,
    torch.int8: TensorProto.INT8,
    torch.uint8: TensorProto.UINT8,
    torch.bool: TensorProto.BOOL,
    torch.float8_e4m3fn: TensorProto.FLOAT8E4M3FN,
}
NUMPY_TYPES: dict[torch.dtype, type] = {
    torch.float32: np.float32,
    torch.float16: np.float16,
    torch.bfloat16: ml_dtypes.bfloat16,  # numpy has none; ONNX's numpy_helper reads and writes this one
    torch.float64: np.float64,
    torch.int64: np.int64,
    torch.int32: np.int32,
    torch.int16: np.int16,
    torch.int8: np.int8,
    torch.uint8: np.uint8,
    torch.bool: np.bool_,
    torch.float8_e4m3fn: ml_dtypes.float8_e4m3fn,  # likewise
}
# Dtypes an engine may carry. float64 is computed as float32 (TensorRT has no float64 kernels;
# converters/passes/float64.py). bf16 only where the target has it (TrtTarget.bf16_reason); int8 is
# only a quantized type to TensorRT; int16 and the rest it does not have.
ENGINE_DTYPES = frozenset({torch.float32, torch.float16, torch.float64, torch.int64, torch.int32, torch.bool})
# uint8 (images) TensorRT takes only as engine I/O: an engine may cast it, not compute on it.
CAST_ONLY_DTYPES = frozenset({torch.uint8})
# FP8: E4M3 is TensorRT's FP8, a quantized type like int8 (between a quantize and its
# dequantizes, or a weight), on targets that have it (TrtTarget.fp8_reason); E5M2 it has not.
FP8 = torch.float8_e4m3fn
FP8_DTYPES = frozenset({torch.float8_e4m3fn, torch.float8_e5m2})
# Float weights large enough are kept beside the ONNX as arrays (converters/core/segment.py).
FLOAT_WEIGHTS: dict[np.dtype[np.generic], int] = {
    np.dtype(NUMPY_TYPES[d]): ONNX_TYPES[d] for d in (torch.float32, torch.float16, torch.float64)
}


def onnx_type(dtype: torch.dtype) -> int:
    return ONNX_TYPES[dtype]


def numpy_type(dtype: torch.dtype) -> type:
    return NUMPY_TYPES[dtype]


def numpy_view(tensor: torch.Tensor) -> NDArray[Any]:
    """A CPU tensor's memory as a numpy array (bfloat16 and float8 through their bits: torch's
    .numpy() has neither)."""
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    if tensor.dtype == FP8:
        return tensor.view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3fn)
    return tensor.numpy()
