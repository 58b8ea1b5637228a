"""The value of a tensor the graph computes from constants alone, known while converting.

Converters use it to leave out work whose effect they can tell in advance: an attention mask that
transformers builds from `torch.ones` and `arange` at every call is all True, so the masking and
the fully-masked-row guard it would need can go (converters/ops/attention.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from numpy.typing import NDArray
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from converters.core.builder import GraphBuilder, Ref, ir_version
from converters.core.segment import is_external

# Evaluating more than this is not worth it for what converters ask (masks built in a few ops).
_MAX_NODES = 64
_MAX_ELEMENTS = 1 << 24  # a (1, 1, 4096, 4096) mask


def constant_value(b: GraphBuilder, value: Ref) -> NDArray[Any] | None:
    """`value`'s array when the nodes that compute it read initializers only; None when it depends
    on a graph input, is large, or ONNX's reference evaluator cannot compute it."""
    if value.name not in b.folded:
        b.folded[value.name] = _evaluate(b, value)
    return b.folded[value.name]


def _evaluate(b: GraphBuilder, value: Ref) -> NDArray[Any] | None:
    shape = getattr(value, "shape", None)
    if shape is None or not all(isinstance(d, int) for d in shape) or np.prod(shape) > _MAX_ELEMENTS:
        return None
    producers = {out: node for node in b.nodes for out in node.output}
    initializers = {t.name: t for t in b.initializers}
    needed: dict[str, onnx.NodeProto] = {}
    leaves: dict[str, onnx.TensorProto] = {}
    pending = [value.name]
    while pending:
        name = pending.pop()
        if name in initializers:
            tensor = initializers[name]
            leaves[name] = numpy_helper.from_array(b.weights[name], name) if is_external(tensor) else tensor
        elif name in producers:
            node = producers[name]
            if node.name not in needed:
                if len(needed) == _MAX_NODES:
                    return None
                needed[node.name] = node
                pending.extend(i for i in node.input if i)
        elif name:
            return None  # a graph input: known only at run time
    order = {node.name: i for i, node in enumerate(b.nodes)}
    nodes = sorted(needed.values(), key=lambda n: order[n.name])
    graph = helper.make_graph(
        nodes, "fold", [], [helper.make_empty_tensor_value_info(value.name)], list(leaves.values())
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", b.opset)], ir_version=ir_version(b.opset))
    try:
        (array,) = ReferenceEvaluator(model).run(None, {})
    except Exception:  # an op the reference evaluator lacks: the value stays unknown
        return None
    return np.asarray(array)
