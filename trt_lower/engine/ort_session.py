"""ONNX Runtime sessions over the exact ONNX TensorRT would parse."""

from __future__ import annotations

import functools
import os
import tempfile
import warnings
from importlib import metadata
from typing import Any, Mapping

import numpy as np
import torch
from numpy.typing import NDArray
from onnx import TensorProto, helper

from converters.core.builder import IR_VERSION, OPSET
from converters.core.segment import OnnxSegment
from converters.passes.bfloat16 import widen_bfloat16
from converters.passes.transposed_weights import gemm_over_transposed_weights
from trt_lower.runtime.ort_module import OrtEngineModule
from trt_lower.values.signature import TensorSig

try:
    import onnxruntime as ort
except ModuleNotFoundError as error:
    if error.name != "onnxruntime":
        raise
    # trt_lower depends on no ONNX Runtime build by name (setup.cfg): the user picks one.
    raise ModuleNotFoundError(
        "trt_lower runs its engines on ONNX Runtime (the onnxruntime module), which is not installed: "
        "pip install 'trt_lower[cpu]' for the onnxruntime package, or 'trt_lower[gpu]' for onnxruntime-gpu",
        name="onnxruntime",
    ) from error

# ONNX Runtime's builds on PyPI: each installs the same `onnxruntime` module under its own name.
DISTRIBUTIONS = (
    "onnxruntime",
    "onnxruntime-gpu",
    "onnxruntime-directml",
    "onnxruntime-openvino",
    "onnxruntime-qnn",
    "onnxruntime-migraphx",
    "onnxruntime-training",
)


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
            f"for CUDA: trt_lower[gpu]).",
            stacklevel=2,
        )


warn_if_several_installed()

# What ONNX Runtime raises when it cannot load a model (an invalid graph, a type without a kernel):
# its own exception classes, which derive from Exception alone.
SESSION_ERRORS: tuple[type[Exception], ...] = tuple(
    getattr(ort.capi.onnxruntime_pybind11_state, name)
    for name in (
        "Fail",
        "InvalidArgument",
        "InvalidGraph",
        "InvalidProtobuf",
        "NotImplemented",
        "RuntimeException",
        "EPFail",
    )
)


# The file, in a profiled session's `profile_to` directory, of the graph as ONNX Runtime optimized it.
OPTIMIZED_MODEL = "optimized.onnx"
# A segment with at least this many bytes of weights reads them in place (shared_weights_session).
SHARE_WEIGHTS_MIN_BYTES = 1 << 30
# The weights file its graph names: it must exist for ONNX Runtime to accept the graph, and is
# never read (every weight is given as an initializer).
_WEIGHTS_FILE = "weights.bin"


def create_session(
    onnx_bytes: bytes,
    weights: Mapping[str, NDArray[Any]] | None = None,
    *,
    spin_between_runs: bool = True,
    threads: int | None = None,
    profile_to: str | None = None,
) -> ort.InferenceSession:
    """A CPU session; `weights` are the values of the initializers the model declares external
    (converters/core/segment.py), handed over without serializing them; ONNX Runtime copies them
    into the session (and packs matmul weights for its kernels).

    spin_between_runs=False: ONNX Runtime's intra-op workers keep spinning after a run, to start
    the next one at once; where other work runs between two runs of the session (another engine's
    session with workers of its own, eager ops on torch's threads), they hold the cores that work
    needs. Then they stop when a run ends (they still spin within it).

    threads: intra-op threads (None: ONNX Runtime's default, one per core).

    profile_to: a directory where ONNX Runtime writes its profile of every run and the graph as it
    optimized it (the names the profile's rows carry): trt_lower/profile/ort_layers.py."""
    options = _options(spin_between_runs, threads, profile_to)
    if weights:
        # ONNX Runtime copies the values in while creating the session; they must live until then.
        values = [ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(a)) for a in weights.values()]
        options.add_external_initializers(list(weights), values)
    return ort.InferenceSession(
        onnx_bytes, options, providers=["CPUExecutionProvider"], disabled_optimizers=DISABLED_OPTIMIZERS
    )


# TensorRT quantizes what the Q/DQ nodes say and no more. ONNX Runtime's QDQ fusions would not: a
# weight-only DequantizeLinear before a MatMul becomes DynamicQuantizeMatMul, which quantizes the
# float input too. Without them Q/DQ run as float math, as the quantized PyTorch module computes
# them. Its rewrites of Clip and Relu before a QuantizeLinear assume an integer range: on FP8
# (1.31) the Clip one fails ("Unexpected data type for QuantizeLinear input y_zero_point") and the
# Relu one drops the Relu, whose negatives FP8 would keep.
Q_DQ_AS_WRITTEN = ["QDQSelectorActionTransformer", "ClipQuantRewrite", "ReluQuantRewrite"]
# ONNX Runtime's Gemm/Transpose fusion (1.31) checks only that one Transpose before a Gemm makes no
# graph output, then folds both of the Gemm's input Transposes into it and drops their nodes: a
# model returning `x.t()` beside a linear of it (a transposed weight) loses the node making that
# output, and the session fails to load ("Failed to find node output ... producing output"). Constant
# folding still folds a transposed weight, so matmuls over weights run as before.
DISABLED_OPTIMIZERS = [*Q_DQ_AS_WRITTEN, "GemmTransposeFusion"]


