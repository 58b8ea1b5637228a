"""An engine's ONNX members read back as lowering held them, refusing what could reach outside
the file or disagree with the manifest.

- External data: only the graph's top-level initializers may declare it, each pointing into the
  engine's own weights member (format 3) by the name save gave it, within that member; a tensor
  anywhere else (node attributes, subgraphs, sparse initializers, functions) that declares
  external data is refused, in every format version (format 2 and older embed every weight).
  Once read, each weight is an array over memory this process owns (container.py), handed to
  ONNX Runtime or TensorRT from memory: neither reads a file the ONNX names.
- The graph's inputs and outputs are the manifest's signatures: same names in the same order,
  same ranks, the static dims they declare, and dims ONNX's shape inference (strict) can derive
  agree with what the graph declares.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np
import onnx
from numpy.typing import NDArray
from onnx import AttributeProto, TensorProto, numpy_helper

from converters.core.dtypes import FLOAT_WEIGHTS
from converters.core.errors import TrtLowerError
from converters.core.segment import OnnxSegment, initializer, is_external
from trt_lower.values.signature import TensorSig

_EXTERNAL_KEYS = frozenset({"location", "offset", "length", "checksum"})


class OnnxMemberError(TrtLowerError, ValueError):
    """An engine's ONNX that a loaded artifact may not hold (the loader names the file and member)."""


def _nested_tensors(model: onnx.ModelProto) -> Iterator[tuple[str, TensorProto]]:
    """Every tensor of the model but its top-level initializers, with where it is (no recursion:
    subgraphs are walked with a stack)."""
    graphs: list[tuple[str, onnx.GraphProto]] = [("graph", model.graph)]
    nodes = [(f"function '{f.name}'", n) for f in model.functions for n in f.node]
    for sparse in model.graph.sparse_initializer:
        yield "a sparse initializer", sparse.values
        yield "a sparse initializer", sparse.indices
    first = True
    while graphs or nodes:
        if graphs:
            where, graph = graphs.pop()
            if not first:
                for tensor in graph.initializer:
                    yield where, tensor
                for sparse in graph.sparse_initializer:
                    yield where, sparse.values
                    yield where, sparse.indices
            first = False
            nodes.extend((f"{where}, node '{n.name or n.op_type}'", n) for n in graph.node)
            continue
        where, node = nodes.pop()
        for attribute in node.attribute:
            at = f"{where}, attribute '{attribute.name}'"
            if attribute.type == AttributeProto.TENSOR:
                yield at, attribute.t
            elif attribute.type == AttributeProto.TENSORS:
                yield from ((at, t) for t in attribute.tensors)
            elif attribute.type == AttributeProto.SPARSE_TENSOR:
                yield at, attribute.sparse_tensor.values
                yield at, attribute.sparse_tensor.indices
            elif attribute.type == AttributeProto.GRAPH:
                graphs.append((f"{at} (a subgraph)", attribute.g))
            elif attribute.type == AttributeProto.GRAPHS:
                graphs.extend((f"{at} (a subgraph)", g) for g in attribute.graphs)


def _declares_external(tensor: TensorProto) -> bool:
    return is_external(tensor) or len(tensor.external_data) > 0


def _parse(data: bytes) -> onnx.ModelProto:
    try:
        model = onnx.load_from_string(data)  # protobuf: data only
    except Exception as e:  # protobuf's DecodeError and friends
        raise OnnxMemberError(f"is not an ONNX model ({type(e).__name__}: {e})") from None
    for where, tensor in _nested_tensors(model):
        if _declares_external(tensor):
            raise OnnxMemberError(
                f"declares external data in {where} (tensor '{tensor.name[:80]}'); only the "
                "graph's top-level initializers may, in the engine's weights member"
            )
    return model


def self_contained(data: bytes) -> OnnxSegment:
    """An engine's self-contained ONNX (format 2 and older) as lowering held it: large float
    initializers kept apart as arrays."""
    model = _parse(data)
    segment = OnnxSegment(model)
    for tensor in model.graph.initializer:
        if _declares_external(tensor):
            raise OnnxMemberError(
                f"declares external data for initializer '{tensor.name[:80]}'; format 2 and older embed every weight"
            )
        declared = initializer(tensor.name, numpy_helper.to_array(tensor), segment.weights)
        if tensor.name in segment.weights:
            tensor.CopyFrom(declared)
    return segment


