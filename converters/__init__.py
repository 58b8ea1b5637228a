"""Per-op converters: ATen overload -> ONNX nodes (opset 17).

Importing this package registers every converter family.
"""
from converters import (  # noqa: F401  (imported for their registrations)
    activation,
    advanced_index,
    attention,
    bitwise,
    conv,
    creation,
    elementwise,
    indexing,
    layout,
    linalg,
    math_functions,
    matmul,
    normalization,
    padding,
    pooling,
    reduce,
    resize,
    sampling,
    scatter,
    shape,
    sort,
    symbolic,
)
from converters.graph import segment_to_onnx
from converters.registry import lookup, supported_ops

__all__ = ["lookup", "segment_to_onnx", "supported_ops"]
