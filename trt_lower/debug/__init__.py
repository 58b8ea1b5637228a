"""Accuracy debugging: where a lowered model departs from eager PyTorch, and what to keep float32."""
from trt_lower.debug.divergence import Divergence, NodeError, first_divergence
from trt_lower.debug.fp16 import fp16_sensitive

__all__ = ["Divergence", "NodeError", "first_divergence", "fp16_sensitive"]
