"""OrtEngineModule: one engine segment executed by ONNX Runtime, zero-copy on torch tensors."""
from __future__ import annotations

import numpy as np
import torch

from converters.builder import numpy_type
from trt_lower.engine.onnxruntime import create_session
from trt_lower.runtime.signature import TensorSig, check_inputs

# ONNX Runtime's names of the engine I/O element types.
_ORT_DTYPES = {
    "tensor(float)": torch.float32,
    "tensor(float16)": torch.float16,
    "tensor(int64)": torch.int64,
    "tensor(int32)": torch.int32,
    "tensor(uint8)": torch.uint8,
    "tensor(bool)": torch.bool,
}


class OrtEngineModule(torch.nn.Module):
    """Runs the segment's ONNX bytes with I/O bound to torch tensors' memory (CPU).

    Static outputs are allocated by torch and ONNX Runtime writes into them. Outputs whose shape
    varies with the inputs, and calls with empty tensors (which have no address to bind), go
    through ONNX Runtime's own allocation and are copied into torch tensors. Where the engine's
    I/O dtype differs from the segment's (float64 runs as float32), tensors are cast on the way
    in and back on the way out.
    """

    def __init__(self, name: str, onnx_bytes: bytes, inputs: tuple[TensorSig, ...],
                 outputs: tuple[TensorSig, ...], tuple_output: bool) -> None:
        super().__init__()
        self.name = name
        self.onnx_bytes = onnx_bytes
        self.inputs = inputs
        self.outputs = outputs
        self.tuple_output = tuple_output
        self._session = create_session(onnx_bytes)
        self._dtypes = {a.name: _ORT_DTYPES[a.type] for a in self._session.get_inputs() + self._session.get_outputs()}
        self._np_types = {name: np.dtype(numpy_type(dtype)) for name, dtype in self._dtypes.items()}
        self._static_outputs = all(s.is_static for s in outputs) and all(0 not in s.shape for s in outputs)

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        check_inputs(self.name, self.inputs, tensors, "cpu")
        # Keep the contiguous copies alive until the run has read them.
        args = [t.to(self._dtypes[sig.name]).contiguous() for sig, t in zip(self.inputs, tensors)]
        if any(t.numel() == 0 for t in args):
            feeds = {sig.name: t.numpy() for sig, t in zip(self.inputs, args)}
            return self._results(tuple(torch.from_numpy(a) for a in self._session.run(None, feeds)))
        binding = self._session.io_binding()
        for sig, t in zip(self.inputs, args):
            binding.bind_input(sig.name, "cpu", 0, self._np_types[sig.name], tuple(t.shape), t.data_ptr())
        if self._static_outputs:
            results = tuple(torch.empty(sig.shape, dtype=self._dtypes[sig.name]) for sig in self.outputs)
            for sig, t in zip(self.outputs, results):
                binding.bind_output(sig.name, "cpu", 0, self._np_types[sig.name], sig.shape, t.data_ptr())
            self._session.run_with_iobinding(binding)
        else:
            for sig in self.outputs:
                binding.bind_output(sig.name, "cpu")
            self._session.run_with_iobinding(binding)
            results = tuple(torch.from_numpy(v.numpy()) for v in binding.get_outputs())
        return self._results(results)

    def _results(self, results: tuple[torch.Tensor, ...]) -> torch.Tensor | tuple[torch.Tensor, ...]:
        results = tuple(t.to(sig.dtype) for sig, t in zip(self.outputs, results))
        return results if self.tuple_output else results[0]

    def extra_repr(self) -> str:
        ins = ", ".join(f"{s.source}: {s.describe()}" for s in self.inputs)
        outs = ", ".join(f"{s.source}: {s.describe()}" for s in self.outputs)
        return f"{self.name}, onnxruntime, ({ins}) -> ({outs})"
