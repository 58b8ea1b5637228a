"""bfloat16 computed as float32, for executors without bfloat16 kernels.

Engines for targets with bfloat16 (TensorRT 10.12+ on Ampere and newer) carry the model's
bfloat16 as it is. ONNX Runtime's CPU provider has no bfloat16 kernels for most ops, so the ONNX
Runtime engine module (and the TensorRT double, which runs on ONNX Runtime) run a copy of the
segment retyped to float32: every bfloat16 value widens exactly, the arithmetic is float32, and
the module casts the results back to bfloat16 at the engine boundary. Results then differ from
eager bfloat16 only by rounding (eager rounds to bfloat16 after each op, this only at the end).
"""

from __future__ import annotations

import onnx
from onnx import TensorProto

from converters.core.segment import OnnxSegment
from converters.passes.retype import DTYPE_ATTRIBUTES, retype


def has_bfloat16(model: onnx.ModelProto) -> bool:
    """Whether bfloat16 enters the graph: as I/O, a weight, a Cast target or a constant."""
    bf16, graph = TensorProto.BFLOAT16, model.graph
    return (
        any(v.type.tensor_type.elem_type == bf16 for v in (*graph.input, *graph.output))
        or any(i.data_type == bf16 for i in graph.initializer)
        or any(
            a.i == bf16
            if a.type == onnx.AttributeProto.INT and a.name in DTYPE_ATTRIBUTES
            else a.type == onnx.AttributeProto.TENSOR and a.t.data_type == bf16
            for node in graph.node
            for a in node.attribute
        )
    )


def widen_bfloat16(segment: OnnxSegment) -> OnnxSegment:
    """A copy of `segment` with every BFLOAT16 retyped FLOAT; `segment` itself when it has none."""
    if not has_bfloat16(segment.model):
        return segment
    model = onnx.ModelProto()
    model.CopyFrom(segment.model)
    return retype(OnnxSegment(model, dict(segment.weights)), TensorProto.BFLOAT16, TensorProto.FLOAT)
