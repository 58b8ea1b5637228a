"""EngineModule: what the ONNX Runtime and TensorRT engine modules share."""

from __future__ import annotations

from typing import Sequence

import torch

from trt_lower.runtime.module_call import direct_call
from trt_lower.runtime.profiles import ProfileChoice
from trt_lower.values.signature import InputCheck, TensorSig

Outputs = torch.Tensor | tuple[torch.Tensor, ...]


class EngineModule(torch.nn.Module):
    """One engine segment as an nn.Module: `inputs`/`outputs` say what it was built for.

    Called on its own, it checks its inputs (shape, dtype, device). Inside a lowered module the
    input guard has already checked the model's inputs, which fixes every engine's input shapes
    and dtypes: on each call the guard sets `checked_upstream`, and the engine's next call
    skips its own check and clears the flag. The flag is written straight into the instance
    dict: nn.Module's __setattr__ (type checks for parameters and submodules) costs microseconds.
    """

    def __init__(
        self,
        name: str,
        inputs: tuple[TensorSig, ...],
        outputs: tuple[TensorSig, ...],
        tuple_output: bool,
        device: torch.device,
    ) -> None:
        super().__init__()
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.tuple_output = tuple_output
        self.device = device
        self.checked_upstream = False
        self.check = InputCheck(f"{name}: ", inputs, device)
        self.profile = ProfileChoice(f"{name}: ", inputs)

    def forward(self, *tensors: torch.Tensor) -> Outputs:
        if self.checked_upstream:
            self.__dict__["checked_upstream"] = False
        else:
            self.check(tensors)
        return self.run(tensors)

    __call__ = direct_call

    def run(self, tensors: Sequence[torch.Tensor]) -> Outputs:
        """The engine's outputs for inputs that passed the check."""
        raise NotImplementedError

    def describe_backend(self) -> str:
        raise NotImplementedError

    @property
    def streamable_bytes(self) -> int:
        """Bytes of weights TensorRT may stream from host memory (weight streaming); 0: none."""
        return 0

    @property
    def weight_streaming_budget(self) -> int | None:
        """Bytes of the streamable weights kept on the GPU (None: TensorRT chooses)."""
        return 0

    def set_weight_streaming_budget(self, budget: int | None) -> None:
        """Keep `budget` bytes of the streamable weights on the GPU (None: TensorRT's automatic budget)."""
        raise NotImplementedError(f"{self.name} streams no weights")

    def extra_repr(self) -> str:
        ins = ", ".join(f"{s.source}: {s.describe()}" for s in self.inputs)
        outs = ", ".join(f"{s.source}: {s.describe()}" for s in self.outputs)
        profiles = f", {len(self.profile.profiles)} profiles" if self.profile.several else ""
        return f"{self.name}, {self.describe_backend()}{profiles}, ({ins}) -> ({outs})"
