"""Whether backend='tensorrt' can run here, and what to install when it cannot: the one probe of
the installed TensorRT."""

from __future__ import annotations

import importlib.util

from converters.core.target import for_installed
from trt_lower.values import device as devices
from trt_lower.values.versions import parse_version

INSTALL_HINT = (
    "install NVIDIA's TensorRT Python package: `pip install 'trt_lower[tensorrt]'` "
    "(TensorRT <= 10.4 for V100 GPUs, see docs/targets.md)"
)
# The oldest TensorRT whose ONNX parser takes our opset-17 ONNX and that has name-based I/O.
MIN_VERSION = (8, 6)


def _probe() -> tuple[str | None, str]:
    """The installed TensorRT's version, or None and why there is none."""
    spec = importlib.util.find_spec("tensorrt")
    if spec is None:
        return None, "the `tensorrt` module is not installed"
    if spec.origin is None:
        # A namespace package: tensorrt-stubs alone. Not imported, so that no module without a
        # file stays in sys.modules under TensorRT's name (inspect.getmodule trips on one).
        return None, "the `tensorrt` module found has no TensorRT in it (type stubs only?)"
    try:
        import tensorrt as trt
    except (ImportError, OSError) as e:  # e.g. a wheel whose CUDA/TensorRT libraries do not load
        return None, f"the `tensorrt` module does not import ({type(e).__name__}: {e})"
    version = getattr(trt, "__version__", None)
    if not isinstance(version, str):
        # With only tensorrt-stubs installed, `tensorrt` imports as an empty namespace package.
        return None, "the `tensorrt` module found has no TensorRT in it (type stubs only?)"
    return version, ""


def installed_version() -> str | None:
    """The installed TensorRT's version, or None when `tensorrt` is absent or does not import."""
    return _probe()[0]


def installed_target() -> str | None:
    """The trt_version matching the installed TensorRT, or None when there is none."""
    version = installed_version()
    return None if version is None else for_installed(*parse_version(version))


def unavailable_reason() -> str | None:
    """Why backend='tensorrt' cannot run here, or None when it can."""
    reason = devices.current().unavailable_reason()
    if reason is not None:
        return reason
    version, missing = _probe()
    if version is None:
        return f"{missing}; {INSTALL_HINT}"
    if parse_version(version) < MIN_VERSION:
        return f"TensorRT {version} is older than {MIN_VERSION[0]}.{MIN_VERSION[1]}; {INSTALL_HINT}"
    return _cuda_reason(version)


def _cuda_reason(version: str) -> str | None:
    """Why the TensorRT that imports cannot start CUDA (e.g. a driver older than the CUDA its
    wheel was built for), or None. Its Runtime and Builder then fail to construct: pybind11
    raises TypeError for the null pointer they come back as."""
    import tensorrt as trt

    from trt_lower.runtime.trt_logger import LOGGER  # imports tensorrt too: only once it imports

    LOGGER.take_errors()
    try:
        runtime = trt.Runtime(LOGGER)
    except TypeError as e:  # "pybind11::init(): factory function returned nullptr"
        runtime, failure = None, f"{type(e).__name__}: {e}"
    else:
        failure = "its Runtime came back empty"
    if runtime is not None:
        return None
    return (
        f"TensorRT {version} imports but cannot start CUDA ({LOGGER.take_errors() or failure}); check that "
        "the NVIDIA driver supports the CUDA version the TensorRT wheel was built for (nvidia-smi shows the "
        "driver's)"
    )
