"""Padding: constant, reflect and replicate, as ONNX Pad (modes constant, reflect, edge).

torch lists pads from the last dim backwards as (begin, end) pairs; ONNX wants every dim's begins,
then every dim's ends. Pad's `pads` is an initializer, or where a pad is a size computed at run time
(swin and twins pad a dynamic map to whole windows) a shape tensor: TensorRT takes those from 10.4
on. TensorRT's Pad takes no bool tensors.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.dims import input_val, never_negative, node_arg
from converters.core.registry import converter
from converters.core.target import TrtTarget

aten = torch.ops.aten


def _onnx_pads(rank: int, pad: Sequence[int | Ref]) -> list[int | Ref]:
    begins: list[int | Ref] = [0] * rank
    ends: list[int | Ref] = [0] * rank
    for i in range(len(pad) // 2):
        begins[rank - 1 - i], ends[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    return begins + ends


def _pad_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    x = input_val(node, 0)
    if x.dtype == torch.bool:
        return "TensorRT's Pad takes no bool tensors"
    pad = node_arg(node, 1, "pad")
    if not all(isinstance(p, int) for p in pad) and not trt_target.at_least("10.4"):
        return f"pads computed at run time ({trt_target.label} takes constant pads only)"
    if not all(never_negative(p) for p in pad):
        return "negative pads (cropping), or pads computed at run time that may be"
    return None


def _pad(b: GraphBuilder, x: Value, pad: Sequence[int | Ref], mode: str, value: float | None = None) -> Ref:
    fill = None if value is None else b.const(value, x.dtype)
    return b.op("Pad", x, b.shape_tensor(_onnx_pads(x.rank, pad)), fill, mode=mode, dtype=x.dtype)


@converter(aten.constant_pad_nd.default, capability=_pad_capability)
def constant_pad_nd(b: GraphBuilder, x: Value, pad: Sequence[int], value: float = 0) -> Ref:
    """constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor"""
    return _pad(b, x, pad, "constant", value)


@converter(
    aten.reflection_pad1d.default,
    aten.reflection_pad2d.default,
    aten.reflection_pad3d.default,
    capability=_pad_capability,
)
def reflection_pad(b: GraphBuilder, x: Value, padding: Sequence[int]) -> Ref:
    """reflection_pad2d(Tensor self, SymInt[4] padding) -> Tensor (and 1d, 3d)  (mirror without the edge)"""
    return _pad(b, x, padding, "reflect")


@converter(
    aten.replication_pad1d.default,
    aten.replication_pad2d.default,
    aten.replication_pad3d.default,
    capability=_pad_capability,
)
def replication_pad(b: GraphBuilder, x: Value, padding: Sequence[int]) -> Ref:
    """replication_pad2d(Tensor self, SymInt[4] padding) -> Tensor (and 1d, 3d)  (repeat the edge)"""
    return _pad(b, x, padding, "edge")
