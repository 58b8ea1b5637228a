"""Layout ops that move or copy elements: flip, roll, stack, unbind, repeat/tile, pixel and channel
shuffles, triangles (triu/tril), hstack/vstack.
"""

from __future__ import annotations

import functools
import math
from typing import Callable, Optional, Sequence

import torch

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.common import normalize_dim
from converters.core.dims import INT64_MAX, INT64_MIN, dim_size, input_val, is_static_dim, node_arg, shape_of
from converters.core.registry import converter
from converters.core.target import TrtTarget

aten = torch.ops.aten


@converter(aten.flip.default)
def flip(b: GraphBuilder, x: Value, dims: Sequence[int]) -> Ref:
    """flip(Tensor self, int[] dims) -> Tensor  (a Slice with step -1 over each dim)"""
    axes = sorted({normalize_dim(d, x.rank) for d in dims})
    if not axes:
        return b.op("Identity", x, dtype=x.dtype)
    n = len(axes)
    return b.op("Slice", x, b.ints([-1] * n), b.ints([INT64_MIN] * n), b.ints(axes), b.ints([-1] * n), dtype=x.dtype)


def _roll_one(b: GraphBuilder, x: Value, shift: int | Value, axis: int) -> Value:
    """The last `shift` elements along `axis` move to the front. Over a dynamic dim, or by a
    shift read from sizes, the cut is computed (Slice bounds may be computed tensors; only axes
    must be constants)."""
    size = x.shape[axis]
    axes = b.ints([axis])
    start: Ref
    if is_static_dim(size) and isinstance(shift, int):
        cut = size - shift % size if size else 0
        if cut in (0, size):
            return x
        start, stop = b.ints([cut]), b.ints([size])
    else:
        n = dim_size(b, x, axis)
        turned = b.op("Mod", b.shape_tensor([shift]), b.op("Max", n, b.ints([1])))  # non-negative; size 0 moves nothing
        start, stop = b.op("Sub", n, turned), b.ints([INT64_MAX])
    tail = b.op("Slice", x, start, stop, axes)
    head = b.op("Slice", x, b.ints([0]), start, axes)
    return b.op("Concat", tail, head, axis=axis, dtype=x.dtype, shape=x.shape)


@converter(aten.roll.default)
def roll(b: GraphBuilder, x: Value, shifts: Sequence[int | Value], dims: Sequence[int] = ()) -> Ref:
    """roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor

    Without dims torch rolls the flattened tensor and restores the shape.
    """
    if not dims:
        numel = math.prod(x.shape)  # a SymInt where a dim is dynamic
        if is_static_dim(numel) and (not numel or isinstance(shifts[0], int) and shifts[0] % numel == 0):
            # empty or a whole turn: nothing moves
            return b.op("Identity", x, dtype=x.dtype)
        flat = b.op("Reshape", x, b.ints([-1]), dtype=x.dtype, shape=(numel,))
        rolled = _roll_one(b, flat, shifts[0], 0)
        return b.op("Reshape", rolled, b.op("Shape", x), dtype=x.dtype)
    out = x
    for shift, d in zip(shifts, dims):
        out = _roll_one(b, out, shift, normalize_dim(d, x.rank))
    return out if out is not x else b.op("Identity", x, dtype=x.dtype)


@converter(aten.stack.default)
def stack(b: GraphBuilder, tensors: Sequence[Value], dim: int = 0) -> Ref:
    """stack(Tensor[] tensors, int dim=0) -> Tensor"""
    dtype = b.out.dtype
    axis = normalize_dim(dim, len(b.out.shape))
    parts = [b.op("Unsqueeze", b.cast(t, dtype), b.ints([axis])) for t in tensors]
    return b.op("Concat", *parts, axis=axis, dtype=dtype)


@converter(aten.unbind.int)
def unbind(b: GraphBuilder, x: Value, dim: int = 0) -> tuple[Ref, ...]:
    """unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]"""
    axis = normalize_dim(dim, x.rank)
    n = len(b.out)
    pieces = b.op_outputs("Split", x, b.ints([1] * n), axis=axis, outputs=n) if n > 1 else (b.op("Identity", x),)
    return tuple(b.op("Squeeze", p, b.ints([axis]), dtype=x.dtype) for p in pieces)


def _tiled(b: GraphBuilder, x: Value, repeats: Sequence[int | Ref]) -> Ref:
    """Tile after giving x leading 1-dims up to len(repeats) (torch's repeat rule). A count known
    only at run time (BLOOM's ALiBi repeated over a dynamic batch) is read from the engine's
    shapes: TensorRT takes Tile's repeats as a shape tensor."""
    extra = len(repeats) - x.rank
    lifted = b.op("Unsqueeze", x, b.ints(list(range(extra))), dtype=x.dtype) if extra > 0 else x
    return b.op("Tile", lifted, b.shape_tensor(repeats), dtype=x.dtype)


