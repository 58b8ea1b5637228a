"""InputGuard: checks each call's inputs against what the model was lowered for."""
from __future__ import annotations

import torch

from trt_lower.runtime.signature import TensorSig, check_input


class InputGuard(torch.nn.Module):
    """Replaces torch.export's guard function: the same shape/dtype checks, but errors name the
    input, its shape and the shapes (or range) it was lowered for, before any engine runs."""

    def __init__(self, inputs: tuple[TensorSig, ...]) -> None:
        super().__init__()
        self.inputs = inputs

    def forward(self, *tensors: torch.Tensor) -> None:
        for sig, t in zip(self.inputs, tensors):
            check_input("", sig, t)
