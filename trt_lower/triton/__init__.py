"""Serve lowered models with NVIDIA Triton Inference Server: write a model repository
(export_model_repository) and run tritonserver on it here (TritonServer, `trt-lower serve`).

In: a LoweredModule or a saved artifact. Out: a Triton model (repository.py): a TensorRT plan or
the engine's ONNX where the whole model is one engine, else a python-backend model running the
artifact (model.py, backend.py), with its config.pbtxt (config.py, signature.py); and a running
server (server.py).

Each public name is imported on first use (PEP 562), as trt_lower's own: the CLI reads
`trt_lower.triton.front` and `.platforms` to build its options without loading torch or onnx.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Public name -> the module that defines it.
_PUBLIC = {
    "PLATFORMS": "trt_lower.triton.platforms",
    "TritonModel": "trt_lower.triton.repository",
    "TritonServer": "trt_lower.triton.server",
    "export_model_repository": "trt_lower.triton.repository",
}
__all__ = sorted(_PUBLIC)

if TYPE_CHECKING:
    from trt_lower.triton.platforms import PLATFORMS as PLATFORMS
    from trt_lower.triton.repository import TritonModel as TritonModel
    from trt_lower.triton.repository import export_model_repository as export_model_repository
    from trt_lower.triton.server import TritonServer as TritonServer


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'trt_lower.triton' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
