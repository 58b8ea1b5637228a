"""InputGuard: checks each call's inputs against what the model was lowered for."""

from __future__ import annotations

from typing import Sequence

import torch

from trt_lower.runtime.conditions import SizeConditions
from trt_lower.runtime.engine_module import EngineModule
from trt_lower.values.signature import InputCheck, TensorSig


class InputGuard(torch.nn.Module):
    """Replaces torch.export's guard function: the same shape/dtype checks, but errors name the
    input, its shape and the shapes (or range) it was lowered for, before any engine runs.

    It is the one input check of a lowered module's call: `cover` adds the engines' device to it,
    and after each check it tells those engines that their inputs are checked (EngineModule).
    Where the model was captured under size tests its ranges do not imply, it checks those too."""

    def __init__(self, inputs: tuple[TensorSig, ...], conditions: Sequence[str] = ()) -> None:
        super().__init__()
        self.inputs = inputs
        self.conditions = SizeConditions(conditions, [s.source for s in inputs]) if conditions else None
        self.check = InputCheck("", inputs)
        self._engines: tuple[EngineModule, ...] = ()

    def cover(self, engines: Sequence[EngineModule], device: torch.device) -> None:
        self.check = InputCheck("", self.inputs, device)
        self._engines = tuple(engines)

    def forward(self, *tensors: torch.Tensor) -> None:
        self.check(tensors)
        if self.conditions is not None:
            self.conditions(tensors)
        for engine in self._engines:
            engine.__dict__["checked_upstream"] = True  # see EngineModule: nn.Module's __setattr__ is slow

    # The guard is the lowered module's own per-call step, never hooked: called without
    # nn.Module's hook dispatch (a microsecond a call).
    __call__ = forward
