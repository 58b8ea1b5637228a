"""Per-op converters: ATen overload -> ONNX nodes (opset 17).

- `converters.ops`: the op families, one short `@converter` function per ATen overload.
- `converters.core`: the machinery: registry, GraphBuilder, the FX -> ONNX interpreter, shared
  helpers, the TensorRT target and the segment an engine is built from.
- `converters.passes`: rewrites of a converted segment's ONNX (float64 narrowing, fp16, element
  types) and the TensorRT parser support table.

The op families register on the first lookup (converters/core/registry.py), so that reading or
running a segment (a saved model's load) does not import them all.
"""

from converters.core.interpreter import segment_to_onnx
from converters.core.registry import lookup, supported_ops

__all__ = ["lookup", "segment_to_onnx", "supported_ops"]
