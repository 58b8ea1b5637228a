"""OrtEngineModule: one engine segment executed by ONNX Runtime on torch tensors' memory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Protocol, Sequence

import torch

from trt_lower.runtime.engine_module import EngineModule, Outputs
from trt_lower.values.dtypes import ORT_TYPES
from trt_lower.values.signature import TensorSig

if TYPE_CHECKING:
    import onnxruntime as ort

_CPU = torch.device("cpu")


def _casts(pairs: Iterable[tuple[torch.dtype, torch.dtype]]) -> tuple[torch.dtype | None, ...]:
    """For (from, to) dtype pairs: `to` where the two differ, else None; () when none differ."""
    casts = tuple(None if a == b else b for a, b in pairs)
    return casts if any(c is not None for c in casts) else ()


class OnnxSource(Protocol):
    """What a session was made from (an OnnxSegment): its self-contained ONNX on request."""

    def to_bytes(self) -> bytes: ...


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
    dtype differs from the segment's (float64 runs as float32; bfloat16 as float32, which the
    build stage's session computes in), tensors are cast on the way in and back on the way out.
    The session is made by the build stage (trt_lower/engine/ort_session.py), which also decides
    `fast_path` (there: fast_path_works); `segment` is what it was made from.
    """

    def __init__(
        self,
        name: str,
        session: ort.InferenceSession,
        segment: OnnxSource,
        inputs: tuple[TensorSig, ...],
        outputs: tuple[TensorSig, ...],
        tuple_output: bool,
        *,
        fast_path: bool = False,
    ) -> None:
        super().__init__(name, inputs, outputs, tuple_output, _CPU)
        self.segment = segment
        self._session = session
        engine = {a.name: ORT_TYPES[a.type] for a in self._session.get_inputs() + self._session.get_outputs()}
        self._in_names = tuple(s.name for s in inputs)
        self._out_names = [s.name for s in outputs]
        self._fast = fast_path
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
        if self.profile.several:  # one session serves every profile: the choice only refuses
            self.profile(tuple(t.shape for t in tensors))
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
