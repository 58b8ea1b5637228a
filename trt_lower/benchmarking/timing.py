"""Timing one call: host wall time always; on CUDA also the GPU time between CUDA events on the
current stream and the host time until the call returned (its enqueue time)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class CallTime:
    wall_ms: float  # host wall time until the results are ready (on CUDA: after synchronizing)
    gpu_ms: float | None = None  # CUDA: GPU time between events recorded around the call
    enqueue_ms: float | None = None  # CUDA: host time until the call returned, before synchronizing


def host_time(fn: Callable[[], object]) -> CallTime:
    start = time.perf_counter()
    fn()
    return CallTime((time.perf_counter() - start) * 1e3)


def cuda_time(fn: Callable[[], object], event: Callable[..., Any] | None = None) -> CallTime:
    """`event` makes the events (default torch.cuda.Event with timing enabled; the tests pass a
    stand-in, as there is no GPU in CI)."""
    import torch

    make = event or torch.cuda.Event
    begin, end = make(enable_timing=True), make(enable_timing=True)
    start = time.perf_counter()
    begin.record()
    fn()
    end.record()
    returned = time.perf_counter()
    end.synchronize()
    done = time.perf_counter()
    return CallTime((done - start) * 1e3, float(begin.elapsed_time(end)), (returned - start) * 1e3)
