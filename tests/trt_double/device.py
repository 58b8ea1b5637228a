"""HostDevice: trt_lower's device seam pointed at the CPU, where the TensorRT double runs."""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import torch

from trt_lower.device import Device


class HostDevice(Device):
    """Engine I/O in host memory; no streams (the double runs synchronously), and a "CUDA graph"
    that replays by running the recorded enqueue again."""

    def __init__(self, torch_device: str = "cpu") -> None:
        self._torch_device = torch.device(torch_device)
        self.captures = 0

    def unavailable_reason(self) -> str | None:
        return None

    def identity(self) -> str:
        return "trt_double host"

    def torch_device(self) -> torch.device:
        return self._torch_device

    @contextlib.contextmanager
    def stream(self) -> Iterator[int]:
        yield 0

    def capture(self, run: Callable[[], None]) -> Callable[[], None]:
        self.captures += 1
        return run
