"""TorchCuda: the part of `torch.cuda` that trt_lower.values.device.CudaDevice uses, modelled on the CPU
over the double's CUDA runtime (a current device per thread, streams bound to a device), so that
CudaDevice itself runs in tests: `monkeypatch.setattr(trt_lower.values.device, "cuda", TorchCuda())`.

It copies torch's semantics where they decide which device and stream work lands on:
- the default stream's handle is 0 on every device (the legacy stream of the current device);
- `stream(s)` makes `s` current and, like torch.cuda.set_stream, switches the current device to
  `s`'s until the block ends;
- `graph(g)` without `stream=` captures on one process-wide stream made on whatever device was
  current at the first capture (torch.cuda.graph's class attribute `default_capture_stream`);
  capture refuses the default stream, and a replay on another device than the capture's raises.
A join (`a.wait_stream(b)`) runs `b`'s pending work: everything queued on `b` so far happens
before what `a` runs next. `streams_created` counts Stream() calls; `joins` lists (waiter, waited).
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Iterator

import torch

from trt_double import double


@dataclass(frozen=True)
class CudaStream:
    device_index: int
    cuda_stream: int  # the handle TensorRT is given
    cuda: "TorchCuda" = field(compare=False, repr=False)

    @property
    def device(self) -> torch.device:
        return torch.device("cuda", self.device_index)

    def wait_stream(self, other: CudaStream) -> None:
        self.cuda.joins.append((self, other))
        double.synchronize(other.cuda_stream)

    def synchronize(self) -> None:
        double.synchronize(self.cuda_stream)


class CudaGraph:
    def __init__(self, cuda: "TorchCuda") -> None:
        self._cuda = cuda
        self._stream: CudaStream | None = None
        self._jobs: list[double._Job] = []

    def capture_begin(self) -> None:
        stream = self._cuda.current_stream()
        if stream.cuda_stream == 0:
            raise RuntimeError("CUDA graphs must be captured on a non-default stream")
        self._stream = stream
        double.begin_capture(stream.cuda_stream)

    def capture_end(self) -> None:
        assert self._stream is not None
        self._jobs = double.end_capture(self._stream.cuda_stream)

    def replay(self) -> None:
        assert self._stream is not None
        if double.get_device() != self._stream.device_index:
            raise RuntimeError(
                f"CUDA error: a graph captured on device {self._stream.device_index} was "
                f"launched with device {double.get_device()} current"
            )
        double.replay(self._jobs, self._cuda.current_stream().cuda_stream)


class TorchCuda:
    def __init__(self, devices: int = 2) -> None:
        self.devices = devices
        self.streams_created = 0
        self.joins: list[tuple[CudaStream, CudaStream]] = []
        self.default_capture_stream: CudaStream | None = None
        self._local = threading.local()  # .current: device -> this thread's current stream there

    # -- devices --------------------------------------------------------------------------------
    def is_available(self) -> bool:
        return True

    def current_device(self) -> int:
        return double.get_device()

    def get_device_capability(self, index: int) -> tuple[int, int]:
        return 8, 0

    def get_device_name(self, index: int) -> str:
        return f"trt_double GPU {index}"

    def _index(self, device: torch.device | int | None) -> int:
        index = device.index if isinstance(device, torch.device) else device
        if index is None:
            return double.get_device()
        if not 0 <= index < self.devices:
            raise RuntimeError(f"CUDA error: invalid device ordinal {index}")
        return index

    @contextlib.contextmanager
    def device(self, device: torch.device | int) -> Iterator[None]:
        previous = double.get_device()
        double.set_device(self._index(device))
        try:
            yield
        finally:
            double.set_device(previous)

    # -- streams --------------------------------------------------------------------------------
    def Stream(self, device: torch.device | int | None = None) -> CudaStream:  # noqa: N802 (torch's name)
        self.streams_created += 1
        index = self._index(device)
        return CudaStream(index, double.create_stream(index), self)

    def default_stream(self, device: torch.device | int | None = None) -> CudaStream:
        return CudaStream(self._index(device), 0, self)

    def _current(self) -> dict[int, CudaStream]:
        current: dict[int, CudaStream] | None = getattr(self._local, "current", None)
        if current is None:
            current = self._local.current = {}
        return current

    def current_stream(self, device: torch.device | int | None = None) -> CudaStream:
        index = self._index(device)
        return self._current().get(index) or self.default_stream(index)

    def set_stream(self, stream: CudaStream) -> None:
        double.set_device(stream.device_index)
        self._current()[stream.device_index] = stream

    @contextlib.contextmanager
    def stream(self, stream: CudaStream) -> Iterator[None]:
        source = self.current_stream()
        target = self.current_stream(stream.device_index) if source.device_index != stream.device_index else None
        self.set_stream(stream)
        try:
            yield
        finally:
            if target is not None:
                self.set_stream(target)
            self.set_stream(source)

    # -- graphs ---------------------------------------------------------------------------------
    def CUDAGraph(self) -> CudaGraph:  # noqa: N802 (torch's name)
        return CudaGraph(self)

    @contextlib.contextmanager
    def graph(
        self, cuda_graph: CudaGraph, stream: CudaStream | None = None, capture_error_mode: str = "global"
    ) -> Iterator[None]:
        if stream is None:
            if self.default_capture_stream is None:
                self.default_capture_stream = self.Stream()
            stream = self.default_capture_stream
        with self.stream(stream):
            cuda_graph.capture_begin()
            try:
                yield
            finally:
                cuda_graph.capture_end()
