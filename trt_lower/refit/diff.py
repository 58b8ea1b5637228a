"""Whether an engine's ONNX converted with new weights is the one its engine was built from, but
for the values of its weights: what a refit can change and what it cannot."""

from __future__ import annotations

import numpy as np
import onnx

from converters.core.segment import OnnxSegment
from trt_lower.deploy.separate_weights import WEIGHT_TYPES


def _io(values: list[onnx.ValueInfoProto]) -> list[bytes]:
    return [v.SerializeToString() for v in values]


def difference(old: OnnxSegment, new: OnnxSegment) -> str | None:
    """What differs between the two besides their weights' values, in words naming the node or
    initializer; None when a refit turns `old`'s engine into `new`'s."""
    a, b = old.model.graph, new.model.graph
    if _io(list(a.input)) != _io(list(b.input)) or _io(list(a.output)) != _io(list(b.output)):
        return "its inputs or outputs differ"
    for i, (x, y) in enumerate(zip(a.node, b.node)):
        if x.SerializeToString() != y.SerializeToString():
            what = (
                "its attributes"
                if (x.op_type, list(x.input), list(x.output)) == (y.op_type, list(y.input), list(y.output))
                else "it"
            )
            return (
                f"ONNX node '{x.name or i}' ({x.op_type}) differs: {what} changed with the weights "
                "(a weight folded into the graph, which no refit replaces)"
            )
    if len(a.node) != len(b.node):
        return f"it has {len(b.node)} ONNX nodes with the new weights, {len(a.node)} before"
    olds = {t.name: t for t in a.initializer}
    news = {t.name: t for t in b.initializer}
    if olds.keys() != news.keys():
        changed = sorted(olds.keys() ^ news.keys())
        return f"its initializers differ: {', '.join(changed[:8])}"
    for name, t in olds.items():
        u = news[name]
        if (t.data_type, list(t.dims)) != (u.data_type, list(u.dims)):
            return f"initializer '{name}' changed type or shape"
        if t.data_type not in WEIGHT_TYPES and not np.array_equal(old.values(t), new.values(u)):
            return (
                f"initializer '{name}' ({onnx.TensorProto.DataType.Name(t.data_type)}) is derived from the weights "
                "but is not a weight TensorRT refits (a shape, index or axis)"
            )
    return None
