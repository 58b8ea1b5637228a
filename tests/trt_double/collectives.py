"""TensorRT 11's DistCollective layers on the CPU, for the double: gloo stands in for NCCL.

A test registers a gloo process group here (`register`), getting the fake ncclComm_t address it
is known by, and points trt_lower's communicator seam (trt_lower.runtime.communicator.comm_pointer)
at `register`; `IExecutionContext.set_communicator` reads the address back out of the capsule
(`group_at`). The mapping lives only here: trt_lower knows nothing of it.

An engine's ONNX with DistCollective nodes runs in stages (`CollectiveSession`): ONNX Runtime runs
the nodes up to each collective's input (nodes are in topological order, so the collectives before
it are done), the collective runs on the group, and the last stage makes the graph's outputs.
Without a group (TensorRT inferring output shapes) a collective is stood in for by its shape alone.
"""

from __future__ import annotations

import ctypes
import itertools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.distributed as dist
from onnx import helper

from converters.core.segment import OnnxSegment

OP = "DistCollective"
_groups: dict[int, dist.ProcessGroup] = {}
_addresses = itertools.count(0x7F0000001000, 0x100)  # fake, but never null


def register(group: dist.ProcessGroup) -> int:
    """The fake communicator address `group` is known by (the same one each time)."""
    for address, known in _groups.items():
        if known is group:
            return address
    address = next(_addresses)
    _groups[address] = group
    return address


def group_at(capsule: object) -> dist.ProcessGroup | None:
    """The group registered at the address a PyCapsule holds; TypeError for anything but a capsule
    (pybind11 refuses it as a void*)."""
    api = ctypes.pythonapi
    api.PyCapsule_IsValid.restype = ctypes.c_int
    api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    name = api.PyCapsule_GetName(capsule) if type(capsule).__name__ == "PyCapsule" else None
    if name is None or not api.PyCapsule_IsValid(capsule, name):
        raise TypeError(f"set_communicator(): incompatible function arguments: {type(capsule).__name__} is no capsule")
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return _groups.get(int(api.PyCapsule_GetPointer(capsule, name) or 0))


def has_collectives(model: onnx.ModelProto) -> bool:
    return any(node.op_type == OP for node in model.graph.node)


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _perform(node: onnx.NodeProto, x: np.ndarray[Any, Any], group: dist.ProcessGroup | None) -> np.ndarray[Any, Any]:
    """The collective of `node` on `x` over `group`, or (no group) an array of its result's shape."""
    attrs = _attrs(node)
    operation, size = attrs["collective_operation"].decode(), int(attrs["group_size"])
    if group is None:
        if operation == "all_gather":
            return np.concatenate([x] * size)
        return x[: x.shape[0] // size] if operation == "reduce_scatter" else x
    ranks = dist.get_process_group_ranks(group)
    if list(attrs["groups"]) != ranks or size != len(ranks):
        raise RuntimeError(
            f"trt_double: {node.name} runs over ranks {list(attrs['groups'])}, the communicator's are {ranks}"
        )
    t = torch.from_numpy(np.ascontiguousarray(x).copy())
    if operation == "all_gather":
        parts = [torch.empty_like(t) for _ in ranks]
        dist.all_gather(parts, t, group=group)
        return torch.cat(parts).numpy()
    reduce_op = attrs["reduce_op"].decode()
    ops = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}
    dist.all_reduce(t, ops[reduce_op], group=group)  # gloo has no AVG and no reduce_scatter
    if reduce_op == "avg":
        t /= size
    if operation == "reduce_scatter":
        t = t.chunk(size)[dist.get_rank(group)]
    return t.numpy()


def _types(model: onnx.ModelProto) -> dict[str, int]:
    """Each tensor's element type: a collective keeps its input's, so ONNX's type inference runs
    with Identity in its place (lenient: the shapes an all_gather changes may disagree)."""
    proxy = onnx.ModelProto()
    proxy.CopyFrom(model)
    for node in proxy.graph.node:
        if node.op_type == OP:
            node.op_type = "Identity"
            del node.attribute[:]
    graph = onnx.shape_inference.infer_shapes(proxy).graph
    types = {i.name: i.data_type for i in graph.initializer}
    types.update((v.name, v.type.tensor_type.elem_type) for v in (*graph.input, *graph.output, *graph.value_info))
    return types


@dataclass(frozen=True)
class _Stage:
    session: ort.InferenceSession | None
    inputs: list[str]
    outputs: list[str]


def _stage(
    segment: OnnxSegment,
    available: set[str],
    wanted: list[str],
    types: dict[str, int],
    make: Callable[[OnnxSegment], ort.InferenceSession],
) -> _Stage:
    """A model of the nodes that compute `wanted` from `available` (collectives cut out)."""
    graph = segment.model.graph
    makers = {out: n for n in graph.node if n.op_type != OP for out in n.output}
    needed, todo, used = [], list(wanted), set()
    while todo:
        name = todo.pop()
        node = makers.get(name)
        if name in used or node is None:
            used.add(name)
            continue
        used.add(name)
        if node not in needed:
            needed.append(node)
            todo.extend(i for i in node.input if i)
    nodes = [n for n in graph.node if n in needed]  # in the graph's (topological) order
    initializers = [i for i in graph.initializer if i.name in used]
    inputs = sorted(used & available)
    if not nodes:
        return _Stage(None, inputs, wanted)
    model = helper.make_model(
        helper.make_graph(
            nodes,
            graph.name,
            [helper.make_tensor_value_info(n, types[n], None) for n in inputs],
            [helper.make_tensor_value_info(n, types[n], None) for n in wanted],
            initializers,
        ),
        opset_imports=segment.model.opset_import,
        ir_version=segment.model.ir_version,
    )
    weights = {k: v for k, v in segment.weights.items() if k in used}
    return _Stage(make(OnnxSegment(model, weights)), inputs, wanted)


class CollectiveSession:
    """ONNX Runtime over an engine's ONNX with DistCollective nodes, in stages cut at them; `run`
    as an InferenceSession's, with the group the collectives run over (None: shapes only)."""

    def __init__(self, segment: OnnxSegment, make: Callable[[OnnxSegment], ort.InferenceSession]) -> None:
        graph = segment.model.graph
        self.collectives = [n for n in graph.node if n.op_type == OP]
        types = _types(segment.model)
        available = {v.name for v in graph.input}
        self.stages = []
        for node in self.collectives:
            self.stages.append(_stage(segment, available, [node.input[0]], types, make))
            available.add(node.output[0])
        self.stages.append(_stage(segment, available, [v.name for v in graph.output], types, make))

    def run(self, outputs: list[str], feeds: dict[str, Any], group: dist.ProcessGroup | None = None) -> list[Any]:
        values = dict(feeds)
        for stage, node in zip(self.stages, [*self.collectives, None]):
            if stage.session is not None:
                values.update(
                    zip(stage.outputs, stage.session.run(stage.outputs, {n: values[n] for n in stage.inputs}))
                )
            if node is not None:
                values[node.output[0]] = _perform(node, values[node.input[0]], group)
        return [values[n] for n in outputs]
