"""Stage 3, convert: each engine segment of the split graph -> the ONNX its engine is built from."""

from __future__ import annotations

import functools
from collections import Counter
from typing import Any, Callable, Sequence

import onnx
import torch

from converters.core.errors import TrtLowerError
from converters.core.interpreter import ConversionError, segment_to_onnx
from converters.core.quantized import DEQUANTIZED, INT4_DEQUANTIZE, fp8_dequantizes, fp8_quantizes, quantized_op
from converters.core.target import TrtTarget
from converters.passes import trt_support
from converters.passes.float64 import narrow_float64
from converters.passes.precision import to_fp16
from splitter.partition import NON_COMPUTE, Split, call_node, is_compute, is_constant
from trt_lower.values import progress
from trt_lower.values.ranges import SymbolRanges, merged_profiles, signature_of
from trt_lower.values.segment import ConvertedSegment
from trt_lower.values.settings import fp32_nodes

# Called with every segment's final ONNX and the target, before the support table check: the
# test suite registers its audit of all emitted ONNX here.
ON_SEGMENT: list[Callable[[onnx.ModelProto, TrtTarget], object]] = []


class UnsupportedOnnx(TrtLowerError):
    """A segment's ONNX breaks the target TensorRT's parser limits (converters/passes/trt_support.py)."""


def _attr(gm: torch.fx.GraphModule, target: str) -> Any:
    """The module attribute a get_attr node names (a dotted path)."""
    return functools.reduce(getattr, target.split("."), gm)


def _check_support(sub: torch.fx.GraphModule, model: onnx.ModelProto, goal: TrtTarget) -> None:
    """Raise ConversionError, blaming the FX node whose ONNX breaks the target's limits: that
    node then runs in eager, as after any converter failure."""
    problems = trt_support.violations(model, goal.version)
    if not problems:
        return
    nodes = {n.name: n for n in sub.graph.nodes if n.op == "call_function"}
    blamed = nodes.get(problems[0].node.split("/")[0]) or next(iter(nodes.values()))
    raise ConversionError(blamed, UnsupportedOnnx(f"{goal.label}'s ONNX parser would reject {problems[0]}"))


def _check_no_branches(sub: torch.fx.GraphModule) -> None:
    """The fp16 rewrite does not reach into torch.cond's branches (ONNX If subgraphs): such a
    node runs eagerly under precision="fp16"."""
    for node in sub.graph.find_nodes(op="call_function", target=torch.ops.higher_order.cond):
        raise ConversionError(node, UnsupportedOnnx("precision='fp16' does not rewrite torch.cond's branches"))


def _dtypes(node: torch.fx.Node) -> set[torch.dtype]:
    vals = [node.meta.get("val"), *(a.meta.get("val") for a in node.all_input_nodes)]
    flat = [v for val in vals for v in (val if isinstance(val, (tuple, list)) else (val,))]
    return {v.dtype for v in flat if isinstance(v, torch.Tensor)}


def _dtype_notes(sub: torch.fx.GraphModule, name: str, goal: TrtTarget) -> tuple[str, ...]:
    """What an engine computes in a narrower dtype than the FX graph says (docs/tensorrt.md):
    float64 always, int64 where the target computes it as int32."""
    compute = [n for n in sub.graph.nodes if is_compute(n)]
    notes = []
    wide = [n.name for n in compute if torch.float64 in _dtypes(n)]
    if wide:
        notes.append(f"{name} computes float64 as float32 (TensorRT has no float64): {', '.join(wide)}")
    if not goal.int64_native:
        int64_nodes = [
            n.name for n in compute if isinstance(v := n.meta.get("val"), torch.Tensor) and v.dtype == torch.int64
        ]
        if int64_nodes:
            notes.append(
                f"{name} computes int64 as int32 on {goal.label} (results beyond int32 would not fit): "
                f"{', '.join(int64_nodes)}"
            )
    return tuple(notes)


