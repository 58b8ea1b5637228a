"""Upsampling (nearest, nearest-exact, linear/bilinear/trilinear) as ONNX Resize.

TensorRT's Resize: nearest, linear and cubic modes, floating-point input, no antialias (those
overloads have no converter). A scale factor goes in as Resize's `scales`, so the engine
sizes its output from its input; an explicit output size (constant, or computed from dynamic
dims) goes in as `sizes` after the runtime (N, C).

Coordinate mappings, matching torch's area_pixel_compute_source_index:
  nearest        src = floor(dst / scale)                 asymmetric + floor
  nearest-exact  src = floor((dst + 0.5) / scale)         half_pixel + round_prefer_ceil
  linear         src = max((dst + 0.5) / scale - 0.5, 0)  half_pixel (Resize clamps to the edge)
  align_corners  src = dst * (in - 1) / (out - 1)         align_corners
  cubic          src = (dst + 0.5) / scale - 0.5          half_pixel (a = -0.75)
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import torch

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.common import all_of, float_inputs
from converters.core.dims import dim_size, input_val, is_static_dim, node_arg, shape_of
from converters.core.registry import Capability, converter
from converters.core.target import TrtTarget

aten = torch.ops.aten
_SCALE_NAMES = {1: ["scales"], 2: ["scales_h", "scales_w"], 3: ["scales_d", "scales_h", "scales_w"]}


def _named_scales(n: int, positional: Sequence[Any], named: dict[str, Any]) -> list[Any]:
    """The .default overloads' scales_* arguments in order, None where absent."""
    names = _SCALE_NAMES[n]
    return [positional[i] if i < len(positional) else named.get(name) for i, name in enumerate(names)]


def _scales_of_default(node: torch.fx.Node, first_scale_at: int) -> list[Any]:
    n = input_val(node, 0).dim() - 2
    return _named_scales(n, node.args[first_scale_at:], dict(node.kwargs))


