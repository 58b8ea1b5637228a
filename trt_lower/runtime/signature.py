"""What an engine was built for, and the check that a call matches it."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TensorSig:
    """One engine input or output: ONNX name, the FX value it stands for, shape, dtype."""

    name: str
    source: str
    shape: tuple[int, ...]
    dtype: torch.dtype

    @classmethod
    def of(cls, name: str, node: torch.fx.Node) -> "TensorSig":
        val = node.meta["val"]
        return cls(name, node.name, tuple(int(d) for d in val.shape), val.dtype)

    def describe(self) -> str:
        return f"{tuple(self.shape)} {str(self.dtype).removeprefix('torch.')}"


class EngineInputError(ValueError):
    """A call handed an engine a tensor it was not built for."""


def check_inputs(engine: str, sigs: tuple[TensorSig, ...], tensors: tuple[torch.Tensor, ...],
                 device_type: str) -> None:
    if len(tensors) != len(sigs):
        raise EngineInputError(f"{engine}: expected {len(sigs)} inputs, got {len(tensors)}")
    for sig, t in zip(sigs, tensors):
        if not isinstance(t, torch.Tensor):
            raise EngineInputError(f"{engine}: input '{sig.source}' must be a tensor, got {type(t).__name__}")
        if tuple(t.shape) != sig.shape or t.dtype != sig.dtype:
            got = f"{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}"
            raise EngineInputError(
                f"{engine}: input '{sig.source}' was built for {sig.describe()}, got {got}; "
                "lower the model again with inputs of this shape"
            )
        if t.device.type != device_type:
            raise EngineInputError(
                f"{engine}: input '{sig.source}' is on {t.device}, the engine runs on {device_type}"
            )
