"""Histograms: `histc`, the per-expert token counts of transformers' mixture-of-experts layers.

Each element's bin compared with every bin index (a one-hot row) and the rows summed: no scatter,
so every target's parser takes it, and the counts stay exact in float32 up to 2**24 elements.
"""

from __future__ import annotations

from typing import Optional

import torch

from converters.core.builder import GraphBuilder, Ref, Value, onnx_type
from converters.core.dims import node_arg
from converters.core.registry import converter
from converters.core.target import TrtTarget

aten = torch.ops.aten


def _fixed_range(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    low, high = node_arg(node, 2, "min", 0), node_arg(node, 3, "max", 0)
    if low == high:
        return "histc with min == max takes its range from the data's own min and max, which no converter reads"
    return None


@converter(aten.histc.default, capability=_fixed_range)
def histc(b: GraphBuilder, x: Value, bins: int = 100, min: float = 0, max: float = 0) -> Ref:
    """histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor

    As torch's kernel bins: bin = (x - min) * bins / (max - min), truncated; x == max goes to the
    last bin; values outside [min, max] (and NaN) are not counted.
    """
    flat = b.op("Reshape", b.cast(x, torch.float32), b.ints([-1]), dtype=torch.float32, shape=(-1,))
    scaled = b.op(
        "Div",
        b.op("Mul", b.op("Sub", flat, b.const(min, torch.float32)), b.const(bins, torch.float32)),
        b.const(max - min, torch.float32),
    )
    index = b.op("Min", b.cast(b.op("Floor", scaled, dtype=torch.float32), torch.int64), b.const(bins - 1, torch.int64))
    inside = b.op(
        "And",
        b.op("GreaterOrEqual", flat, b.const(min, torch.float32)),
        b.op("LessOrEqual", flat, b.const(max, torch.float32)),
    )
    hits = b.op(
        "And",
        b.op("Equal", b.op("Unsqueeze", index, b.ints([1])), b.const(list(range(bins)), torch.int64)),
        b.op("Unsqueeze", inside, b.ints([1])),
    )
    counts = b.op(
        "ReduceSum", b.op("Cast", hits, to=onnx_type(torch.float32)), b.ints([0]), keepdims=0, dtype=torch.float32
    )
    return b.cast(counts, b.out.dtype)