def _capability(first_scale_at: int | None) -> Capability:
    """For the .default overloads (output size and optional scales both given), scales must be all
    absent or all given and agree with the output size, since Resize takes one or the other."""

    def check(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
        x = input_val(node, 0)
        output_size = node_arg(node, 1, "output_size")
        if first_scale_at is None:
            return None
        scales = _scales_of_default(node, first_scale_at)
        if all(s is None for s in scales):
            return None
        in_sizes = x.shape[2:]
        if any(s is None for s in scales) or not all(
            is_static_dim(i) and math.floor(i * s) == o for i, s, o in zip(in_sizes, scales, output_size)
        ):
            return f"scales {scales} that do not give output size {list(output_size)}"
        return None

    return check


def _resize(
    b: GraphBuilder, x: Value, output_size: Sequence[int | Ref] | None, scales: Sequence[float] | None, **attrs: Any
) -> Ref:
    if scales is not None and all(s is not None for s in scales):
        factors = b.const([1.0, 1.0, *[float(s) for s in scales]], torch.float32)
        by_scales: Ref = b.op("Resize", x, None, factors, dtype=x.dtype, **attrs)
        return by_scales
    if output_size is None:
        raise ValueError("Resize needs an output size or scales")
    # An output size known only at run time (DeepLab's head resized to a dynamic input's size) is
    # computed from shapes in the engine: TensorRT takes Resize's sizes as a shape tensor.
    sizes = shape_of(b, [dim_size(b, x, 0), dim_size(b, x, 1), b.shape_tensor(output_size)])
    by_sizes: Ref = b.op("Resize", x, None, None, sizes, dtype=x.dtype, **attrs)
    return by_sizes


_NEAREST = dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
_NEAREST_EXACT = dict(mode="nearest", coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_ceil")


def _linear(align_corners: bool) -> dict[str, Any]:
    return dict(mode="linear", coordinate_transformation_mode="align_corners" if align_corners else "half_pixel")


# -- nearest ---------------------------------------------------------------------------------
@converter(
    aten.upsample_nearest1d.vec,
    aten.upsample_nearest2d.vec,
    aten.upsample_nearest3d.vec,
    capability=all_of(float_inputs, _capability(None)),
)
def upsample_nearest_vec(
    b: GraphBuilder, x: Value, output_size: Sequence[int] | None, scale_factors: Sequence[float] | None
) -> Ref:
    """upsample_nearest2d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor (and 1d, 3d)"""
    return _resize(b, x, output_size, scale_factors, **_NEAREST)


@converter(
    aten.upsample_nearest1d.default,
    aten.upsample_nearest2d.default,
    aten.upsample_nearest3d.default,
    capability=all_of(float_inputs, _capability(2)),
)
def upsample_nearest(
    b: GraphBuilder, x: Value, output_size: Sequence[int], *scales: float | None, **named: float | None
) -> Ref:
    """upsample_nearest2d(Tensor self, SymInt[2] output_size, float? scales_h=None, float? scales_w=None)
    -> Tensor (and 1d, 3d)"""
    return _resize(b, x, output_size, _named_scales(len(output_size), scales, named), **_NEAREST)


@converter(
    aten._upsample_nearest_exact1d.vec,
    aten._upsample_nearest_exact2d.vec,
    aten._upsample_nearest_exact3d.vec,
    capability=all_of(float_inputs, _capability(None)),
)
def upsample_nearest_exact_vec(
    b: GraphBuilder, x: Value, output_size: Sequence[int] | None, scale_factors: Sequence[float] | None
) -> Ref:
    """_upsample_nearest_exact2d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor
    (and 1d, 3d)"""
    return _resize(b, x, output_size, scale_factors, **_NEAREST_EXACT)


@converter(
    aten._upsample_nearest_exact1d.default,
    aten._upsample_nearest_exact2d.default,
    capability=all_of(float_inputs, _capability(2)),
)
@converter(aten._upsample_nearest_exact3d.default, capability=all_of(float_inputs, _capability(2)))
def upsample_nearest_exact(
    b: GraphBuilder, x: Value, output_size: Sequence[int], *scales: float | None, **named: float | None
) -> Ref:
    """_upsample_nearest_exact2d(Tensor self, SymInt[2] output_size, float? scales_h=None,
    float? scales_w=None) -> Tensor (and 1d, 3d)"""
    return _resize(b, x, output_size, _named_scales(len(output_size), scales, named), **_NEAREST_EXACT)


# -- linear ----------------------------------------------------------------------------------
@converter(
    aten.upsample_linear1d.vec,
    aten.upsample_bilinear2d.vec,
    aten.upsample_trilinear3d.vec,
    capability=all_of(float_inputs, _capability(None)),
)
def upsample_linear_vec(
    b: GraphBuilder,
    x: Value,
    output_size: Sequence[int] | None,
    align_corners: bool,
    scale_factors: Sequence[float] | None,
) -> Ref:
    """upsample_bilinear2d.vec(Tensor input, SymInt[]? output_size, bool align_corners, float[]? scale_factors)
    -> Tensor (and linear1d, trilinear3d)"""
    return _resize(b, x, output_size, scale_factors, **_linear(align_corners))


# No upsample_bilinear2d.default: torch decomposes it at its Autograd key, so captures never hold it.
@converter(
    aten.upsample_linear1d.default, aten.upsample_trilinear3d.default, capability=all_of(float_inputs, _capability(3))
)
def upsample_linear(
    b: GraphBuilder,
    x: Value,
    output_size: Sequence[int],
    align_corners: bool,
    *scales: float | None,
    **named: float | None,
) -> Ref:
    """upsample_trilinear3d(Tensor self, SymInt[3] output_size, bool align_corners, float? scales_d=None,
    float? scales_h=None, float? scales_w=None) -> Tensor (and linear1d)"""
    return _resize(b, x, output_size, _named_scales(len(output_size), scales, named), **_linear(align_corners))


# -- cubic -----------------------------------------------------------------------------------
def _cubic(align_corners: bool) -> dict[str, Any]:
    """torch's bicubic: a = -0.75, source indices clamped to the edge (exclude_outside=0), and no
    clamping of the source coordinate itself (plain half_pixel)."""
    return dict(
        mode="cubic",
        cubic_coeff_a=-0.75,
        exclude_outside=0,
        coordinate_transformation_mode="align_corners" if align_corners else "half_pixel",
    )


@converter(aten.upsample_bicubic2d.vec, capability=all_of(float_inputs, _capability(None)))
def upsample_bicubic2d_vec(
    b: GraphBuilder,
    x: Value,
    output_size: Sequence[int] | None,
    align_corners: bool,
    scale_factors: Sequence[float] | None,
) -> Ref:
    """upsample_bicubic2d.vec(Tensor input, SymInt[]? output_size, bool align_corners, float[]? scale_factors) -> Tensor"""
    return _resize(b, x, output_size, scale_factors, **_cubic(align_corners))
