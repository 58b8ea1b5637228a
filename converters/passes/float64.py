"""float64 inside an engine is computed as float32: TensorRT has no float64 kernels.

The converters write float64 where the FX graph has it; this pass retypes the segment's ONNX
(graph I/O, initializers, Cast targets, constant attributes) to float32. The engine modules cast
float64 tensors to float32 on the way in and back on the way out, so callers see their dtypes.
Values beyond float32's range become inf; the report names the nodes this applies to.
"""

from __future__ import annotations

from onnx import TensorProto

from converters.core.segment import OnnxSegment
from converters.passes.retype import retype


def narrow_float64(segment: OnnxSegment) -> OnnxSegment:
    """`segment` with every DOUBLE retyped FLOAT (in place; returned for chaining)."""
    return retype(segment, TensorProto.DOUBLE, TensorProto.FLOAT)
