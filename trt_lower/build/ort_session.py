"""ONNX Runtime sessions over the exact ONNX TensorRT would parse."""
from __future__ import annotations

import os
import tempfile
from typing import Any, Mapping

import numpy as np
from numpy.typing import NDArray
import onnxruntime as ort

from converters.core.segment import OnnxSegment
from converters.passes.bfloat16 import widen_bfloat16
from converters.passes.transposed_weights import gemm_over_transposed_weights


# What ONNX Runtime raises when it cannot load a model (an invalid graph, a type without a kernel):
# its own exception classes, which derive from Exception alone.
SESSION_ERRORS: tuple[type[Exception], ...] = tuple(
    getattr(ort.capi.onnxruntime_pybind11_state, name)
    for name in ("Fail", "InvalidArgument", "InvalidGraph", "InvalidProtobuf", "NotImplemented",
                 "RuntimeException", "EPFail"))


# A segment with at least this many bytes of weights reads them in place (see create_session).
SHARE_WEIGHTS_MIN_BYTES = 1 << 30
# The weights file its graph names: it must exist for ONNX Runtime to accept the graph, and is
# never read (every weight is given as an initializer).
_WEIGHTS_FILE = "weights.bin"


def create_session(onnx_bytes: bytes, weights: Mapping[str, NDArray[Any]] | None = None, *,
                   spin_between_runs: bool = True, threads: int | None = None) -> ort.InferenceSession:
    """A CPU session; `weights` are the values of the initializers the model declares external
    (converters/core/segment.py), handed over without serializing them; ONNX Runtime copies them
    into the session (and packs matmul weights for its kernels).

    spin_between_runs=False: ONNX Runtime's intra-op workers keep spinning after a run, to start
    the next one at once; where other work runs between two runs of the session (another engine's
    session with workers of its own, eager ops on torch's threads), they hold the cores that work
    needs. Then they stop when a run ends (they still spin within it).

    threads: intra-op threads (None: ONNX Runtime's default, one per core)."""
    options = _options(spin_between_runs, threads)
    if weights:
        # ONNX Runtime copies the values in while creating the session; they must live until then.
        values = [ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(a)) for a in weights.values()]
        options.add_external_initializers(list(weights), values)
    return ort.InferenceSession(onnx_bytes, options, providers=["CPUExecutionProvider"])


def shared_weights_session(segment: OnnxSegment, *, spin_between_runs: bool = True,
                           threads: int | None = None) -> ort.InferenceSession:
    """A CPU session that reads the segment's weights where they are (the model's tensors, or a
    loaded artifact's memory-mapped file) instead of copying them: no second copy of a multi-GB
    model. Each weight is an initializer the caller owns (SessionOptions.add_initializer), which
    ONNX Runtime uses instead of the graph's. Nothing may copy or rewrite the weights on the way:
    matmul weights are not packed for its kernels, and no graph optimizer runs (they read the
    graph's copy of a weight, not the one given), so matmuls over transposed weights are rewritten
    to read them as they lie (converters/passes/transposed_weights.py). Matmuls run ~10-25% slower
    than on packed weights. The graph is given as a file whose weights file exists, as ONNX
    Runtime checks, but is empty (sparse) and never read."""
    options = _options(spin_between_runs, threads)
    options.add_session_config_entry("session.disable_prepacking", "1")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    runnable = gemm_over_transposed_weights(segment)
    values = {name: ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(a)) for name, a in runnable.weights.items()}
    for name, value in values.items():
        options.add_initializer(name, value)
    with tempfile.TemporaryDirectory(prefix="trt_lower_") as tmp:
        with open(os.path.join(tmp, _WEIGHTS_FILE), "wb") as file:
            file.truncate(max((offset + length for offset, length in runnable.layout().values()), default=0))
        path = os.path.join(tmp, "model.onnx")
        with open(path, "wb") as file:
            file.write(runnable.graph_bytes(_WEIGHTS_FILE))
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    session.trt_lower_weights = values  # read for the session's lifetime: it holds them
    return session


def _options(spin_between_runs: bool, threads: int | None) -> ort.SessionOptions:
    options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
    if not spin_between_runs:
        options.add_session_config_entry("session.force_spinning_stop", "1")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # ORT logs a warning per unused initializer etc.; errors still raise.
    options.log_severity_level = 3
    return options


def segment_session(segment: OnnxSegment, *, spin_between_runs: bool = True) -> ort.InferenceSession:
    """A session running `segment`, bfloat16 widened to float32 (the CPU provider has no bfloat16
    kernels; the engine module casts at its boundary); reading its weights in place where they
    are SHARE_WEIGHTS_MIN_BYTES or more."""
    runnable = widen_bfloat16(segment)
    if runnable.weight_bytes >= SHARE_WEIGHTS_MIN_BYTES:
        return shared_weights_session(runnable, spin_between_runs=spin_between_runs)
    return create_session(runnable.model.SerializeToString(), runnable.weights, spin_between_runs=spin_between_runs)