def stripped(data: bytes, weight: Callable[[TensorProto], NDArray[Any]]) -> OnnxSegment:
    """An engine's graph saved without its weights (weights="separate"): each top-level initializer
    that declares external data gets its values from `weight` (the weight file given at load);
    external data anywhere else is refused as in every other format."""
    model = _parse(data)
    segment = OnnxSegment(model)
    for tensor in model.graph.initializer:
        if _declares_external(tensor):
            tensor.CopyFrom(initializer(tensor.name, weight(tensor), segment.weights))
    return segment


def _span(tensor: TensorProto, location: str, weights: NDArray[np.uint8]) -> tuple[np.dtype[Any], int, int]:
    """The dtype, offset and element count of an external initializer, checked against its
    weights member (named `location` in the graph, read into `weights`)."""
    where = {entry.key: entry.value for entry in tensor.external_data}
    name = tensor.name[:80]
    if set(where) - _EXTERNAL_KEYS or where.get("location") != location or len(where) != len(tensor.external_data):
        raise OnnxMemberError(
            f"initializer '{name}' names external data {dict(where)!r}; it may name only "
            f"'{location}', the engine's weights member, by offset and length"
        )
    dtype = next((d for d, t in FLOAT_WEIGHTS.items() if t == tensor.data_type), None)
    if dtype is None or any(d < 0 for d in tensor.dims):
        raise OnnxMemberError(f"initializer '{name}' is external but not a float tensor of valid dims")
    try:
        offset, length = int(where.get("offset", "0")), int(where["length"])
    except (KeyError, ValueError):
        raise OnnxMemberError(f"initializer '{name}' has no valid offset and length") from None
    count = int(np.prod(tensor.dims, dtype=object))
    if offset < 0 or offset + length > len(weights) or length != count * dtype.itemsize:
        raise OnnxMemberError(f"initializer '{name}' lies outside its weights member")
    return dtype, offset, count


def with_weights(graph: bytes, location: str, weights: NDArray[np.uint8]) -> OnnxSegment:
    """An engine's graph and its weights member (format 3): each external initializer an array
    over `weights` (memory this process owns), declared as lowering declares it."""
    model = _parse(graph)
    segment = OnnxSegment(model)
    for tensor in model.graph.initializer:
        if not _declares_external(tensor):
            continue
        dtype, offset, count = _span(tensor, location, weights)
        array = np.frombuffer(weights, dtype=dtype, count=count, offset=offset).reshape(tuple(tensor.dims))
        # Aligned in the file as save() writes it (the buffer mirrors that), so an offset within the
        # member need not be a multiple of the element size; a file zipped again elsewhere may
        # have lost the alignment: then the array is copied.
        array = np.require(array, requirements="A")
        tensor.CopyFrom(initializer(tensor.name, array, segment.weights))
    return segment


def _dims(value: onnx.ValueInfoProto) -> list[int | None] | None:
    """A graph input's or output's dims (None where symbolic), or None without a tensor shape."""
    kind = value.type.tensor_type
    if not value.type.HasField("tensor_type") or not kind.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else None for d in kind.shape.dim]


def check_io(model: onnx.ModelProto, inputs: tuple[TensorSig, ...], outputs: tuple[TensorSig, ...]) -> None:
    """The graph's inputs and outputs are the signatures': names in order, ranks, static dims; and
    what shape inference derives agrees with the graph's declarations."""
    initializers = {t.name for t in model.graph.initializer}
    graph_inputs = [v for v in model.graph.input if v.name not in initializers]
    for kind, values, sigs in (("inputs", graph_inputs, inputs), ("outputs", list(model.graph.output), outputs)):
        names = [v.name for v in values]
        if names != [s.name for s in sigs]:
            wanted = [s.name for s in sigs]
            raise OnnxMemberError(f"has the {kind} {names[:8]}, the manifest's signatures say {wanted[:8]}")
        for value, sig in zip(values, sigs):
            dims = _dims(value)
            if dims is None:
                raise OnnxMemberError(f"declares no tensor shape for '{sig.name}'")
            if len(dims) != len(sig.min_shape) or any(
                d is not None and not lo <= d <= hi for d, lo, hi in zip(dims, sig.min_shape, sig.max_shape)
            ):
                raise OnnxMemberError(
                    f"declares '{sig.name}' as {dims}, the manifest's signature says {sig.describe()}"
                )
    try:
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except Exception as e:  # onnx's InferenceError and the checker's
        raise OnnxMemberError(f"does not compute what it declares ({type(e).__name__}: {str(e)[:300]})") from None
