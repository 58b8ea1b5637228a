"""TensorRT availability. The engine builder and cache land with the engine-layer issue."""
from __future__ import annotations

import importlib.util

import torch

INSTALL_HINT = (
    "install NVIDIA's TensorRT Python package: `pip install 'trt_lower[tensorrt]'` "
    "(TensorRT <= 10.4 for V100 GPUs, see README)"
)


def unavailable_reason() -> str | None:
    """Why backend='tensorrt' cannot run here, or None when it can."""
    if not torch.cuda.is_available():
        return "no CUDA device is available"
    if importlib.util.find_spec("tensorrt") is None:
        return f"the `tensorrt` module is not installed; {INSTALL_HINT}"
    return "the TensorRT engine builder is not implemented yet in this version of trt_lower"
