"""Convolution (1d/2d/3d, grouped, dilated, transposed)."""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from converters._common import all_of, float_inputs, ints
from converters.builder import GraphBuilder, Value
from converters.registry import converter

aten = torch.ops.aten


def _conv_capability(node: torch.fx.Node) -> Optional[str]:
    rank = len(node.args[0].meta["val"].shape)  # type: ignore[union-attr]
    if rank not in (3, 4, 5):
        return f"only 1d/2d/3d convolution (batched input), got a rank-{rank} input"
    return None


@converter(aten.convolution.default, capability=all_of(float_inputs, _conv_capability))
def convolution(
    b: GraphBuilder,
    x: Value,
    weight: Value,
    bias: Value | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
) -> Value:
    """convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding,
    SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor"""
    n = x.rank - 2
    pads = ints(padding, n)
    attrs = dict(
        strides=ints(stride, n),
        pads=pads + pads,
        dilations=ints(dilation, n),
        group=groups,
        kernel_shape=list(weight.shape[2:]),  # type: ignore[index]
    )
    if transposed:
        return b.op("ConvTranspose", x, weight, bias, output_padding=ints(output_padding, n), dtype=x.dtype, **attrs)
    return b.op("Conv", x, weight, bias, dtype=x.dtype, **attrs)
