"""Retype every tensor of one float element type in a segment's ONNX to another (values converted)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from converters.core.segment import OnnxSegment

DTYPE_ATTRIBUTES = ("to", "dtype")  # Cast, EyeLike / RandomUniformLike ...


def retype(segment: OnnxSegment, source: int, dest: int) -> OnnxSegment:
    """`segment` with every `source` element type made `dest`: graph I/O and value infos,
    initializers, Cast targets and constant attributes (in place; returned for chaining)."""
    dtype = helper.tensor_dtype_to_np_dtype(dest)

    def convert(tensor: onnx.TensorProto) -> None:
        with np.errstate(over="ignore"):  # beyond the new type's range: inf
            segment.assign(tensor, segment.values(tensor).astype(dtype))

    graph = segment.model.graph
    for value in (*graph.input, *graph.output, *graph.value_info):
        if value.type.tensor_type.elem_type == source:
            value.type.tensor_type.elem_type = dest
    for init in graph.initializer:
        if init.data_type == source:
            convert(init)
    for node in graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.INT and a.name in DTYPE_ATTRIBUTES and a.i == source:
                a.i = dest
            elif a.type == onnx.AttributeProto.TENSOR and a.t.data_type == source:
                convert(a.t)
    return segment
