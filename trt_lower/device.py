"""The device TensorRT engines run on: the one seam between the engine layer and CUDA.

Everything the TensorRT path asks of CUDA goes through a Device: is there one, which GPU it is
(part of the engine cache key), the torch device of engine I/O, the stream to enqueue on, and
CUDA-graph capture. The default is torch's current CUDA device. The tests swap in a host device
(`using`) to run the whole TensorRT path on CPU against a double of the TensorRT API.
"""
from __future__ import annotations

import contextlib
from typing import Callable, ContextManager, Iterator, Protocol

import torch


class Device(Protocol):
    def unavailable_reason(self) -> str | None:
        """Why engines cannot run here, or None when they can."""

    def identity(self) -> str:
        """Names the hardware a serialized engine is tied to (GPU model, compute capability)."""

    def torch_device(self) -> torch.device:
        """Where engine inputs must live and outputs are allocated."""

    def stream(self) -> ContextManager[int]:
        """The stream handle to enqueue an engine on, ordered with torch's current stream."""

    def capture(self, run: Callable[[], None]) -> Callable[[], None]:
        """Record `run` (an enqueue on `stream()`) once; returns the replay."""


class CudaDevice:
    """torch's current CUDA device and stream."""

    def __init__(self) -> None:
        self._side_streams: dict[int, torch.cuda.Stream] = {}

    def unavailable_reason(self) -> str | None:
        return None if torch.cuda.is_available() else "no CUDA device is available"

    def identity(self) -> str:
        index = torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        return f"{torch.cuda.get_device_name(index)} sm_{major}{minor}"

    def torch_device(self) -> torch.device:
        return torch.device("cuda", torch.cuda.current_device())

    @contextlib.contextmanager
    def stream(self) -> Iterator[int]:
        current = torch.cuda.current_stream()
        if current != torch.cuda.default_stream():
            yield current.cuda_stream
            return
        # TensorRT synchronizes around every enqueue on the legacy default stream; run on a side
        # stream instead, ordered after the work already queued and before the work that follows.
        index = torch.cuda.current_device()
        side = self._side_streams.setdefault(index, torch.cuda.Stream(index))
        side.wait_stream(current)
        with torch.cuda.stream(side):
            yield side.cuda_stream
        current.wait_stream(side)

    def capture(self, run: Callable[[], None]) -> Callable[[], None]:
        # The first enqueue of an execution context does one-time setup that must not be
        # captured (TensorRT's CUDA-graph guidance): run once on a side stream, then record.
        warmup = torch.cuda.Stream()
        warmup.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(warmup):
            run()
        torch.cuda.current_stream().wait_stream(warmup)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
        return graph.replay


_current: Device = CudaDevice()


def current() -> Device:
    return _current


@contextlib.contextmanager
def using(device: Device) -> Iterator[Device]:
    """Run the TensorRT path on `device` inside the block."""
    global _current
    previous, _current = _current, device
    try:
        yield device
    finally:
        _current = previous
