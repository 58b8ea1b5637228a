"""The device TensorRT engines run on: the one seam between the engine layer and CUDA.

Everything the TensorRT path asks of CUDA goes through a Device: is there one, which GPU it is
(part of the engine cache key), the torch device of engine I/O, the stream to enqueue on, and
CUDA-graph capture. The default is torch's current CUDA device. The tests swap in a host device
(`using`) to run the whole TensorRT path on CPU against a double of the TensorRT API, and run
CudaDevice itself against a CPU model of `torch.cuda` put in place of `cuda` below.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Callable, ContextManager, Iterator, Protocol, Sequence

import torch
from torch import cuda


class Device(Protocol):
    def unavailable_reason(self) -> str | None:
        """Why engines cannot run here, or None when they can."""

    def identity(self) -> str:
        """Names the hardware a serialized engine is tied to (GPU model, compute capability)."""

    def torch_device(self) -> torch.device:
        """Where engine inputs must live and outputs are allocated (read once, by each engine)."""

    def stream(self, device: torch.device) -> ContextManager[int]:
        """The handle of the stream to enqueue on `device` (the engine's), ordered with torch's
        current stream there; inside the block `device` is the current CUDA device."""

    def hold(self, stream: int, tensors: Sequence[torch.Tensor]) -> None:
        """Keep `tensors` (read or written by work enqueued on `stream`) allocated until it has run."""

    def capture(self, run: Callable[[int], None], device: torch.device) -> Callable[[], None]:
        """Run `run(stream)` once for real (its inputs must hold real data), then record it into
        a CUDA graph; returns the replay. Raises when capture fails."""


class CudaDevice:
    """torch's CUDA devices and streams."""

    def __init__(self) -> None:
        # One side stream and one capture stream per GPU, made once: a Stream per call would
        # cost a driver call each.
        self._side_streams: dict[int, cuda.Stream] = {}
        self._capture_streams: dict[int, cuda.Stream] = {}
        # One capture at a time (torch's rule for graphs): their streams are shared.
        self._capture_lock = threading.Lock()

    def unavailable_reason(self) -> str | None:
        return None if cuda.is_available() else "no CUDA device is available"

    def identity(self) -> str:
        index = cuda.current_device()
        major, minor = cuda.get_device_capability(index)
        return f"{cuda.get_device_name(index)} sm_{major}{minor}"

    def torch_device(self) -> torch.device:
        return torch.device("cuda", cuda.current_device())

    @staticmethod
    def _made_once(streams: dict[int, cuda.Stream], device: torch.device) -> cuda.Stream:
        index = device.index or 0
        stream = streams.get(index)
        if stream is None:
            stream = streams.setdefault(index, cuda.Stream(index))
        return stream

    @contextlib.contextmanager
    def stream(self, device: torch.device) -> Iterator[int]:
        with cuda.device(device):
            current = cuda.current_stream(device)
            if current != cuda.default_stream(device):
                yield current.cuda_stream
                return
            # TensorRT synchronizes around every enqueue on the legacy default stream; run on a
            # side stream instead, ordered after the work already queued and before what follows
            # (also when the enqueue raises).
            side = self._made_once(self._side_streams, device)
            side.wait_stream(current)
            try:
                with cuda.stream(side):
                    yield side.cuda_stream
            finally:
                current.wait_stream(side)

    def hold(self, stream: int, tensors: Sequence[torch.Tensor]) -> None:
        """On torch's current stream, nothing to do: its allocator reuses the tensors' memory
        only after the work queued there. On the side stream (see `stream`), outputs come from
        the side stream's pool but are used on the default stream after the call: recorded
        there, so that another thread's call cannot reuse their memory before the default
        stream's work on them has run."""
        side = self._side_streams.get(tensors[0].device.index or 0) if tensors else None
        if side is None or stream != side.cuda_stream:
            return
        default = cuda.default_stream(tensors[0].device)
        for t in tensors:
            t.record_stream(default)

    def capture(self, run: Callable[[int], None], device: torch.device) -> Callable[[], None]:
        # The first enqueue of an execution context does one-time setup that must not be
        # captured (TensorRT's CUDA-graph guidance): run once for real, then record.
        with self.stream(device) as warmup:
            run(warmup)
        # On a stream of the engine's GPU: torch.cuda.graph's own default is one stream for the
        # whole process, made on whichever GPU was current at the first capture.
        with self._capture_lock, cuda.device(device):
            stream = self._made_once(self._capture_streams, device)
            graph = cuda.CUDAGraph()
            # thread_local: other threads may keep using CUDA while this one captures.
            with cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
                run(stream.cuda_stream)

        def replay() -> None:
            with cuda.device(device):
                graph.replay()

        return replay


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
