"""TRTEngineModule: one engine segment executed by TensorRT, zero-copy on torch tensors."""
from __future__ import annotations

from typing import Callable

import tensorrt as trt
import torch

from converters.core.dtypes import TRT_TYPES
from trt_lower import device as devices
from trt_lower.runtime.trt_logger import TrtLogger
from trt_lower.runtime.signature import EngineInputError, TensorSig


# (engine dtype, segment dtype) pairs cast at the engine boundary.
_NARROWED = {(torch.int32, torch.int64), (torch.float32, torch.float64)}
_INT32 = torch.iinfo(torch.int32)


class PlanLoadError(RuntimeError):
    """TensorRT could not deserialize a plan, or it does not fit the segment it was built for."""


def _shape(dims: trt.Dims) -> tuple[int, ...]:
    return tuple(int(dims[i]) for i in range(len(dims)))


class TRTEngineModule(torch.nn.Module):
    """Runs a deserialized engine on torch's current stream, with name-based I/O bound to torch
    tensors' memory: inputs are made contiguous, outputs are allocated by torch in the engine's
    shapes and dtypes, and TensorRT reads and writes them in place.

    TensorRT 8.6 turns INT64 engine I/O into INT32, and float64 runs as float32 everywhere: such
    inputs are cast down before the engine (an int64 input outside int32 is refused, never
    wrapped) and outputs cast back up after it, so callers always see the segment's own dtypes.
    With `cuda_graphs`, the first call records the enqueue into a CUDA graph on static I/O
    buffers; later calls copy inputs in, replay, and return copies of the outputs.
    """

    def __init__(self, name: str, plan: bytes, inputs: tuple[TensorSig, ...], outputs: tuple[TensorSig, ...],
                 tuple_output: bool, *, cuda_graphs: bool = False) -> None:
        super().__init__()
        self.name = name
        self.plan = plan
        self.inputs = inputs
        self.outputs = outputs
        self.tuple_output = tuple_output
        self.cuda_graphs = cuda_graphs
        self._device = devices.current()
        self._torch_device = self._device.torch_device()
        self._logger = TrtLogger()
        # The runtime must outlive the engines it deserialized.
        self._runtime = trt.Runtime(self._logger)
        engine = self._runtime.deserialize_cuda_engine(plan)
        if engine is None:
            raise PlanLoadError(self._logger.take_errors() or "deserialize_cuda_engine returned no engine")
        self._engine = engine
        self._check_io()
        self._dtypes = {s.name: TRT_TYPES[engine.get_tensor_dtype(s.name).name] for s in inputs + outputs}
        self._ranges = {s.name: self._profile_range(s.name) for s in inputs}
        if cuda_graphs and any(lo != hi for lo, hi in self._ranges.values()):
            raise ValueError(f"{name}: cuda_graphs=True needs static input shapes")
        self._context = engine.create_execution_context()
        self._replay: Callable[[], None] | None = None
        self._static_inputs: tuple[torch.Tensor, ...] = ()
        self._static_outputs: tuple[torch.Tensor, ...] = ()

    # -- construction checks --------------------------------------------------------------------
    def _check_io(self) -> None:
        engine = self._engine
        io = {engine.get_tensor_name(i) for i in range(engine.num_io_tensors)}
        wanted = {s.name for s in self.inputs + self.outputs}
        if io != wanted:
            raise PlanLoadError(f"the engine's I/O tensors {sorted(io)} are not the segment's {sorted(wanted)}")
        for sig in self.inputs + self.outputs:
            got = TRT_TYPES.get(engine.get_tensor_dtype(sig.name).name)
            if got != sig.dtype and (got, sig.dtype) not in _NARROWED:
                raise PlanLoadError(f"engine tensor '{sig.name}' is {got}, the segment's is {sig.dtype}")

    def _profile_range(self, name: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
        low, _, high = self._engine.get_tensor_profile_shape(name, 0)
        return _shape(low), _shape(high)

    # -- calls --------------------------------------------------------------------------------
    def _check_inputs(self, tensors: tuple[torch.Tensor, ...]) -> None:
        if len(tensors) != len(self.inputs):
            raise EngineInputError(f"{self.name}: expected {len(self.inputs)} inputs, got {len(tensors)}")
        for sig, t in zip(self.inputs, tensors):
            where = f"{self.name}: input '{sig.source}'"
            if not isinstance(t, torch.Tensor):
                raise EngineInputError(f"{where} must be a tensor, got {type(t).__name__}")
            if t.dtype != sig.dtype:
                raise EngineInputError(f"{where} must be {sig.dtype}, got {t.dtype}")
            if self._dtypes[sig.name] == torch.int32 and t.dtype == torch.int64 and t.numel() and not (
                    _INT32.min <= (bounds := t.aminmax()).min and bounds.max <= _INT32.max):
                raise EngineInputError(f"{where} holds values outside int32, and TensorRT "
                                       f"{trt.__version__} engines take int64 as int32")
            low, high = self._ranges[sig.name]
            shape = tuple(t.shape)
            if len(shape) != len(low) or not all(lo <= d <= hi for d, lo, hi in zip(shape, low, high)):
                raise EngineInputError(
                    f"{where} has shape {shape}, outside the engine's optimization profile "
                    f"(min {low}, max {high})"
                )
            # TensorRT dereferences whatever address it is given: a host pointer would crash it.
            if t.device != self._torch_device:
                raise EngineInputError(
                    f"{where} is on {t.device}, the engine runs on {self._torch_device}; "
                    f"move the model and its inputs there (.to('{self._torch_device}'))"
                )

    def _bind(self, inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        """Point the context at `inputs` and at fresh output tensors, which it returns."""
        for sig, t in zip(self.inputs, inputs):
            if not self._context.set_input_shape(sig.name, tuple(t.shape)):
                raise EngineInputError(f"{self.name}: {self._logger.take_errors()}")
            self._context.set_tensor_address(sig.name, t.data_ptr())
        outputs = tuple(
            torch.empty(_shape(self._context.get_tensor_shape(s.name)), dtype=self._dtypes[s.name],
                        device=self._torch_device)
            for s in self.outputs
        )
        for sig, t in zip(self.outputs, outputs):
            self._context.set_tensor_address(sig.name, t.data_ptr())
        return outputs

    def _enqueue(self) -> None:
        with self._device.stream() as handle:
            if not self._context.execute_async_v3(handle):
                raise RuntimeError(f"{self.name}: TensorRT execution failed: {self._logger.take_errors()}")

    def _engine_inputs(self, tensors: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        return tuple(t.to(self._dtypes[s.name]).contiguous() for s, t in zip(self.inputs, tensors))

    def _run_graph(self, tensors: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        if self._replay is None:
            self._static_inputs = tuple(
                torch.empty(t.shape, dtype=self._dtypes[s.name], device=self._torch_device)
                for s, t in zip(self.inputs, tensors)
            )
            self._static_outputs = self._bind(self._static_inputs)
            self._replay = self._device.capture(self._enqueue)
        for static, t in zip(self._static_inputs, tensors):
            static.copy_(t)
        self._replay()
        # The next replay overwrites the static buffers: hand out copies.
        return tuple(t.clone() for t in self._static_outputs)

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        self._check_inputs(tensors)
        if self.cuda_graphs:
            results = self._run_graph(tensors)
        else:
            # Held until the enqueue has been issued; torch's allocator orders reuse after it.
            args = self._engine_inputs(tensors)
            results = self._bind(args)
            self._enqueue()
        results = tuple(t.to(s.dtype) for s, t in zip(self.outputs, results))
        return results if self.tuple_output else results[0]

    def extra_repr(self) -> str:
        ins = ", ".join(f"{s.source}: {s.describe()}" for s in self.inputs)
        outs = ", ".join(f"{s.source}: {s.describe()}" for s in self.outputs)
        graphs = ", cuda_graphs" if self.cuda_graphs else ""
        return f"{self.name}, tensorrt {trt.__version__}{graphs}, ({ins}) -> ({outs})"
