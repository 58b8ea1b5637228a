"""ONNX Runtime sessions over the exact ONNX TensorRT would parse."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from numpy.typing import NDArray
import onnxruntime as ort


# What ONNX Runtime raises when it cannot load a model (an invalid graph, a type without a kernel):
# its own exception classes, which derive from Exception alone.
SESSION_ERRORS: tuple[type[Exception], ...] = tuple(
    getattr(ort.capi.onnxruntime_pybind11_state, name)
    for name in ("Fail", "InvalidArgument", "InvalidGraph", "InvalidProtobuf", "NotImplemented",
                 "RuntimeException", "EPFail"))


def create_session(onnx_bytes: bytes, weights: Mapping[str, NDArray[Any]] | None = None, *,
                   spin_between_runs: bool = True, threads: int | None = None) -> ort.InferenceSession:
    """A CPU session; `weights` are the values of the initializers the model declares external
    (converters/passes/weights.py), handed over without serializing them.

    spin_between_runs=False: ONNX Runtime's intra-op workers keep spinning after a run, to start
    the next one at once; where other work runs between two runs of the session (another engine's
    session with workers of its own, eager ops on torch's threads), they hold the cores that work
    needs. Then they stop when a run ends (they still spin within it).

    threads: intra-op threads (None: ONNX Runtime's default, one per core)."""
    options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
    if not spin_between_runs:
        options.add_session_config_entry("session.force_spinning_stop", "1")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # ORT logs a warning per unused initializer etc.; errors still raise.
    options.log_severity_level = 3
    if weights:
        # ONNX Runtime copies the values in while creating the session; they must live until then.
        values = [ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(a)) for a in weights.values()]
        options.add_external_initializers(list(weights), values)
    # TensorRT quantizes what the Q/DQ nodes say and no more. ONNX Runtime's QDQ fusions would
    # not: a weight-only DequantizeLinear before a MatMul becomes DynamicQuantizeMatMul, which
    # quantizes the float input too. Without them Q/DQ run as float math, as the quantized
    # PyTorch module computes them.
    return ort.InferenceSession(onnx_bytes, options, providers=["CPUExecutionProvider"],
                                disabled_optimizers=["QDQSelectorActionTransformer"])
