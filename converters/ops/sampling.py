"""grid_sampler_2d (F.grid_sample) as ONNX GridSample (opset 16; TensorRT: 4-D float input)."""

from __future__ import annotations

import torch

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.common import float_inputs
from converters.core.registry import converter

aten = torch.ops.aten
_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADDING = {0: "zeros", 1: "border", 2: "reflection"}


@converter(aten.grid_sampler_2d.default, capability=float_inputs)
def grid_sampler_2d(
    b: GraphBuilder, x: Value, grid: Value, interpolation_mode: int, padding_mode: int, align_corners: bool
) -> Ref:
    """grid_sampler_2d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode,
    bool align_corners) -> Tensor"""
    return b.op(
        "GridSample",
        x,
        grid,
        mode=_MODES[interpolation_mode],
        padding_mode=_PADDING[padding_mode],
        align_corners=int(align_corners),
        dtype=x.dtype,
    )
