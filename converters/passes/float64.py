"""float64 inside an engine is computed as float32: TensorRT has no float64 kernels.

The converters write float64 where the FX graph has it; this pass retypes the segment's ONNX
(graph I/O, initializers, Cast targets, constant attributes) to float32. The engine modules cast
float64 tensors to float32 on the way in and back on the way out, so callers see their dtypes.
Values beyond float32's range become inf; the report names the nodes this applies to.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto

from converters.passes.weights import OnnxSegment

_DTYPE_ATTRIBUTES = ("to", "dtype")  # Cast, EyeLike / RandomUniformLike ...


def _narrow(segment: OnnxSegment, tensor: onnx.TensorProto) -> None:
    with np.errstate(over="ignore"):
        segment.assign(tensor, segment.values(tensor).astype(np.float32))


def narrow_float64(segment: OnnxSegment) -> OnnxSegment:
    """`segment` with every DOUBLE retyped FLOAT (in place; returned for chaining)."""
    graph = segment.model.graph
    for value in (*graph.input, *graph.output, *graph.value_info):
        if value.type.tensor_type.elem_type == TensorProto.DOUBLE:
            value.type.tensor_type.elem_type = TensorProto.FLOAT
    for init in graph.initializer:
        if init.data_type == TensorProto.DOUBLE:
            _narrow(segment, init)
    for node in graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.INT and a.name in _DTYPE_ATTRIBUTES and a.i == TensorProto.DOUBLE:
                a.i = TensorProto.FLOAT
            elif a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.DOUBLE:
                _narrow(segment, a.t)
    return segment
