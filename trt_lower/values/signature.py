"""What an engine was built for, and the check that a call matches it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence, TypeVar

import sympy
import torch
from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

T = TypeVar("T")


def int_bound(bound: object, default: T) -> int | T:
    """A sympy value-range bound as an int, or `default` where the range is unbounded there: ±oo,
    or torch's ±int_oo, which calls itself finite (is_finite) but which int() cannot convert."""
    return int(bound) if getattr(bound, "is_Integer", False) else default  # type: ignore[call-overload]


# Each shape symbol of the captured graph (one per dynamic input dim) -> its (min, opt, max).
SymbolRanges = Mapping[sympy.Symbol, tuple[int, int, int]]


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
    low, high = _size_bounds(bound_sympy(expr, {s: ValueRanges(lo, hi) for s, (lo, _, hi) in symbols.items()
                                                if s in expr.free_symbols}))
    try:
        opt = int(expr.xreplace({s: sympy.Integer(r[1]) for s, r in symbols.items()}))
    except (ZeroDivisionError, TypeError):  # not defined at opt (a size divided by one that is 0 there)
        opt = high
    return low, min(max(opt, low), high), high


@dataclass(frozen=True)
class TensorSig:
    """One engine input or output: ONNX name, the FX value it stands for, dtype and the range of
    shapes it takes (min == opt == max for static shapes)."""

    name: str
    source: str
    dtype: torch.dtype
    min_shape: tuple[int, ...]
    opt_shape: tuple[int, ...]
    max_shape: tuple[int, ...]

    @classmethod
    def of(cls, name: str, node: torch.fx.Node, symbols: SymbolRanges = {}) -> "TensorSig":
        val = node.meta["val"]
        ranges = [_dim_range(d, symbols) for d in val.shape]
        return cls(name, node.name, val.dtype, *(tuple(r[k] for r in ranges) for k in range(3)))

    @property
    def is_static(self) -> bool:
        return self.min_shape == self.max_shape

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape, with -1 where it varies."""
        return tuple(lo if lo == hi else -1 for lo, hi in zip(self.min_shape, self.max_shape))

    def accepts(self, shape: Sequence[int]) -> bool:
        return len(shape) == len(self.min_shape) and all(
            lo <= d <= hi for d, lo, hi in zip(shape, self.min_shape, self.max_shape)
        )

    def describe(self) -> str:
        dims = [str(lo) if lo == hi else f"{lo}..{hi}" for lo, hi in zip(self.min_shape, self.max_shape)]
        comma = "," if len(dims) == 1 else ""
        return f"({', '.join(dims)}{comma}) {str(self.dtype).removeprefix('torch.')}"


class EngineInputError(ValueError):
    """A call handed an engine a tensor it was not built for."""


def check_input(where: str, sig: TensorSig, t: object) -> None:
    """Raise EngineInputError naming the input, unless `t` fits `sig` (shape range and dtype)."""
    if not isinstance(t, torch.Tensor):
        raise EngineInputError(f"{where}input '{sig.source}' must be a tensor, got {type(t).__name__}")
    if not sig.accepts(tuple(t.shape)) or t.dtype != sig.dtype:
        got = f"{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}"
        built = "was lowered for" if sig.is_static else "was lowered for the range"
        raise EngineInputError(
            f"{where}input '{sig.source}' {built} {sig.describe()}, got {got}; "
            "lower the model again for this shape (or declare a range with trt_lower.TensorSpec)"
        )


class InputCheck:
    """The per-call check of a call's tensors against their signatures (and, when given, the
    device the engines run on).

    The hot path compares each tensor's dtype, shape and device index with values computed
    here once (a static shape is one tuple comparison); only when that fails is the readable
    error, naming the input and what it was lowered for, built.
    """

    def __init__(self, where: str, sigs: tuple[TensorSig, ...], device: torch.device | None = None) -> None:
        self.where = where
        self.sigs = sigs
        self.device = device
        # How a tensor's device is told apart on the hot path: "cpu" (is_cpu), "cuda" (is_cuda and
        # the index: get_device() alone gives any other GPU kind's index too), else the device.
        self._kind = None if device is None else device.type if device.type in ("cpu", "cuda") else "other"
        self._index = None if device is None else device.index or 0
        # Per input: dtype, then the static shape or None, then each dim's (min, max) range.
        self._plans = tuple(
            (s.dtype, s.min_shape if s.is_static else None, tuple(zip(s.min_shape, s.max_shape))) for s in sigs
        )

    def __call__(self, tensors: Sequence[torch.Tensor]) -> None:
        if len(tensors) != len(self._plans):
            self._fail(tensors)
        kind, index = self._kind, self._index
        try:
            for t, (dtype, static, ranges) in zip(tensors, self._plans):
                if t.dtype is not dtype or (kind is not None and (
                        not t.is_cpu if kind == "cpu" else
                        (not t.is_cuda or t.get_device() != index) if kind == "cuda" else t.device != self.device)):
                    self._fail(tensors)
                shape = t.shape
                if static is not None:
                    if shape != static:
                        self._fail(tensors)
                elif len(shape) != len(ranges) or not all(lo <= d <= hi for d, (lo, hi) in zip(shape, ranges)):
                    self._fail(tensors)
        except AttributeError:  # not a tensor
            self._fail(tensors)

    def _fail(self, tensors: Sequence[object]) -> None:
        if len(tensors) != len(self.sigs):
            raise EngineInputError(f"{self.where}expected {len(self.sigs)} inputs, got {len(tensors)}")
        for sig, t in zip(self.sigs, tensors):
            check_input(self.where, sig, t)
            assert isinstance(t, torch.Tensor)  # check_input raised otherwise
            if self.device is not None and t.device != self.device:
                raise EngineInputError(
                    f"{self.where}input '{sig.source}' is on {t.device}, the engine runs on {self.device}; "
                    f"move the model and its inputs there (.to('{self.device}'))"
                )
        raise AssertionError(f"{self.where}the fast input check failed where the full one passed")
