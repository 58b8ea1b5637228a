"""OrtEngineModule: one engine segment executed by ONNX Runtime on torch tensors' memory."""
from __future__ import annotations

from typing import Iterable, Sequence

import torch

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

    Inputs go to ONNX Runtime as numpy views of the tensors' memory; ONNX Runtime allocates the
    outputs and hands their buffers to numpy, which torch.from_numpy wraps. Measured per call
    (bench/bench_overhead.py's MLP and BERT): `run` of the session's C binding object
    (`InferenceSession._sess`, stable across the pinned version; the Python wrapper re-validates
    the feed names on every call), looked up once, costs the same as an IOBinding with
    torch-allocated outputs on a tiny MLP and ~0.1-0.2 ms less on BERT, where ONNX Runtime's own
    output allocation beats writing into bound buffers; `run_with_ort_values` costs more (an
    OrtValue per input per call). Where the engine's I/O dtype differs from the segment's (float64 runs as float32),
    tensors are cast on the way in and back on the way out. spin_between_runs: see create_session
    (False where the lowered call runs other work between this engine's runs).
    """

    def __init__(self, name: str, segment: OnnxSegment, inputs: tuple[TensorSig, ...],
                 outputs: tuple[TensorSig, ...], tuple_output: bool, *, spin_between_runs: bool = True) -> None:
        super().__init__(name, inputs, outputs, tuple_output, _CPU)
        self.segment = segment
        # bfloat16 runs as float32 (the CPU provider has no bfloat16 kernels): the casts below follow.
        runnable = widen_bfloat16(segment)
        self._session = create_session(runnable.model.SerializeToString(), runnable.weights,
                                       spin_between_runs=spin_between_runs)
        self._run = self._session._sess.run
        engine = {a.name: ORT_TYPES[a.type] for a in self._session.get_inputs() + self._session.get_outputs()}
        self._in_names = tuple(s.name for s in inputs)
        self._out_names = [s.name for s in outputs]
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
        # Numpy views of the tensors' memory; the tensors outlive the run that reads them. ONNX
        # Runtime copies a non-contiguous array into a contiguous one itself (pinned by
        # tests/test_reliability_inputs.py), so the common call is one numpy() per input (one
        # input without a comprehension: half a microsecond less).
        names = self._in_names
        try:
            if len(names) == 1:
                feeds = {names[0]: tensors[0].numpy()}
            else:
                feeds = {name: t.numpy() for name, t in zip(names, tensors)}
        except RuntimeError:  # numpy() refuses a tensor that requires grad (engines are inference only)
            feeds = {name: t.detach().resolve_conj().resolve_neg().numpy() for name, t in zip(names, tensors)}
        arrays = self._run(self._out_names, feeds, None)
        if not self._casts_back:
            return tuple(map(torch.from_numpy, arrays)) if self.tuple_output else torch.from_numpy(arrays[0])
        results = tuple(torch.from_numpy(a) if back is None else torch.from_numpy(a).to(back)
                        for a, back in zip(arrays, self._casts_back))
        return results if self.tuple_output else results[0]