def shared_weights_session(
    segment: OnnxSegment, *, spin_between_runs: bool = True, threads: int | None = None, profile_to: str | None = None
) -> ort.InferenceSession:
    """A CPU session that reads the segment's weights where they are (the model's tensors, or the
    weights a loaded artifact read) instead of copying them: no second copy of a multi-GB
    model. Each weight is an initializer the caller owns (SessionOptions.add_initializer), which
    ONNX Runtime uses instead of the graph's. Nothing may copy or rewrite the weights on the way:
    matmul weights are not packed for its kernels, and no graph optimizer runs (they read the
    graph's copy of a weight, not the one given), so matmuls over transposed weights are rewritten
    to read them as they lie (converters/passes/transposed_weights.py). Matmuls run ~10-25% slower
    than on packed weights. The graph is given as a file whose weights file exists, as ONNX
    Runtime checks, but is empty (sparse) and never read. `profile_to`: as create_session's."""
    options = _options(spin_between_runs, threads, profile_to)
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


def _options(spin_between_runs: bool, threads: int | None, profile_to: str | None = None) -> ort.SessionOptions:
    options = ort.SessionOptions()
    if profile_to is not None:
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(profile_to, "profile")
        options.optimized_model_filepath = os.path.join(profile_to, OPTIMIZED_MODEL)
        # The weights beside the graph: a graph over 2 GB is no single protobuf.
        options.add_session_config_entry("session.optimized_model_external_initializers_file_name", "weights.bin")
    if threads is not None:
        options.intra_op_num_threads = threads
    if not spin_between_runs:
        options.add_session_config_entry("session.force_spinning_stop", "1")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # ORT logs a warning per unused initializer etc.; errors still raise.
    options.log_severity_level = 3
    return options


def segment_session(
    segment: OnnxSegment, *, spin_between_runs: bool = True, profile_to: str | None = None
) -> ort.InferenceSession:
    """A session running `segment`, bfloat16 widened to float32 (the CPU provider has no bfloat16
    kernels; the engine module casts at its boundary); reading its weights in place where they
    are SHARE_WEIGHTS_MIN_BYTES or more. `profile_to`: as create_session's."""
    runnable = widen_bfloat16(segment)
    if runnable.weight_bytes >= SHARE_WEIGHTS_MIN_BYTES:
        return shared_weights_session(runnable, spin_between_runs=spin_between_runs, profile_to=profile_to)
    return create_session(
        runnable.model.SerializeToString(), runnable.weights, spin_between_runs=spin_between_runs, profile_to=profile_to
    )


@functools.cache
def fast_path_works() -> bool:
    """Whether OrtEngineModule's fast path runs on this ONNX Runtime and gives what the public
    path gives, bit for bit: tried once per process on a tiny engine with a float, a bool and an
    int64 input and output. Its binding is private and changes between releases (1.32 dropped
    OrtValueVector.push_back's bool flag): any failure here leaves the public path."""
    names = ("x", "mask", "ids")
    sigs = tuple(
        TensorSig(n, n, dtype, (2, 3), (2, 3), (2, 3))
        for n, dtype in zip(names, (torch.float32, torch.bool, torch.int64))
    )
    types = (TensorProto.FLOAT, TensorProto.BOOL, TensorProto.INT64)
    graph = helper.make_graph(
        [
            helper.make_node("Neg", ["x"], ["x_out"]),
            helper.make_node("Not", ["mask"], ["mask_out"]),
            helper.make_node("Add", ["ids", "ids"], ["ids_out"]),
        ],
        "probe",
        [helper.make_tensor_value_info(n, t, [2, 3]) for n, t in zip(names, types)],
        [helper.make_tensor_value_info(f"{n}_out", t, [2, 3]) for n, t in zip(names, types)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
    segment = OnnxSegment(model)
    outs = tuple(TensorSig(f"{s.name}_out", s.source, s.dtype, s.min_shape, s.opt_shape, s.max_shape) for s in sigs)
    # Fixed values: the probe must not draw from torch's random generator (the user's seeds).
    tensors = (
        torch.tensor([[1.5, -2.0, 0.0], [3.25, -0.5, 7.0]]),
        torch.tensor([[True, False, True], [False, False, True]]),
        torch.arange(6).reshape(2, 3),
    )
    try:
        session = create_session(model.SerializeToString())
        fast = OrtEngineModule("probe", session, segment, sigs, outs, True, fast_path=True).run(tensors)
        public = OrtEngineModule("probe", session, segment, sigs, outs, True, fast_path=False).run(tensors)
    except Exception:  # a private API: whatever it raises on another version means "not here"
        return False
    return all(a.dtype == b.dtype and torch.equal(a, b) for a, b in zip(fast, public))
