"""Splitting an ATen graph into TensorRT-capable segments and eager fallbacks."""

from splitter.partition import Split, split
from splitter.support import ConverterSupport, unsupported_reason

__all__ = ["ConverterSupport", "Split", "split", "unsupported_reason"]
