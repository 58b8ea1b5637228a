"""What an engine was built for, and the check that a call matches it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import sympy
import torch

# Each shape symbol of the captured graph (one per dynamic input dim) -> its (min, opt, max).
SymbolRanges = Mapping[sympy.Symbol, tuple[int, int, int]]


def _dim_range(dim: int | torch.SymInt, symbols: SymbolRanges) -> tuple[int, int, int]:
    if isinstance(dim, int):
        return dim, dim, dim
    expr = dim.node.expr
    values = [int(expr.xreplace({s: sympy.Integer(r[k]) for s, r in symbols.items()})) for k in range(3)]
    return values[0], values[1], values[2]


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


def check_inputs(engine: str, sigs: tuple[TensorSig, ...], tensors: tuple[torch.Tensor, ...],
                 device_type: str) -> None:
    if len(tensors) != len(sigs):
        raise EngineInputError(f"{engine}: expected {len(sigs)} inputs, got {len(tensors)}")
    for sig, t in zip(sigs, tensors):
        check_input(f"{engine}: ", sig, t)
        if t.device.type != device_type:
            raise EngineInputError(
                f"{engine}: input '{sig.source}' is on {t.device}, the engine runs on {device_type}"
            )
