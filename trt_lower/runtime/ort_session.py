"""ONNX Runtime sessions over the exact ONNX TensorRT would parse."""
from __future__ import annotations

from importlib import metadata
from typing import Any, Mapping
import warnings

import numpy as np
from numpy.typing import NDArray

try:
    import onnxruntime as ort
except ModuleNotFoundError as error:
    if error.name != "onnxruntime":
        raise
    # trt_lower depends on no ONNX Runtime build by name (setup.cfg): the user picks one.
    raise ModuleNotFoundError(
        "trt_lower runs its engines on ONNX Runtime (the onnxruntime module), which is not installed: "
        "pip install 'trt_lower[cpu]' for the onnxruntime package, or 'trt_lower[gpu]' for onnxruntime-gpu",
        name="onnxruntime") from error

# ONNX Runtime's builds on PyPI: each installs the same `onnxruntime` module under its own name.
DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu", "onnxruntime-directml", "onnxruntime-openvino",
                 "onnxruntime-qnn", "onnxruntime-migraphx", "onnxruntime-training")


def warn_if_several_installed() -> None:
    """Warn where two ONNX Runtime builds are installed (onnxruntime beside onnxruntime-gpu, as a
    dependency resolver that knows them as two packages leaves them): the second one installed
    wrote its files over the first one's, so which runs, and whether it loads, is up to chance."""
    found = []
    for name in DISTRIBUTIONS:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pass
    if len(found) > 1:
        names = " ".join(f.split()[0] for f in found)
        warnings.warn(
            f"{' and '.join(found)} are installed together: they provide the same `onnxruntime` module, "
            f"one over the other's files, so the one that runs is whichever was installed last, possibly "
            f"broken. Keep one: pip uninstall -y {names}, then pip install the one you want (onnxruntime-gpu "
            f"for CUDA: trt_lower[gpu]).", stacklevel=2)


warn_if_several_installed()

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
    return ort.InferenceSession(onnx_bytes, options, providers=["CPUExecutionProvider"])
