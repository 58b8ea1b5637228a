"""TensorSpec: an input whose shape varies at run time, within a declared range."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch


@dataclass(frozen=True)
class TensorSpec:
    """An engine input of shape between `min_shape` and `max_shape`, tuned for `opt_shape`.

    Dims where min == max are static. Engines accept any shape in the range (TensorRT builds
    one optimization profile from min/opt/max).
    """

    min_shape: tuple[int, ...]
    opt_shape: tuple[int, ...]
    max_shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32

    def __init__(
        self,
        min_shape: Sequence[int],
        opt_shape: Sequence[int],
        max_shape: Sequence[int],
        dtype: torch.dtype = torch.float32,
    ) -> None:
        shapes = tuple(tuple(int(d) for d in s) for s in (min_shape, opt_shape, max_shape))
        if len({len(s) for s in shapes}) != 1:
            raise ValueError(f"TensorSpec shapes must have one rank, got {shapes}")
        for i, (lo, opt, hi) in enumerate(zip(*shapes)):
            if not 0 <= lo <= opt <= hi:
                raise ValueError(f"TensorSpec dim {i} needs 0 <= min <= opt <= max, got {lo}, {opt}, {hi}")
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"TensorSpec dtype must be a torch.dtype, got {dtype!r}")
        object.__setattr__(self, "min_shape", shapes[0])
        object.__setattr__(self, "opt_shape", shapes[1])
        object.__setattr__(self, "max_shape", shapes[2])
        object.__setattr__(self, "dtype", dtype)

    @classmethod
    def of(cls, tensor: torch.Tensor) -> "TensorSpec":
        shape = tuple(tensor.shape)
        return cls(shape, shape, shape, tensor.dtype)

    def narrowed(self, i: int, low: int, high: int) -> "TensorSpec":
        """This spec with dim i's range low..high (its opt moved into it)."""
        lo, opt, hi = list(self.min_shape), list(self.opt_shape), list(self.max_shape)
        lo[i], hi[i], opt[i] = low, high, min(max(opt[i], low), high)
        return TensorSpec(lo, opt, hi, self.dtype)

    @property
    def dynamic_dims(self) -> list[int]:
        return [i for i, (lo, hi) in enumerate(zip(self.min_shape, self.max_shape)) if lo != hi]

    def example(self) -> torch.Tensor:
        """A tensor to trace with: opt shape, except that a dynamic dim is never 0 or 1 there
        (torch.export specializes sizes 0 and 1)."""
        shape = [
            max(opt, min(2, hi)) if i in self.dynamic_dims else opt
            for i, (opt, hi) in enumerate(zip(self.opt_shape, self.max_shape))
        ]
        if self.dtype.is_floating_point:
            return torch.randn(shape).to(self.dtype)
        return torch.zeros(shape, dtype=self.dtype)

    def describe(self) -> str:
        dims = ", ".join(str(lo) if lo == hi else f"{lo}..{hi}" for lo, hi in zip(self.min_shape, self.max_shape))
        return f"({dims}) {str(self.dtype).removeprefix('torch.')}"
