"""Per-op converters: ATen overload -> ONNX nodes (opset 17).

- `converters.ops`: the op families, one short `@converter` function per ATen overload.
- `converters.core`: the machinery: registry, GraphBuilder, the FX -> ONNX interpreter, shared
  helpers and the TensorRT target.
- `converters.passes`: rewrites of a converted segment's ONNX (float64 narrowing, fp16, weights
  kept apart) and the TensorRT parser support table.

Importing this package registers every converter family.
"""
import converters.ops  # noqa: F401  (imported for its registrations)
from converters.core.interpreter import segment_to_onnx
from converters.core.registry import lookup, supported_ops

__all__ = ["lookup", "segment_to_onnx", "supported_ops"]
