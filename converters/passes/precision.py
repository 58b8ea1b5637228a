"""precision="fp16": a segment's ONNX rewritten to strongly-typed fp16.

Every float32 tensor becomes float16, weights (converted once, at lowering) and activations alike,
except around the ops in KEEP_FP32: their float inputs are cast to float32 and their outputs cast
back. The segment's inputs and outputs keep their dtypes (Casts after the inputs and before the
outputs), so the engine boundary does not change. Every tensor's type is explicit: TensorRT 10.x
and 11 build the network STRONGLY_TYPED, taking each layer's precision from these types (11 has no
FP16 builder flag); 8.6 builds it with the FP16 flag (see docs/tensorrt.md).

A tensor gets at most one Cast per precision, and one produced in float32 (an engine input, a
KEEP_FP32 op's result) reaches float32 consumers directly, not through a float16 round trip.

Not onnxconverter-common's convert_float_to_float16: on these segments it leaves Cast(to=FLOAT)
nodes float32 and converts constants shared by a kept-fp32 op and an fp16 op for one of them only,
both giving models that fail type inference.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from numpy.typing import NDArray
from onnx import TensorProto, helper, numpy_helper

from converters.core.builder import Names
from converters.core.segment import OnnxSegment
from converters.passes.onnx_types import elem_types

FLOAT, FLOAT16 = TensorProto.FLOAT, TensorProto.FLOAT16

# Numerically sensitive in fp16: sums over many elements, statistics, softmax, exp/log/pow;
# and ops ONNX gives no float16 form at the opset the converters write.
KEEP_FP32 = frozenset(
    {
        "Softmax",
        "LogSoftmax",
        "LayerNormalization",
        "InstanceNormalization",
        "LpNormalization",
        "MeanVarianceNormalization",
        "ReduceSum",
        "ReduceMean",
        "ReduceMax",
        "ReduceMin",
        "ReduceProd",
        "ReduceL1",
        "ReduceL2",
        "ReduceLogSum",
        "ReduceLogSumExp",
        "ReduceSumSquare",
        "CumSum",
        "Exp",
        "Log",
        "Pow",
        # No float16 form at opset 17 (IsInf takes float16 from opset 20; Range never; Q/DQ from 19).
        "IsInf",
        "Range",
        "QuantizeLinear",
        "DequantizeLinear",
    }
)
# Inputs that stay float32 at any precision. ONNX types Resize's roi/scales float32.
# BatchNormalization keeps its statistics and affine weights exact (ONNX lets their type differ
# from X's; TensorRT folds them into the preceding convolution), while X and Y are fp16: inference
# batch norm is a per-channel affine, and casts around it would keep TensorRT from that fusion.
FP32_INPUTS = {"Resize": (1, 2), "BatchNormalization": (1, 2, 3, 4)}
# Attributes that name a node's output element type.
_DTYPE_ATTRIBUTES = ("to", "dtype", "output_datatype")
_FP16_MAX = float(np.finfo(np.float16).max)


def _half(array: NDArray[Any]) -> NDArray[Any]:
    """`array` as float16; finite values beyond fp16's range saturate (e.g. a -3.4e38 mask
    value stays a large finite negative rather than becoming -inf)."""
    return np.where(np.isfinite(array), np.clip(array, -_FP16_MAX, _FP16_MAX), array).astype(np.float16)


def _kept(node: onnx.NodeProto, keep: frozenset[str]) -> bool:
    """A KEEP_FP32 op, or emitted for an FX node in `keep` (ONNX node names are '<FX node>/<op>')."""
    return node.op_type in KEEP_FP32 or node.name.split("/")[0] in keep


def _wants_fp32(node: onnx.NodeProto, index: int, keep: frozenset[str]) -> bool:
    return _kept(node, keep) or index in FP32_INPUTS.get(node.op_type, ())


def _retype_to_fp16(node: onnx.NodeProto) -> None:
    """A node whose float output type is set by an attribute (Cast, Constant...) now makes fp16."""
    for a in node.attribute:
        if a.type == onnx.AttributeProto.INT and a.name in _DTYPE_ATTRIBUTES and a.i == FLOAT:
            a.i = FLOAT16
        elif a.type == onnx.AttributeProto.TENSOR and a.t.data_type == FLOAT:
            a.t.CopyFrom(numpy_helper.from_array(_half(numpy_helper.to_array(a.t)), a.t.name))


def _retypable(node: onnx.NodeProto) -> bool:
    """Its float output type is an attribute: it can make float32 directly when only float32 is read."""
    return node.op_type in ("Cast", "Constant", "ConstantOfShape")


def to_fp16(segment: OnnxSegment, keep: frozenset[str] = frozenset()) -> OnnxSegment:
    """`segment` (float32) with fp16 compute as described above (in place; returned for chaining).
    The ONNX nodes of the FX nodes named in `keep` stay float32 too, like KEEP_FP32 ops."""
    graph = segment.model.graph
    types = elem_types(segment.model)
    names = Names(
        {n for node in graph.node for n in (*node.input, *node.output)}
        | {v.name for v in (*graph.input, *graph.output, *graph.initializer)}
    )
    graph_outputs = {v.name for v in graph.output}
    initializers = {i.name: i for i in graph.initializer}

    # The precisions each float32 tensor is read in.
    needs: dict[str, set[int]] = {}
    for node in graph.node:
        for i, name in enumerate(node.input):
            if types.get(name) == FLOAT:
                needs.setdefault(name, set()).add(FLOAT if _wants_fp32(node, i, keep) else FLOAT16)
    for name in graph_outputs:
        if types.get(name) == FLOAT:
            needs.setdefault(name, set()).add(FLOAT)

    # The precision each float32 tensor is produced in, and under which name.
    native: dict[str, int] = {v.name: FLOAT for v in graph.input if types.get(v.name) == FLOAT}
    for node in graph.node:
        for out in node.output:
            if types.get(out) == FLOAT:
                fp32 = _kept(node, keep) or (_retypable(node) and needs.get(out) == {FLOAT})
                native[out] = FLOAT if fp32 else FLOAT16
    # name_of[(tensor, precision)]: the tensor in that precision.
    name_of: dict[tuple[str, int], str] = {}
    for name, precision in native.items():
        renamed = name in graph_outputs and precision == FLOAT16  # the output name is float32's
        name_of[name, precision] = names.fresh(f"{name}_fp16") if renamed else name
        for other in needs.get(name, set()) - {precision}:
            out_name = (
                name
                if other == FLOAT and name in graph_outputs
                else names.fresh(f"{name}_fp16" if other == FLOAT16 else f"{name}_fp32")
            )
            name_of[name, other] = out_name

    def casts_after(tensors: list[str], prefix: str | None = None) -> list[onnx.NodeProto]:
        # Named after the producer's FX node ('<FX node>/<op>'), so parser errors still lead there.
        return [
            helper.make_node(
                "Cast",
                [name_of[t, native[t]]],
                [name_of[t, p]],
                to=p,
                name=names.fresh(f"{prefix or t}/Cast_fp{16 if p == FLOAT16 else 32}"),
            )
            for t in tensors
            if t in native
            for p in sorted(needs.get(t, set()) - {native[t]})
        ]

    # Weights: converted here, once; the float32 original stays only where a float32 use remains.
    for name, init in initializers.items():
        if init.data_type != FLOAT:
            continue
        name_of[name, FLOAT] = name_of[name, FLOAT16] = name
        if FLOAT16 not in needs.get(name, set()):
            continue
        half = _half(segment.values(init))
        if FLOAT in needs[name]:
            name_of[name, FLOAT16] = names.fresh(f"{name}_fp16")
            graph.initializer.append(segment.initializer(name_of[name, FLOAT16], half))
        else:
            segment.assign(init, half)

    nodes = casts_after([v.name for v in graph.input])
    for node in graph.node:
        for i, name in enumerate(node.input):
            if types.get(name) == FLOAT:
                node.input[i] = name_of[name, FLOAT if _wants_fp32(node, i, keep) else FLOAT16]
        floats = [out for out in node.output if types.get(out) == FLOAT]
        if any(native[out] == FLOAT16 for out in floats):
            _retype_to_fp16(node)
        for i, out in enumerate(node.output):
            if out in native:
                node.output[i] = name_of[out, native[out]]
        nodes.append(node)
        nodes += casts_after(floats, node.name.split("/")[0])
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]
    return segment