@converter(aten.repeat.default)
def repeat(b: GraphBuilder, x: Value, repeats: Sequence[int | Ref]) -> Ref:
    """repeat(Tensor self, SymInt[] repeats) -> Tensor"""
    return _tiled(b, x, repeats)


@converter(aten.tile.default)
def tile(b: GraphBuilder, x: Value, dims: Sequence[int | Ref]) -> Ref:
    """tile(Tensor self, SymInt[] dims) -> Tensor  (fewer dims than the rank: leading 1s)"""
    return _tiled(b, x, [1] * (x.rank - len(dims)) + list(dims))


def _nchw(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    rank = input_val(node, 0).dim()
    if rank < 3:
        return f"only (*, C, H, W) inputs, got rank {rank}"
    return None


def _batched(shuffle: Callable[[GraphBuilder, Value, int], Ref]) -> Callable[[GraphBuilder, Value, int], Ref]:
    """Run a (N, C, H, W) shuffle on a (C, H, W) input as a batch of one, and on a (*, C, H, W)
    input (a batch of batches) with its leading dims as one batch."""

    @functools.wraps(shuffle)
    def run(b: GraphBuilder, x: Value, factor: int) -> Ref:
        if _empty(x):
            return _reshaped_empty(b, x)
        if x.rank == 4:
            return shuffle(b, x, factor)
        if x.rank == 3:
            one = b.op("Unsqueeze", x, b.ints([0]), dtype=x.dtype, shape=(1, *x.shape))
            return b.op("Squeeze", shuffle(b, one, factor), b.ints([0]), dtype=x.dtype)
        lead = [dim_size(b, x, i) for i in range(x.rank - 3)]
        chw = [dim_size(b, x, i) for i in range(x.rank - 3, x.rank)]
        flat = b.op(
            "Reshape",
            x,
            shape_of(b, [b.ints([-1]), *chw]),
            dtype=x.dtype,
            shape=(math.prod(x.shape[:-3]), *x.shape[-3:]),
        )
        shuffled = shuffle(b, flat, factor)
        chw_out = b.op("Slice", b.op("Shape", shuffled), b.ints([1]), b.ints([4]))
        return b.op("Reshape", shuffled, shape_of(b, [*lead, chw_out]), dtype=x.dtype)

    return run


@converter(aten.pixel_shuffle.default, capability=_nchw)
@_batched
def pixel_shuffle(b: GraphBuilder, x: Value, upscale_factor: int) -> Ref:
    """pixel_shuffle(Tensor self, int upscale_factor) -> Tensor  (DepthToSpace, CRD channel order)

    Non-float tensors as (N, C, r, r, H, W) -> (N, C, H, r, W, r) -> (N, C, H·r, W·r): ONNX
    Runtime has no integer DepthToSpace.
    """
    if x.dtype is not None and x.dtype.is_floating_point:
        return b.op("DepthToSpace", x, blocksize=upscale_factor, mode="CRD", dtype=x.dtype)
    r = upscale_factor
    n, h, w = dim_size(b, x, 0), dim_size(b, x, 2), dim_size(b, x, 3)
    blocks = b.op("Reshape", x, shape_of(b, [n, b.ints([-1]), r, r, h, w]))
    moved = b.op("Transpose", blocks, perm=[0, 1, 4, 2, 5, 3])
    return b.op(
        "Reshape", moved, shape_of(b, [n, b.ints([-1]), _scaled(b, x, 2, r), _scaled(b, x, 3, r)]), dtype=x.dtype
    )


def _empty(x: Value) -> bool:
    return x.shape is not None and any(is_static_dim(d) and d == 0 for d in x.shape)


def _reshaped_empty(b: GraphBuilder, x: Value) -> Ref:
    """An empty tensor reshaped to the node's (static) shape: -1 and 0 are ambiguous without elements."""
    shape = [int(d) for d in b.out.shape]
    return b.op("Reshape", x, b.ints(shape), allowzero=1, dtype=x.dtype)


def _scaled(b: GraphBuilder, x: Value, axis: int, factor: int) -> Ref | int:
    size = x.shape[axis]
    return size * factor if is_static_dim(size) else b.op("Mul", dim_size(b, x, axis), b.ints([factor]))


def _divided(b: GraphBuilder, x: Value, axis: int, factor: int) -> Ref | int:
    size = x.shape[axis]
    return size // factor if is_static_dim(size) else b.op("Div", dim_size(b, x, axis), b.ints([factor]))


@converter(aten.pixel_unshuffle.default, capability=_nchw)
@_batched
def pixel_unshuffle(b: GraphBuilder, x: Value, downscale_factor: int) -> Ref:
    """pixel_unshuffle(Tensor self, int downscale_factor) -> Tensor

    (N, C, H, W) -> (N, C, H/r, r, W/r, r) -> (N, C, r, r, H/r, W/r) -> (N, C·r², H/r, W/r). SpaceToDepth
    would order the channels (r, r, C), not torch's (C, r, r).
    """
    r = downscale_factor
    n, c = dim_size(b, x, 0), dim_size(b, x, 1)
    h, w = _divided(b, x, 2, r), _divided(b, x, 3, r)
    blocks = b.op("Reshape", x, shape_of(b, [n, c, h, r, w, r]))
    moved = b.op("Transpose", blocks, perm=[0, 1, 3, 5, 2, 4])
    return b.op("Reshape", moved, shape_of(b, [n, b.ints([-1]), h, w]), dtype=x.dtype)


def _channel_groups(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    rank = input_val(node, 0).dim()
    if rank < 3:
        return f"channel shuffle of a rank-{rank} tensor (needs (N, C, *))"
    return None


@converter(aten.channel_shuffle.default, aten.native_channel_shuffle.default, capability=_channel_groups)
def channel_shuffle(b: GraphBuilder, x: Value, groups: int) -> Ref:
    """channel_shuffle(Tensor self, SymInt groups) -> Tensor

    (N, g·k, *) -> (N, g, k, rest) -> (N, k, g, rest) -> (N, g·k, *).
    """
    grouped = b.op("Reshape", x, shape_of(b, [dim_size(b, x, 0), groups, _divided(b, x, 1, groups), -1]))
    swapped = b.op("Transpose", grouped, perm=[0, 2, 1, 3])
    return b.op("Reshape", swapped, b.op("Shape", x), dtype=x.dtype)


def _matrix(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    rank = input_val(node, 0).dim()
    if rank < 2:
        return f"triangle of a rank-{rank} tensor"
    return None


@converter(aten.triu.default, capability=_matrix)
def triu(b: GraphBuilder, x: Value, diagonal: int = 0) -> Ref:
    """triu(Tensor self, int diagonal=0) -> Tensor"""
    return b.op("Trilu", x, b.const(diagonal, torch.int64), upper=1, dtype=x.dtype)


@converter(aten.tril.default, capability=_matrix)
def tril(b: GraphBuilder, x: Value, diagonal: int = 0) -> Ref:
    """tril(Tensor self, int diagonal=0) -> Tensor"""
    return b.op("Trilu", x, b.const(diagonal, torch.int64), upper=0, dtype=x.dtype)


def _at_least(b: GraphBuilder, x: Value, rank: int, dtype: torch.dtype) -> Ref:
    """torch.atleast_1d/2d: 0-d -> (1,) or (1, 1); 1-D -> (1, n) for rank 2."""
    x = b.cast(x, dtype)
    missing = rank - x.rank
    return b.op("Unsqueeze", x, b.ints(list(range(missing)))) if missing > 0 else x


@converter(aten.hstack.default)
def hstack(b: GraphBuilder, tensors: Sequence[Value]) -> Ref:
    """hstack(Tensor[] tensors) -> Tensor  (concatenate along dim 1, or dim 0 for 1-D tensors)"""
    dtype = b.out.dtype
    axis = 0 if len(b.out.shape) == 1 else 1
    return b.op("Concat", *[_at_least(b, t, 1, dtype) for t in tensors], axis=axis, dtype=dtype)


@converter(aten.vstack.default)
def vstack(b: GraphBuilder, tensors: Sequence[Value]) -> Ref:
    """vstack(Tensor[] tensors) -> Tensor  (concatenate along dim 0 after atleast_2d)"""
    dtype = b.out.dtype
    return b.op("Concat", *[_at_least(b, t, 2, dtype) for t in tensors], axis=0, dtype=dtype)


def _static_windows(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    x = input_val(node, 0)
    if x.dim() == 0:
        return "unfold of a 0-d tensor"
    if not isinstance(x.shape[normalize_dim(node_arg(node, 1, "dimension"), x.dim())], int):
        return "unfold along a dynamic dim (the window count depends on its size)"
    return None


@converter(aten.unfold.default, capability=_static_windows)
def unfold(b: GraphBuilder, x: Value, dimension: int, size: int, step: int) -> Ref:
    """unfold(Tensor(a) self, int dimension, int size, int step) -> Tensor(a)

    A Gather of every window's positions along the dim, (n, size) in its place; the window axis
    then moves last.
    """
    axis = normalize_dim(dimension, x.rank)
    count = (x.shape[axis] - size) // step + 1
    windows = b.const([[i * step + j for j in range(size)] for i in range(count)], torch.int64)
    gathered = b.op("Gather", x, windows, axis=axis, dtype=x.dtype)
    if axis == x.rank - 1:
        return gathered
    return b.op("Transpose", gathered, perm=[*range(axis + 1), *range(axis + 2, x.rank + 1), axis + 1], dtype=x.dtype)
