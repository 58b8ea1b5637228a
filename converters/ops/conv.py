"""Convolution (1d/2d/3d, grouped, dilated, transposed)."""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.common import all_of, float_inputs, per_spatial_dim
from converters.core.dims import input_val
from converters.core.registry import converter
from converters.core.target import TrtTarget

aten = torch.ops.aten


def _conv_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    rank = len(input_val(node, 0).shape)
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
) -> Ref:
    """convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding,
    SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor"""
    n = x.rank - 2
    pads = per_spatial_dim(padding, n)
    attrs: dict[str, Any] = dict(
        strides=per_spatial_dim(stride, n),
        pads=pads + pads,
        dilations=per_spatial_dim(dilation, n),
        group=groups,
        kernel_shape=list(weight.shape[2:]),
    )
    if transposed:
        return _conv_transpose(b, x, weight, bias, per_spatial_dim(output_padding, n), attrs)
    conv: Ref = b.op("Conv", x, weight, bias, dtype=x.dtype, **attrs)
    return conv


def _conv_transpose(
    b: GraphBuilder, x: Value, weight: Value, bias: Value | None, output_padding: list[int], attrs: dict[str, Any]
) -> Ref:
    """ConvTranspose. torch allows output_padding < max(stride, dilation), ONNX Runtime only
    < stride. Output padding only lengthens the output at the end of each dim, so past that
    limit crop less at the end instead (asymmetric pads); where that is not enough, the positions
    past the end of the full transposed convolution (no kernel tap reaches them) hold the bias."""
    if all(o < s for o, s in zip(output_padding, attrs["strides"])):
        padded: Ref = b.op("ConvTranspose", x, weight, bias, output_padding=output_padding, dtype=x.dtype, **attrs)
        return padded
    n = len(output_padding)
    begin = attrs["pads"][:n]
    end = [p - o for p, o in zip(begin, output_padding)]
    grow = [max(-e, 0) for e in end]
    attrs = {**attrs, "pads": begin + [max(e, 0) for e in end]}
    if not any(grow):
        cropped: Ref = b.op("ConvTranspose", x, weight, bias, dtype=x.dtype, **attrs)
        return cropped
    y = b.op("ConvTranspose", x, weight, None, **attrs)
    y = b.op("Pad", y, b.ints([0] * (n + 2) + [0, 0] + grow), dtype=x.dtype)
    if bias is None:
        return y
    return b.op("Add", y, b.op("Reshape", bias, b.ints([-1] + [1] * n)), dtype=x.dtype)
