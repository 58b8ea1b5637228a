"""Per-op converters: ATen overload -> ONNX nodes (the target parser's opset).

- `converters.ops`: the op families, one short `@converter` function per ATen overload.
- `converters.core`: the machinery: registry, GraphBuilder, the FX -> ONNX interpreter, shared
  helpers, the TensorRT target and the segment an engine is built from.
- `converters.passes`: rewrites of a converted segment's ONNX (float64 narrowing, fp16, element
  types) and the TensorRT parser support table.

The op families register on the first lookup (converters/core/registry.py), so that reading or
running a segment (a saved model's load) does not import them all.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Public name -> its module, imported on first use (PEP 562): the error base in core/errors.py,
# which every layer of trt_lower imports, pulls in nothing else.
_PUBLIC = {
    "lookup": "converters.core.registry",
    "segment_to_onnx": "converters.core.interpreter",
    "supported_ops": "converters.core.registry",
}
__all__ = sorted(_PUBLIC)

if TYPE_CHECKING:
    from converters.core.interpreter import segment_to_onnx as segment_to_onnx
    from converters.core.registry import lookup as lookup
    from converters.core.registry import supported_ops as supported_ops


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'converters' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value
