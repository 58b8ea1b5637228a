"""TensorRT's IProgressMonitor (10.0 and newer) as log lines: each build phase's start and finish
at INFO, prefixed with the engine's name (the CLI shows trt_lower's INFO log), nested phases
indented; steps at DEBUG, as a long build takes thousands."""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Callable

import tensorrt as trt

from trt_lower.engine.builder_knobs import PROGRESS_MONITOR_SINCE
from trt_lower.values.versions import parse_version

log = logging.getLogger("trt_lower")


def monitor(engine: str) -> trt.IProgressMonitor | None:
    """A progress monitor logging `engine`'s build, or None before TensorRT 10.0 (no such API)."""
    if parse_version(trt.__version__)[0] < PROGRESS_MONITOR_SINCE:
        return None
    return _monitor_class()(engine)


@functools.cache
def _monitor_class() -> Callable[[str], trt.IProgressMonitor]:
    # Made on first use: 8.6's bindings have no IProgressMonitor to derive from.
    class BuildProgress(trt.IProgressMonitor):
        def __init__(self, engine: str) -> None:
            trt.IProgressMonitor.__init__(self)  # the binding's trampoline must be initialised
            self.engine = engine
            self._lock = threading.Lock()  # TensorRT may report from several of its threads
            self._started: dict[str, tuple[int, float]] = {}  # phase -> (depth, start)

        def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
            with self._lock:
                depth = self._started[parent_phase][0] + 1 if parent_phase in self._started else 0
                self._started[phase_name] = (depth, time.perf_counter())
            log.info("trt_lower: %s: %s%s (%d steps)", self.engine, "  " * depth, phase_name, num_steps)

        def step_complete(self, phase_name: str, step: int) -> bool:
            log.debug("trt_lower: %s: %s step %d done", self.engine, phase_name, step)
            return True  # go on: trt_lower never cancels a build

        def phase_finish(self, phase_name: str) -> None:
            with self._lock:
                depth, start = self._started.pop(phase_name, (0, time.perf_counter()))
            log.info(
                "trt_lower: %s: %s%s done in %.1f s", self.engine, "  " * depth, phase_name, time.perf_counter() - start
            )

    return BuildProgress
