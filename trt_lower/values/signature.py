"""What an engine was built for, and the check that a call matches it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from converters.core.errors import TrtLowerError

# One input's (min, opt, max) shapes in one optimization profile.
ShapeRange = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]


def describe_range(low: Sequence[int], high: Sequence[int]) -> str:
    """`(1..4, 3)`: each dim's size, or its range where it varies."""
    dims = [str(lo) if lo == hi else f"{lo}..{hi}" for lo, hi in zip(low, high)]
    return f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"


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
    # An engine input of an engine with several optimization profiles: its (min, opt, max) in each
    # (lower_to_trt's `profiles`); empty for one profile, the range above.
    profiles: tuple[ShapeRange, ...] = ()

    @property
    def ranges(self) -> tuple[ShapeRange, ...]:
        """Its (min, opt, max) per optimization profile of its engine."""
        return self.profiles or ((self.min_shape, self.opt_shape, self.max_shape),)

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
        return f"{describe_range(self.min_shape, self.max_shape)} {str(self.dtype).removeprefix('torch.')}"


def describe_profiles(sigs: Sequence[TensorSig]) -> list[str]:
    """Per optimization profile of the engine whose inputs these are, its dynamic inputs' ranges:
    "'x' (1..4, 8)"; [] for an engine of one profile."""
    if not any(s.profiles for s in sigs):
        return []
    dynamic = [s for s in sigs if not s.is_static]
    return [
        ", ".join(f"'{s.source}' {describe_range(s.ranges[k][0], s.ranges[k][2])}" for s in dynamic)
        for k in range(len(sigs[0].ranges))
    ]


class EngineInputError(TrtLowerError, ValueError):
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
                if t.dtype is not dtype or (
                    kind is not None
                    and (
                        not t.is_cpu
                        if kind == "cpu"
                        else (not t.is_cuda or t.get_device() != index)
                        if kind == "cuda"
                        else t.device != self.device
                    )
                ):
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