def _convert_segment(
    gm: torch.fx.GraphModule,
    name: str,
    goal: TrtTarget,
    precision: str,
    symbols: SymbolRanges,
    keep_fp32: frozenset[str],
    profiles: Sequence[SymbolRanges],
) -> ConvertedSegment:
    sub: torch.fx.GraphModule = getattr(gm, name)
    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    constants: dict[str, torch.Tensor] = {}
    runtime_placeholders = []
    for ph, arg in zip(placeholders, call_node(gm, name).args):
        if is_constant(arg):
            constants[str(ph.target)] = _attr(gm, str(arg.target))
        else:
            runtime_placeholders.append(ph)

    # float64 is computed as float32 (TensorRT has none), then the fp16 rewrite if asked for.
    segment = narrow_float64(segment_to_onnx(sub, name, constants, goal.opset))
    if precision == "fp16":
        _check_no_branches(sub)
        segment = to_fp16(segment, fp32_nodes(sub.graph, keep_fp32))
    for hook in ON_SEGMENT:
        hook(segment.model, goal)
    _check_support(sub, segment.model, goal)

    results = next(n for n in sub.graph.nodes if n.op == "output").args[0]
    tuple_output = isinstance(results, (tuple, list))
    out_nodes = list(results) if tuple_output else [results]
    graph = segment.model.graph
    return ConvertedSegment(
        name=name,
        onnx=segment,
        inputs=merged_profiles(
            tuple(signature_of(vi.name, ph, symbols, profiles) for vi, ph in zip(graph.input, runtime_placeholders))
        ),
        outputs=tuple(signature_of(vi.name, n, symbols) for vi, n in zip(graph.output, out_nodes)),
        tuple_output=tuple_output,
        nodes=tuple(n.name for n in sub.graph.nodes if n.op == "call_function"),
        notes=_dtype_notes(sub, name, goal),
        int8_ops=_layers_reading(sub, lambda n: n.target in DEQUANTIZED),
        int4_ops=_layers_reading(sub, lambda n: str(n.target) in INT4_DEQUANTIZE),
        fp8_ops=_layers_reading(sub, fp8_dequantizes),
    )


def _is_qdq(node: torch.fx.Node) -> bool:
    return node.target in DEQUANTIZED or quantized_op(node.target) or fp8_quantizes(node) or fp8_dequantizes(node)


def _layers_reading(sub: torch.fx.GraphModule, dequantizes: Callable[[torch.fx.Node], bool]) -> dict[str, int]:
    """The layers reading a value `dequantizes` makes (through views), Q/DQ aside, by op: TensorRT
    fuses the DequantizeLinear into them."""

    def dequantized(arg: torch.fx.Node) -> bool:
        while arg.op == "call_function" and arg.target in NON_COMPUTE:
            arg = arg.all_input_nodes[0]
        return dequantizes(arg)

    return dict(
        Counter(
            str(n.target)
            for n in sub.graph.nodes
            if is_compute(n) and not _is_qdq(n) and any(map(dequantized, n.all_input_nodes))
        )
    )


def convert(
    split: Split,
    goal: TrtTarget,
    precision: str,
    symbols: SymbolRanges,
    keep_fp32: frozenset[str] = frozenset(),
    profiles: Sequence[SymbolRanges] = (),
) -> list[ConvertedSegment]:
    """Stage 3. In: the split graph (left unchanged), the TensorRT version to emit for, the
    precision ("fp32"/"fp16") and the shape symbols' ranges (from capture), overall and per
    optimization profile (`profiles`: each engine input's signature gets its range in each). Out: one
    ConvertedSegment per engine segment, in graph order: the converters' ONNX, float64 narrowed
    to float32, rewritten to fp16 if asked (the nodes `keep_fp32` names stay float32), and checked
    against the target's support table.
    Raises ConversionError naming the FX node a converter failed on or whose ONNX the target's
    parser would reject."""
    return [
        _convert_segment(split.gm, name, goal, precision, symbols, keep_fp32, profiles)
        for name in progress.track(split.engines, "trt_lower: converting segments", unit="segment")
    ]
