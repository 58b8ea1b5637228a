"""InputGuard: checks each call's inputs against what the model was lowered for."""
from __future__ import annotations

import torch

from trt_lower.runtime.signature import EngineInputError, TensorSig


class InputGuard(torch.nn.Module):
    """Replaces torch.export's guard function: same checks, errors that name the input and
    both shapes, raised before any engine runs."""

    def __init__(self, inputs: tuple[TensorSig, ...]) -> None:
        super().__init__()
        self.inputs = inputs

    def forward(self, *tensors: torch.Tensor) -> None:
        for sig, t in zip(self.inputs, tensors):
            if not isinstance(t, torch.Tensor):
                raise EngineInputError(f"input '{sig.source}' must be a tensor, got {type(t).__name__}")
            if tuple(t.shape) != sig.shape or t.dtype != sig.dtype:
                got = f"{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}"
                raise EngineInputError(
                    f"input '{sig.source}' was lowered for {sig.describe()}, got {got}; "
                    "lower the model again with inputs of this shape"
                )
