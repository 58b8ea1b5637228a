"""Data-dependent sizes: nonzero, masked_select and the gather a boolean mask makes (x[mask], index.py).

The output's leading size is known only once the data is: ONNX NonZero, whose output TensorRT
sizes while running (the engine module serves such engine outputs with an output allocator,
trt_lower/runtime/trt_module.py) and ONNX Runtime sizes natively. TensorRT runs NonZero on
float32/float16 only: other inputs are cast to float32 first, which keeps every nonzero value
nonzero (the smallest nonzero integer, 1, is exact in float32).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from converters.core.builder import GraphBuilder, Ref, Value, is_static_shape
from converters.core.dims import input_val, static
from converters.core.registry import converter
from converters.core.target import TrtTarget

aten = torch.ops.aten
_NONZERO_DTYPES = (torch.float32, torch.float16)


def coordinates(b: GraphBuilder, x: Value) -> Ref:
    """The (count, rank) int64 coordinates of x's nonzero elements, in row-major order."""
    source = x if x.dtype in _NONZERO_DTYPES else b.cast(x, torch.float32)
    return b.op("Transpose", b.op("NonZero", source, dtype=torch.int64), perm=[1, 0], dtype=torch.int64)


@converter(aten.nonzero.default)
def nonzero(b: GraphBuilder, x: Value) -> Ref:
    """nonzero(Tensor self) -> Tensor"""
    if x.rank:
        return coordinates(b, x)
    # A 0-d x: one row per nonzero element (at most 1), of no coordinates.
    rows = coordinates(b, b.op("Reshape", x, b.ints([1]), dtype=x.dtype, shape=(1,)))
    return b.op("Slice", rows, b.ints([0]), b.ints([0]), b.ints([1]), dtype=torch.int64)


def _masked_select_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    shapes = (input_val(node, 0).shape, input_val(node, 1).shape)
    return None if all(is_static_shape(s) for s in shapes) else "masked_select over dynamic shapes"


@converter(aten.masked_select.default, capability=_masked_select_capability)
def masked_select(b: GraphBuilder, x: Value, mask: Value) -> Ref:
    """masked_select(Tensor self, Tensor mask) -> Tensor

    Both broadcast to their common shape (at least 1-D: GatherND's), then x[mask] over every dim."""
    shape = np.broadcast_shapes((1,), *(tuple(static(d, "a dim") for d in v.shape) for v in (x, mask)))
    grown = [
        v if tuple(v.shape) == shape else b.op("Expand", v, b.ints(list(shape)), dtype=v.dtype, shape=shape)
        for v in (x, mask)
    ]
    return masked(b, grown[0], grown[1], 0)


def masked(b: GraphBuilder, x: Value, mask: Value, position: int) -> Ref:
    """x[..., mask, ...] for a boolean mask over x's dims position .. position + mask rank: the
    selected elements (with x's other dims) stacked along one dim at `position`."""
    end = position + mask.rank
    perm = [*range(position, end), *range(position), *range(end, x.rank)]
    moved = perm != list(range(x.rank))
    source = b.op("Transpose", x, perm=perm, dtype=x.dtype) if moved else x
    picked = b.op("GatherND", source, coordinates(b, mask), dtype=x.dtype)
    if not moved:
        return picked
    # The selected dim goes back to where the mask's dims were, after the dims before them.
    rank = x.rank - mask.rank + 1
    back = [*range(1, position + 1), 0, *range(position + 1, rank)]
    return b.op("Transpose", picked, perm=back, dtype=x.dtype)
