"""What a benchmark ran on: CPU, threads, GPU and the versions of everything that computes."""

from __future__ import annotations

import os
import platform
from importlib import metadata
from typing import Any

import torch

_PACKAGES = ("trt_lower", "torch", "onnxruntime", "onnx", "tensorrt", "torchvision", "transformers", "numpy")


def _cpu_model() -> str:
    """The CPU's marketing name (platform.processor() is often empty or just the architecture)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def info(cuda: bool) -> dict[str, Any]:
    gpu = None
    if cuda:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        gpu = {
            "name": props.name,
            "compute_capability": f"{props.major}.{props.minor}",
            "memory_gib": round(props.total_memory / 2**30, 1),
            "cuda": torch.version.cuda,
        }
    return {
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        # Other work on the machine skews timings (multi-threaded eager PyTorch most).
        "load_average_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "gpu": gpu,
        "versions": {p: v for p in _PACKAGES if (v := _version(p)) is not None},
    }
