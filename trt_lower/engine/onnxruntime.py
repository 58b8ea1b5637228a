"""ONNX Runtime sessions over the exact bytes TensorRT would parse."""
from __future__ import annotations

import onnxruntime as ort


def create_session(onnx_bytes: bytes) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # ORT logs a warning per unused initializer etc.; errors still raise.
    options.log_severity_level = 3
    return ort.InferenceSession(onnx_bytes, options, providers=["CPUExecutionProvider"])
