"""OrtEngineModule: one engine segment executed by ONNX Runtime on torch tensors' memory."""
from __future__ import annotations

import functools
from typing import Any, Iterable, Sequence

import torch
from onnx import TensorProto, helper

from converters.core.builder import IR_VERSION, OPSET
from converters.core.dtypes import ORT_TYPES
from converters.passes.bfloat16 import widen_bfloat16
from converters.passes.weights import OnnxSegment
from trt_lower.runtime.ort_session import create_session
from trt_lower.runtime.engine_module import EngineModule, Outputs
from trt_lower.runtime.signature import TensorSig

_CPU = torch.device("cpu")


def _casts(pairs: Iterable[tuple[torch.dtype, torch.dtype]]) -> tuple[torch.dtype | None, ...]:
    """For (from, to) dtype pairs: `to` where the two differ, else None; () when none differ."""
    casts = tuple(None if a == b else b for a, b in pairs)
    return casts if any(c is not None for c in casts) else ()


class OrtEngineModule(EngineModule):
    """Runs the segment's ONNX on torch tensors (CPU) without copying them.

    Two paths, with the same results. The public one: `InferenceSession.run` on `Tensor.numpy()`
    views, `torch.from_numpy` on its outputs; ONNX Runtime makes a non-contiguous array contiguous
    itself. The fast one, where `fast_path_works()` (a private API of ONNX Runtime's, tried once
    per process): the tensors' memory goes in through DLPack (an `OrtValueVector`, the binding
    ONNX Runtime's own PyTorch training front end uses) and its output buffers come back as torch
    tensors the same way, straight through the session's C binding: no numpy object on either
    side. Measured against `session.run` on `Tensor.numpy()` views with `torch.from_numpy` on the
    outputs (bench/bench_overhead.py's MLP, alternating blocks): ~2 µs less per call; a DLPack
    capsule per input costs ~0.5 µs less than one batch of (address, shape, dtype) lists on the
    MLP, ~3 µs on the two-engine MLP; `run_with_ort_values`, an IOBinding and output buffers
    allocated by torch cost more (an object or a binding call per tensor per call, and the
    public wrappers' checks). Inputs that are not one contiguous block (or carry torch's lazy
    negation bit, which DLPack drops) take the numpy path there too. Where the engine's I/O
    dtype differs from the segment's (float64 runs as float32), tensors are cast on the way in
    and back on the way out. spin_between_runs: see create_session (False where the lowered call
    runs other work between this engine's runs). fast_path: None takes the fast path where it
    works; False the public path alone.
    """

    def __init__(self, name: str, segment: OnnxSegment, inputs: tuple[TensorSig, ...],
                 outputs: tuple[TensorSig, ...], tuple_output: bool, *, spin_between_runs: bool = True,
                 fast_path: bool | None = None) -> None:
        super().__init__(name, inputs, outputs, tuple_output, _CPU)
        self.segment = segment
        # bfloat16 runs as float32 (the CPU provider has no bfloat16 kernels): the casts below follow.
        runnable = widen_bfloat16(segment)
        self._session = create_session(runnable.model.SerializeToString(), runnable.weights,
                                       spin_between_runs=spin_between_runs)
        engine = {a.name: ORT_TYPES[a.type] for a in self._session.get_inputs() + self._session.get_outputs()}
        self._in_names = tuple(s.name for s in inputs)
        self._out_names = [s.name for s in outputs]
        self._fast = fast_path_works() if fast_path is None else fast_path
        # Public: the session's Python wrapper, which validates the feeds on every call.
        self._run = self._session.run
        if self._fast:
            from onnxruntime.capi import _pybind_state as binding

            # The wrapper's C binding object, which takes the same arguments without the checks.
            self._run = self._session._sess.run
            self._run_vector = self._session._sess.run_with_ortvaluevector
            self._vector = binding.OrtValueVector
            self._run_options = binding.RunOptions()  # read-only in a run: one serves every thread
            cpu_memory = binding.OrtDevice(binding.OrtDevice.cpu(), binding.OrtDevice.default_memory(), 0)
            self._out_devices = [cpu_memory] * len(outputs)
        self._bool_inputs = tuple(engine[s.name] == torch.bool for s in inputs)
        # DLPack hands a bool buffer over as uint8: these outputs are viewed back as bool.
        self._bool_outputs = tuple(i for i, s in enumerate(outputs) if engine[s.name] == torch.bool)
        # Where the engine's I/O dtype differs from the segment's (float64 computed as float32):
        # per input the engine's dtype, per output the segment's; empty when none differs.
        self._in_casts = _casts((s.dtype, engine[s.name]) for s in inputs)
        self._casts_back = _casts((engine[s.name], s.dtype) for s in outputs)

    @property
    def onnx_bytes(self) -> bytes:
        """The engine's ONNX, self-contained (serialized with its weights on each access)."""
        return self.segment.to_bytes()

    def describe_backend(self) -> str:
        return "onnxruntime"

    def run(self, tensors: Sequence[torch.Tensor]) -> Outputs:
        if self._in_casts:
            tensors = [t if cast is None else t.to(cast) for t, cast in zip(tensors, self._in_casts)]
        feeds = self._feeds(tensors) if self._fast else None
        if feeds is None:
            results = [torch.from_numpy(a) for a in self._run(self._out_names, self._numpy_feeds(tensors), None)]
        else:
            fetched = self._vector()
            self._run_vector(self._run_options, self._in_names, feeds, self._out_names, fetched, self._out_devices)
            results = fetched.to_dlpacks(torch._C._from_dlpack)
            for i in self._bool_outputs:
                results[i] = results[i].view(torch.bool)
        if self._casts_back:
            results = [t if back is None else t.to(back) for t, back in zip(results, self._casts_back)]
        return tuple(results) if self.tuple_output else results[0]

    def _feeds(self, tensors: Sequence[torch.Tensor]) -> Any:
        """The inputs as OrtValues over their memory (DLPack; each keeps its tensor alive), or
        None where one is not a contiguous block or carries the negation bit (which DLPack
        drops), or ONNX Runtime refuses it."""
        feeds = self._vector()
        try:
            for t, is_bool in zip(tensors, self._bool_inputs):
                if not t.is_contiguous() or t.is_neg():
                    return None
                # ONNX Runtime reads no DLPack bool: a bool goes as its bytes, flagged bool.
                feeds.push_back(torch._C._to_dlpack(t.view(torch.uint8) if is_bool else t), is_bool)
        except RuntimeError:
            return None
        return feeds

    def _numpy_feeds(self, tensors: Sequence[torch.Tensor]) -> dict[str, Any]:
        """Numpy views of the tensors' memory (the tensors outlive the run that reads them)."""
        try:
            return {name: t.numpy() for name, t in zip(self._in_names, tensors)}
        except RuntimeError:  # numpy() refuses a tensor that requires grad or carries the negation bit
            return {name: t.detach().resolve_conj().resolve_neg().numpy() for name, t in zip(self._in_names, tensors)}


