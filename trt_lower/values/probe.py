"""A probe: example inputs of a lowered model and eager PyTorch's outputs for them, kept so that a
saved model can be checked again wherever it is loaded (trt_lower/deploy/probe.py)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Probe:
    inputs: tuple[torch.Tensor, ...]  # the model's inputs, flattened as its forward takes them
    outputs: tuple[torch.Tensor, ...]  # eager PyTorch's outputs for them, flattened
    # Median seconds of the lowered module's call on `inputs` where measured (at save), else None.
    latency_s: float | None = None

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.inputs, *self.outputs))
