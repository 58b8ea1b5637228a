"""Whether backend='tensorrt' can run here, and what to install when it cannot."""
from __future__ import annotations

import importlib.util
import re

from trt_lower import device as devices

INSTALL_HINT = (
    "install NVIDIA's TensorRT Python package: `pip install 'trt_lower[tensorrt]'` "
    "(TensorRT <= 10.4 for V100 GPUs, see README)"
)
# The oldest TensorRT whose ONNX parser takes our opset-17 ONNX and that has name-based I/O.
MIN_VERSION = (8, 6)


def version_tuple(version: str) -> tuple[int, int]:
    """(major, minor) of a TensorRT version string such as '10.4.0.26'."""
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match[1]), int(match[2])) if match else (0, 0)


def unavailable_reason() -> str | None:
    """Why backend='tensorrt' cannot run here, or None when it can."""
    reason = devices.current().unavailable_reason()
    if reason is not None:
        return reason
    if importlib.util.find_spec("tensorrt") is None:
        return f"the `tensorrt` module is not installed; {INSTALL_HINT}"
    try:
        import tensorrt as trt
    except (ImportError, OSError) as e:  # e.g. a wheel whose CUDA/TensorRT libraries do not load
        return f"the `tensorrt` module does not import ({type(e).__name__}: {e}); {INSTALL_HINT}"
    version = getattr(trt, "__version__", None)
    if not isinstance(version, str):
        # With only tensorrt-stubs installed, `tensorrt` imports as an empty namespace package.
        return f"the `tensorrt` module found has no TensorRT in it (type stubs only?); {INSTALL_HINT}"
    if version_tuple(version) < MIN_VERSION:
        return f"TensorRT {version} is older than {MIN_VERSION[0]}.{MIN_VERSION[1]}; {INSTALL_HINT}"
    return None
