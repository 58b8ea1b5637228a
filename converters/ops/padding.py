"""Padding: constant, reflect and replicate, as ONNX Pad (modes constant, reflect, edge).

torch lists pads from the last dim backwards as (begin, end) pairs; ONNX wants every dim's begins,
then every dim's ends. Pad's `pads` is an initializer (TensorRT wants constant pads before 10.4),
and TensorRT's Pad takes no bool tensors.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.dims import input_val, node_arg
from converters.core.registry import converter
from converters.core.target import Target

aten = torch.ops.aten


def _onnx_pads(rank: int, pad: Sequence[int]) -> list[int]:
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        begins[rank - 1 - i], ends[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    return begins + ends


def _pad_capability(node: torch.fx.Node, target: Target) -> Optional[str]:
    x = input_val(node, 0)
    if x.dtype == torch.bool:
        return "TensorRT's Pad takes no bool tensors"
    pad = node_arg(node, 1, "pad")
    pads = [p for p in pad if isinstance(p, int)]
    if len(pads) != len(pad):
        return "pads that are not constants"
    if any(p < 0 for p in pads):
        return "negative pads (cropping)"
    return None


def _pad(b: GraphBuilder, x: Value, pad: Sequence[int], mode: str, value: float | None = None) -> Ref:
    fill = None if value is None else b.const(value, x.dtype)
    return b.op("Pad", x, b.ints(_onnx_pads(x.rank, pad)), fill, mode=mode, dtype=x.dtype)


@converter(aten.constant_pad_nd.default, capability=_pad_capability)
def constant_pad_nd(b: GraphBuilder, x: Value, pad: Sequence[int], value: float = 0) -> Ref:
    """constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor"""
    return _pad(b, x, pad, "constant", value)


@converter(aten.reflection_pad1d.default, aten.reflection_pad2d.default, aten.reflection_pad3d.default,
           capability=_pad_capability)
def reflection_pad(b: GraphBuilder, x: Value, padding: Sequence[int]) -> Ref:
    """reflection_pad2d(Tensor self, SymInt[4] padding) -> Tensor (and 1d, 3d)  (mirror without the edge)"""
    return _pad(b, x, padding, "reflect")


@converter(aten.replication_pad1d.default, aten.replication_pad2d.default, aten.replication_pad3d.default,
           capability=_pad_capability)
def replication_pad(b: GraphBuilder, x: Value, padding: Sequence[int]) -> Ref:
    """replication_pad2d(Tensor self, SymInt[4] padding) -> Tensor (and 1d, 3d)  (repeat the edge)"""
    return _pad(b, x, padding, "edge")
