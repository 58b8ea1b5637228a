"""Which backend runs the engines: TensorRT where it is usable here, else ONNX Runtime."""

from __future__ import annotations

import logging

from converters.core.target import TrtTarget
from trt_lower.engine import tensorrt as trt_engine

log = logging.getLogger("trt_lower")

# The reasons backend="auto" has warned of: once per process, as Python's warnings do (under
# torch.compile every Dynamo graph is lowered on its own: FasterRCNN repeated it dozens of times).
_warned_unusable: set[str] = set()


def resolve_backend(backend: str) -> str:
    """The backend a `backend` setting runs on here; "auto" warns once per reason when TensorRT is not
    usable, "tensorrt" raises saying why."""
    if backend == "onnxruntime":
        return backend
    reason = trt_engine.unavailable_reason()
    if reason is None:
        return "tensorrt"
    if backend == "tensorrt":
        raise RuntimeError(f"backend='tensorrt' cannot run here: {reason}")
    if reason not in _warned_unusable:
        _warned_unusable.add(reason)
        log.warning("trt_lower: TensorRT is not usable (%s); running engines on ONNX Runtime", reason)
    return "onnxruntime"


def check_target(trt_version: str) -> None:
    """Engines built here must parse with the TensorRT installed here: no newer target."""
    installed = trt_engine.installed_version()
    target = trt_engine.installed_target()
    if installed is not None and target is not None and not TrtTarget(target).at_least(trt_version):
        raise ValueError(
            f"trt_version={trt_version!r} is newer than the installed TensorRT {installed}: "
            f"its ONNX parser may reject what that version allows; use "
            f"trt_version={target!r} (or leave it unset)"
        )
