"""Matmuls over transposed weights as Gemm(transB=1), for an executor that reads weights in place.

torch keeps a linear layer's weight as [out, in]; the converters emit `MatMul(x, Transpose(W))`
or `Gemm(x, Transpose(W))`,
which TensorRT (and an ONNX Runtime session that may copy weights) fold into a transposed copy. A
session that reads the model's own weight memory instead (trt_lower/engine/ort_session.py) cannot
fold it without that copy, nor transpose it on every call: this pass makes each such matmul read
W as it lies, `Gemm(x reshaped to 2-D, W, transB=1)` reshaped back to x's leading dims. It is
applied to that session's copy of the graph only; the segment's ONNX (what TensorRT parses and
the artifact stores) is left as it is.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from converters.core.segment import OnnxSegment, is_external


def _is_plain_transpose(node: onnx.NodeProto) -> bool:
    perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), None)
    return node.op_type == "Transpose" and perm == [1, 0]


def gemm_over_transposed_weights(segment: OnnxSegment) -> OnnxSegment:
    """A copy of `segment` (sharing its weight arrays) whose MatMuls and Gemms over `Transpose(W)`,
    W an external 2-D weight, read W as it lies (a Gemm's transB flipped); a transpose other nodes
    also read stays."""
    model = onnx.ModelProto()
    model.CopyFrom(segment.model)
    graph = model.graph
    weights = {t.name: t for t in graph.initializer if is_external(t) and len(t.dims) == 2}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    outputs = {o.name for o in graph.output}
    transposed = {
        n.output[0]: n
        for n in graph.node
        if _is_plain_transpose(n)
        and n.input[0] in weights
        and n.output[0] not in outputs
        and all(
            c.op_type in ("MatMul", "Gemm") and list(c.input).index(n.output[0]) == 1
            for c in consumers.get(n.output[0], [])
        )
    }
    if not transposed:
        return OnnxSegment(model, segment.weights)
    nodes: list[onnx.NodeProto] = []
    constants: list[TensorProto] = []
    for node in graph.node:
        if node.output[0] in transposed and node.op_type == "Transpose":
            continue  # read by the Gemms below instead
        if node.op_type == "MatMul" and node.input[1] in transposed:
            weight = transposed[node.input[1]].input[0]
            nodes.extend(_gemm(node, weights[weight], constants))
        elif node.op_type == "Gemm" and node.input[1] in transposed:
            node.input[1] = transposed[node.input[1]].input[0]
            _flip_trans_b(node)
            nodes.append(node)
        else:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(constants)
    return OnnxSegment(model, segment.weights)


def _flip_trans_b(gemm: onnx.NodeProto) -> None:
    for a in gemm.attribute:
        if a.name == "transB":
            a.i = 1 - a.i
            return
    gemm.attribute.append(helper.make_attribute("transB", 1))


def _gemm(matmul: onnx.NodeProto, weight: TensorProto, constants: list[TensorProto]) -> list[onnx.NodeProto]:
    """`matmul`'s output as Gemm(x as [-1, in], W, transB=1) reshaped to x's leading dims + [out]."""
    x, (y,) = matmul.input[0], matmul.output
    out, inner = weight.dims
    stem = f"{matmul.name or y}/gemm"
    flat, last = f"{stem}/flat_shape", f"{stem}/last"
    constants.append(numpy_helper.from_array(np.array([-1, inner], np.int64), flat))
    constants.append(numpy_helper.from_array(np.array([out], np.int64), last))
    names = {k: f"{stem}/{k}" for k in ("shape", "x2d", "y2d", "y_shape")}
    return [
        helper.make_node("Shape", [x], [names["shape"]], name=f"{stem}/Shape", end=-1),
        helper.make_node("Reshape", [x, flat], [names["x2d"]], name=f"{stem}/Reshape"),
        helper.make_node("Gemm", [names["x2d"], weight.name], [names["y2d"]], name=f"{stem}/Gemm", transB=1),
        helper.make_node("Concat", [names["shape"], last], [names["y_shape"]], name=f"{stem}/Concat", axis=0),
        helper.make_node("Reshape", [names["y2d"], names["y_shape"]], [y], name=f"{stem}/Reshape_back"),
    ]
