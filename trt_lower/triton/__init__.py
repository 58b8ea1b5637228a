"""Serve lowered models with NVIDIA Triton Inference Server: write a model repository
(export_model_repository) and run tritonserver on it here (TritonServer, `trt-lower serve`).

In: a LoweredModule or a saved artifact. Out: a Triton model (repository.py): a TensorRT plan or
the engine's ONNX where the whole model is one engine, else a python-backend model running the
artifact (model.py, backend.py), with its config.pbtxt (config.py, signature.py); and a running
server (server.py).
"""

from trt_lower.triton.repository import PLATFORMS, TritonModel, export_model_repository
from trt_lower.triton.server import TritonServer

__all__ = ["PLATFORMS", "TritonModel", "TritonServer", "export_model_repository"]
