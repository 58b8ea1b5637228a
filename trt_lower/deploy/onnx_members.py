"""An engine's ONNX members read back as lowering held them, refusing what could reach outside
the file or disagree with the manifest.

- External data: only the graph's top-level initializers may declare it, each pointing into the
  engine's own weights member (format 3) by the name save gave it, within that member; a tensor
  anywhere else (node attributes, subgraphs, sparse initializers, functions' nodes and their
  default attributes) that declares external data is refused, in every format version (format 2
  and older embed every weight).
- Operators: only what lowering writes and TensorRT's parser takes: ops of the default ONNX domain
  in the TensorRT support table (converters/passes/trt_support.py) and TensorRT plugin nodes; no
  other domain (ONNX Runtime's contrib ops, `com.microsoft`, would run) and no ONNX functions.
- Sizes: no tensor whose shape is known statically (a constant, or an intermediate shape inference
  derives from constants, such as `ConstantOfShape([2**31, 4])`) is larger than MAX_TENSOR_BYTES:
  building or running the engine would allocate it whatever the inputs.
  Once read, each weight is an array over memory this process owns (container.py), handed to
  ONNX Runtime or TensorRT from memory: neither reads a file the ONNX names.
- The graph's inputs and outputs are the manifest's signatures: same names in the same order,
  same ranks, the static dims they declare, and dims ONNX's shape inference (strict) can derive
  agree with what the graph declares.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterator

import numpy as np
import onnx
from numpy.typing import NDArray
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from converters.core.builder import PLUGIN_DOMAIN
from converters.core.dtypes import FLOAT_WEIGHTS
from converters.core.errors import TrtLowerError
from converters.core.segment import OnnxSegment, initializer, is_external
from converters.passes.trt_support import TABLE
from trt_lower.values.signature import TensorSig

_EXTERNAL_KEYS = frozenset({"location", "offset", "length", "checksum"})
# The largest tensor of statically known shape an engine's graph may hold (4 GiB; the largest a
# lowering makes, the logits of a long sequence over a large vocabulary, are well under it).
MAX_TENSOR_BYTES = 1 << 32
_DEFAULT_DOMAINS = ("", "ai.onnx")


class OnnxMemberError(TrtLowerError, ValueError):
    """An engine's ONNX that a loaded artifact may not hold (the loader names the file and member)."""


def _parts(
    model: onnx.ModelProto,
) -> tuple[list[tuple[str, onnx.GraphProto]], list[tuple[str, onnx.NodeProto]], list[tuple[str, AttributeProto]]]:
    """Every graph (the model's own first), node and attribute of the model, subgraphs and
    functions (their nodes and default attributes) included, each with where it is (walked with
    a stack: no recursion)."""
    graphs: list[tuple[str, onnx.GraphProto]] = []
    nodes: list[tuple[str, onnx.NodeProto]] = []
    attributes: list[tuple[str, AttributeProto]] = []
    pending_graphs = [("graph", model.graph)]
    pending_nodes = [(f"function '{f.name}', node '{n.name or n.op_type}'", n) for f in model.functions for n in f.node]
    pending_attributes = [
        (f"function '{f.name}', default attribute '{a.name}'", a) for f in model.functions for a in f.attribute_proto
    ]
    while pending_graphs or pending_nodes or pending_attributes:
        if pending_graphs:
            where, graph = pending_graphs.pop()
            graphs.append((where, graph))
            pending_nodes.extend((f"{where}, node '{n.name or n.op_type}'", n) for n in graph.node)
        elif pending_nodes:
            where, node = pending_nodes.pop()
            nodes.append((where, node))
            pending_attributes.extend((f"{where}, attribute '{a.name}'", a) for a in node.attribute)
        else:
            where, attribute = pending_attributes.pop()
            attributes.append((where, attribute))
            subgraphs = [attribute.g] if attribute.type == AttributeProto.GRAPH else list(attribute.graphs)
            pending_graphs.extend((f"{where} (a subgraph)", g) for g in subgraphs)
    return graphs, nodes, attributes


def _nested_tensors(model: onnx.ModelProto) -> Iterator[tuple[str, TensorProto]]:
    """Every tensor of the model but its top-level initializers, with where it is."""
    graphs, _, attributes = _parts(model)
    for sparse in model.graph.sparse_initializer:
        yield "a sparse initializer", sparse.values
        yield "a sparse initializer", sparse.indices
    for where, graph in graphs[1:]:
        yield from ((where, t) for t in graph.initializer)
        for sparse in graph.sparse_initializer:
            yield where, sparse.values
            yield where, sparse.indices
    for where, attribute in attributes:
        yield from ((where, t) for t in ([attribute.t] if attribute.HasField("t") else []))
        yield from ((where, t) for t in attribute.tensors)
        for sparse in [attribute.sparse_tensor] if attribute.HasField("sparse_tensor") else []:
            yield where, sparse.values
            yield where, sparse.indices
        for sparse in attribute.sparse_tensors:
            yield where, sparse.values
            yield where, sparse.indices


def _check_operators(model: onnx.ModelProto) -> None:
    """Only the ops lowering writes and TensorRT's parser takes (see the module's docstring)."""
    if model.functions:
        raise OnnxMemberError(
            f"declares ONNX functions ({', '.join(repr(f.name[:80]) for f in model.functions[:4])}); "
            "an engine's ONNX holds none"
        )
    for where, node in _parts(model)[1]:
        if node.domain == PLUGIN_DOMAIN:  # a TensorRT plugin: only TensorRT runs it, by its name
            continue
        if node.domain not in _DEFAULT_DOMAINS:
            raise OnnxMemberError(
                f"uses the op domain '{node.domain[:80]}' ({where[:200]}); an engine's ONNX holds only "
                f"default-domain ops and TensorRT plugins ('{PLUGIN_DOMAIN}')"
            )
        if node.op_type not in TABLE:
            raise OnnxMemberError(
                f"uses the op '{node.op_type[:80]}' ({where[:200]}), which TensorRT's ONNX parser does not take"
            )


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
    _check_operators(model)
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
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except Exception as e:  # onnx's InferenceError and the checker's
        raise OnnxMemberError(f"does not compute what it declares ({type(e).__name__}: {str(e)[:300]})") from None
    _check_sizes(inferred)


def _bytes(value: onnx.ValueInfoProto) -> int:
    """The size of a tensor whose dims shape inference knows all of (0 when it does not)."""
    kind = value.type.tensor_type
    dims = [d for d in _dims(value) or [None] if d is not None]
    if len(dims) != len(kind.shape.dim):
        return 0
    try:
        itemsize = helper.tensor_dtype_to_np_dtype(kind.elem_type).itemsize
    except (KeyError, TypeError):  # no NumPy type (strings, 4-bit types): count a byte each
        itemsize = 1
    return math.prod(dims) * itemsize


def _check_sizes(inferred: onnx.ModelProto) -> None:
    """No tensor of statically known shape (from constants, whatever the inputs) is larger than
    MAX_TENSOR_BYTES."""
    for value in [*inferred.graph.value_info, *inferred.graph.output]:
        if (size := _bytes(value)) > MAX_TENSOR_BYTES:
            raise OnnxMemberError(
                f"makes the tensor '{value.name[:80]}' of {_dims(value)} ({size} bytes, whatever the "
                f"inputs); an engine's tensors are limited to {MAX_TENSOR_BYTES} bytes"
            )
