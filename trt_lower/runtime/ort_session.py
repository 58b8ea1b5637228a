"""ONNX Runtime sessions over the exact ONNX TensorRT would parse."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from numpy.typing import NDArray
import onnxruntime as ort


def create_session(onnx_bytes: bytes, weights: Mapping[str, NDArray[Any]] | None = None) -> ort.InferenceSession:
    """A CPU session; `weights` are the values of the initializers the model declares external
    (converters/passes/weights.py), handed over without serializing them."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # ORT logs a warning per unused initializer etc.; errors still raise.
    options.log_severity_level = 3
    if weights:
        # ONNX Runtime copies the values in while creating the session; they must live until then.
        values = [ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(a)) for a in weights.values()]
        options.add_external_initializers(list(weights), values)
    return ort.InferenceSession(onnx_bytes, options, providers=["CPUExecutionProvider"])
