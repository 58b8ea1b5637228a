"""Shape ranges: the captured graph's shape symbols over their ranges, and each tensor's signature
over them (what the capture, convert and stitch stages compute; the runtime only reads the
resulting TensorSig)."""

from __future__ import annotations

from typing import Mapping, Sequence, TypeVar

import sympy
import torch
from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

from trt_lower.values.signature import ShapeRange, TensorSig

T = TypeVar("T")


def int_bound(bound: object, default: T) -> int | T:
    """A sympy value-range bound as an int, or `default` where the range is unbounded there: ±oo,
    or torch's ±int_oo, which calls itself finite (is_finite) but which int() cannot convert."""
    return int(bound) if getattr(bound, "is_Integer", False) else default  # type: ignore[call-overload]


# The words of a capture note on a range torch.export narrowed (llm/ quotes such notes).
INFERRED = "torch.export inferred"

# Each shape symbol of the captured graph (one per dynamic input dim) -> its (min, opt, max).
SymbolRanges = Mapping[sympy.Symbol, tuple[int, int, int]]


def profile_within(where: str, profile: SymbolRanges, symbols: SymbolRanges) -> SymbolRanges:
    """A profile's symbol ranges cut to the captured ones (torch may have narrowed a range the
    inputs declared); ValueError naming the profile where nothing of one is left."""
    cut: dict[sympy.Symbol, tuple[int, int, int]] = {}
    for symbol, (low, opt, high) in symbols.items():
        lo, best, hi = profile.get(symbol, (low, opt, high))
        lo, hi = max(lo, low), min(hi, high)
        if lo > hi:
            raise ValueError(f"{where}: the graph is valid for {symbol} in {low}..{high} only, the profile is outside")
        cut[symbol] = (lo, min(max(best, lo), hi), hi)
    return cut


# A data-dependent dim whose upper bound torch could not prove: TensorRT's largest dim.
_UNBOUNDED = 2**31 - 1


def _size_bounds(bounds: ValueRanges[sympy.Expr]) -> tuple[int, int]:
    """A value range as a dim's lowest and highest size: from 0, up to TensorRT's largest dim
    where unbounded."""
    return max(0, int_bound(bounds.lower, 0)), int_bound(bounds.upper, _UNBOUNDED)


def _data_dependent_range(dim: torch.SymInt) -> tuple[int, int, int]:
    """A size the data decides (nonzero, boolean masks: an unbacked symbol): the bounds torch
    proved for it, e.g. 0..numel of the mask; opt is the upper bound."""
    env = dim.node.shape_env
    if env is None:
        return 0, _UNBOUNDED, _UNBOUNDED
    low, high = _size_bounds(env.bound_sympy(dim.node.expr))
    return low, high, high


def _dim_range(dim: int | torch.SymInt, symbols: SymbolRanges) -> tuple[int, int, int]:
    """A dim's (min, opt, max) over the symbols' ranges. min and max bound the expression over the
    whole box of ranges (value range analysis: `s0 - s1` is lowest where s1 is highest, and the
    min/max corners alone gave a TensorRT profile that refused valid calls); opt is its value at
    the symbols' opt, kept inside them."""
    if isinstance(dim, int):
        return dim, dim, dim
    expr = dim.node.expr
    if not expr.free_symbols <= set(symbols):
        return _data_dependent_range(dim)
    low, high = _size_bounds(
        bound_sympy(expr, {s: ValueRanges(lo, hi) for s, (lo, _, hi) in symbols.items() if s in expr.free_symbols})
    )
    try:
        opt = int(expr.xreplace({s: sympy.Integer(r[1]) for s, r in symbols.items()}))
    except (ZeroDivisionError, TypeError):  # not defined at opt (a size divided by one that is 0 there)
        opt = high
    return low, min(max(opt, low), high), high


def _shape_range(shape: Sequence[int | torch.SymInt], symbols: SymbolRanges) -> ShapeRange:
    ranges = [_dim_range(d, symbols) for d in shape]
    low, opt, high = (tuple(r[k] for r in ranges) for k in range(3))
    return low, opt, high


def merged_profiles(sigs: tuple[TensorSig, ...]) -> tuple[TensorSig, ...]:
    """An engine's input signatures, with one profile where each input's range is the same in
    every profile (the dims that tell the profiles apart end before the engine): that range,
    without n copies of it for TensorRT to build and the runtime to choose among."""
    if any(len(set(s.profiles)) > 1 for s in sigs):
        return sigs
    return tuple(TensorSig(s.name, s.source, s.dtype, *s.ranges[0]) for s in sigs)


def signature_of(
    name: str, node: torch.fx.Node, symbols: SymbolRanges = {}, profiles: Sequence[SymbolRanges] = ()
) -> TensorSig:
    """The signature of engine input or output `name` that stands for `node`, its dims ranged over
    the shape symbols' ranges, and over each profile's ranges of them (an engine built with several
    optimization profiles, values/profiles.py)."""
    val = node.meta["val"]
    own = tuple(_shape_range(val.shape, p) for p in profiles)
    return TensorSig(name, node.name, val.dtype, *_shape_range(val.shape, symbols), profiles=own)
