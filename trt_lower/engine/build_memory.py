"""The process's peak resident host memory while engines build, sampled from a thread.

TensorRT builds in native code, so tracemalloc (Python's allocations only) sees none of it, and
ru_maxrss is a high-water mark over the process's whole life: a build that stays under an earlier
peak would show nothing. The resident set size (/proc/self/statm) is read every SAMPLE_S seconds
instead: what it measures is the whole process's RSS (every thread, PyTorch included), and a spike
shorter than the interval can be missed. Linux only; elsewhere nothing is measured (None).
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass
from typing import Iterator

SAMPLE_S = 0.02
_STATM = "/proc/self/statm"


def resident_bytes() -> int | None:
    """The process's resident set size now, or None where /proc is not there to read it."""
    try:
        with open(_STATM, "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class PeakMemory:
    """Resident bytes at the start of the block and the highest sampled during it (None: not measured)."""

    start: int | None = None
    peak: int | None = None

    def sample(self) -> None:
        now = resident_bytes()
        if now is not None:
            self.peak = now if self.peak is None else max(self.peak, now)


@contextlib.contextmanager
def peak_resident() -> Iterator[PeakMemory]:
    """Sample the process's RSS while the block runs; the result is complete when the block ends."""
    measured = PeakMemory(start=resident_bytes())
    measured.peak = measured.start
    stop = threading.Event()

    def sampling() -> None:
        while not stop.wait(SAMPLE_S):
            measured.sample()

    sampler = threading.Thread(target=sampling, name="trt_lower build memory", daemon=True)
    sampler.start()
    try:
        yield measured
    finally:
        stop.set()
        sampler.join()
        measured.sample()
