"""Run trt_lower's TensorRT path against the double, on the CPU, for the duration of a block."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterator

import pytest

from trt_double import double
from trt_double.device import HostDevice
from trt_lower.values import device

# trt_lower's modules that `import tensorrt` at the top: dropped on entry and exit so that they
# bind to whatever `tensorrt` is at the time (the double here, the real one in test_gpu.py).
TRT_MODULES = (
    "trt_lower.runtime.trt_logger",
    "trt_lower.engine.trt_builder",
    "trt_lower.engine.build_progress",
    "trt_lower.engine.trt_engines",
    "trt_lower.runtime.trt_output_allocator",
    "trt_lower.runtime.trt_module",
    "trt_lower.engine.trt_refit",
)


@contextlib.contextmanager
def trt_double(version: str, cache_dir: Path) -> Iterator[ModuleType]:
    """`tensorrt` is the double at `version` (state reset), the device seam is a HostDevice and
    $TRT_LOWER_CACHE_DIR is `cache_dir`."""
    with pytest.MonkeyPatch.context() as patch:
        for name in TRT_MODULES:
            patch.delitem(sys.modules, name, raising=False)
        patch.setitem(sys.modules, "tensorrt", double)
        patch.setenv("TRT_LOWER_CACHE_DIR", str(cache_dir))
        patch.setattr(double, "__version__", version)
        double.reset()
        with device.using(HostDevice()):
            yield double
        for name in TRT_MODULES:
            sys.modules.pop(name, None)
