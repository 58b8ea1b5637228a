"""The element type of every tensor of an emitted ONNX graph, by ONNX's own type inference."""

from __future__ import annotations

import math

import onnx
from onnx import TensorProto, helper

from converters.core.segment import is_external

# Weights above this many elements are handed to inference as typed graph inputs instead: their
# values never decide a type or a shape, and copying them would cost more than inferring.
_INLINE_ELEMENTS = 4096


def elem_types(model: onnx.ModelProto) -> dict[str, int]:
    """Tensor name -> ONNX element type (TensorProto.FLOAT, ...), for graph inputs, outputs,
    initializers and every node output whose type inference can tell.

    Raises onnx.shape_inference.InferenceError when the graph's types do not agree.
    """
    graph = model.graph
    small: list[onnx.TensorProto] = []
    large: list[onnx.TensorProto] = []
    for init in graph.initializer:
        (large if is_external(init) or math.prod(init.dims) > _INLINE_ELEMENTS else small).append(init)
    light = helper.make_model(
        helper.make_graph(
            graph.node,
            graph.name,
            list(graph.input) + [helper.make_tensor_value_info(i.name, i.data_type, list(i.dims)) for i in large],
            graph.output,
            small,
        ),
        opset_imports=model.opset_import,
        ir_version=model.ir_version,
    )
    inferred = onnx.shape_inference.infer_shapes(light, strict_mode=True).graph
    types = {i.name: i.data_type for i in graph.initializer}
    _collect(inferred, types)
    return types


def _collect(graph: onnx.GraphProto, types: dict[str, int]) -> None:
    """The types inference wrote into `graph` and its subgraphs (If branches)."""
    for value in (*graph.input, *graph.output, *graph.value_info):
        if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type:
            types.setdefault(value.name, value.type.tensor_type.elem_type)
    for node in graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                _collect(a.g, types)


def has_int4(model: onnx.ModelProto) -> bool:
    """Whether `model` holds INT4 weights (group-wise quantized: converters/ops/int4.py)."""
    return any(t.data_type == TensorProto.INT4 for t in model.graph.initializer)


def has_fp8(model: onnx.ModelProto) -> bool:
    """Whether `model` quantizes to FP8 (an FP8 zero point or weight: converters/ops/fp8.py)."""
    return any(t.data_type == TensorProto.FLOAT8E4M3FN for t in model.graph.initializer)
