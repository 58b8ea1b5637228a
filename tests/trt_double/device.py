"""HostDevice: trt_lower's device seam pointed at the CPU, where the TensorRT double runs."""

from __future__ import annotations

import contextlib
import itertools
from typing import Callable, Iterator, Sequence

import torch

from trt_double import double
from trt_lower.values.device import Device


class HostDevice(Device):
    """Engine I/O in host memory, with streams as the double keeps them: work enqueued inside
    `stream()` runs when the block ends (where CudaDevice hands it back to torch's current stream),
    except inside `caller_stream()`, which stands for a user's own CUDA stream: there it runs only
    at the block's `synchronize()`. A CUDA graph records the enqueued work and replays it."""

    def __init__(self, torch_device: str = "cpu") -> None:
        self._torch_device = torch.device(torch_device)
        self._handles = itertools.count(2)
        self._side = 1  # the one stream engines use outside caller_stream(), as CudaDevice's side stream
        self._caller: int | None = None
        self._held: dict[int, list[torch.Tensor]] = {}
        self.captures = 0

    def unavailable_reason(self) -> str | None:
        return None

    def identity(self) -> str:
        return "trt_double host"

    def torch_device(self) -> torch.device:
        return self._torch_device

    @contextlib.contextmanager
    def stream(self, device: torch.device) -> Iterator[int]:
        if self._caller is not None:
            yield self._caller
            return
        try:
            yield self._side
        finally:
            self.synchronize(self._side)

    def hold(self, stream: int, tensors: Sequence[torch.Tensor]) -> None:
        # The double reads and writes host memory when the stream runs: keep it allocated until
        # then, as torch's stream-ordered caching allocator does on a GPU.
        self._held.setdefault(stream, []).extend(tensors)

    def synchronize(self, stream: int) -> None:
        try:
            double.synchronize(stream)
        finally:
            self._held.pop(stream, None)

    @contextlib.contextmanager
    def caller_stream(self) -> Iterator[int]:
        """Calls inside the block enqueue on one stream that runs at `synchronize(handle)`."""
        self._caller = handle = next(self._handles)
        try:
            yield handle
        finally:
            self._caller = None

    def capture(self, run: Callable[[int], None], device: torch.device) -> Callable[[], None]:
        self.captures += 1
        with self.stream(device) as warmup:
            run(warmup)
        handle = next(self._handles)
        double.begin_capture(handle)
        try:
            run(handle)
        finally:
            jobs = double.end_capture(handle)

        def replay() -> None:
            with self.stream(device) as stream:
                double.replay(jobs, stream)

        return replay