@functools.cache
def fast_path_works() -> bool:
    """Whether OrtEngineModule's fast path runs on this ONNX Runtime and gives what the public
    path gives, bit for bit: tried once per process on a tiny engine with a float, a bool and an
    int64 input and output. Its binding is private and changes between releases (1.32 dropped
    OrtValueVector.push_back's bool flag): any failure here leaves the public path."""
    names = ("x", "mask", "ids")
    sigs = tuple(TensorSig(n, n, dtype, (2, 3), (2, 3), (2, 3))
                 for n, dtype in zip(names, (torch.float32, torch.bool, torch.int64)))
    types = (TensorProto.FLOAT, TensorProto.BOOL, TensorProto.INT64)
    graph = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["x_out"]), helper.make_node("Not", ["mask"], ["mask_out"]),
         helper.make_node("Add", ["ids", "ids"], ["ids_out"])], "probe",
        [helper.make_tensor_value_info(n, t, [2, 3]) for n, t in zip(names, types)],
        [helper.make_tensor_value_info(f"{n}_out", t, [2, 3]) for n, t in zip(names, types)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
    segment = OnnxSegment(model)
    outs = tuple(TensorSig(f"{s.name}_out", s.source, s.dtype, s.min_shape, s.opt_shape, s.max_shape) for s in sigs)
    # Fixed values: the probe must not draw from torch's random generator (the user's seeds).
    tensors = (torch.tensor([[1.5, -2.0, 0.0], [3.25, -0.5, 7.0]]),
               torch.tensor([[True, False, True], [False, False, True]]), torch.arange(6).reshape(2, 3))
    try:
        fast = OrtEngineModule("probe", segment, sigs, outs, True, fast_path=True).run(tensors)
        public = OrtEngineModule("probe", segment, sigs, outs, True, fast_path=False).run(tensors)
    except Exception:  # a private API: whatever it raises on another version means "not here"
        return False
    return all(a.dtype == b.dtype and torch.equal(a, b) for a, b in zip(fast, public))
