"""Serve lowered models with NVIDIA Triton Inference Server: write a model repository
(export_model_repository) and run tritonserver on it here (TritonServer, `trt-lower serve`)."""
from trt_lower.triton.repository import PLATFORMS, TritonModel, export_model_repository
from trt_lower.triton.server import TritonServer

__all__ = ["PLATFORMS", "TritonModel", "TritonServer", "export_model_repository"]
