"""What the generated python-backend model.py runs: a lowered module over a batch of Triton
requests.

With a batch dim (max_batch_size > 0) the requests Triton's dynamic batcher hands over together
are concatenated along dim 0, where their other dims agree, run as one call and split again. If a
merged call fails, its requests run one by one, so only the request at fault gets the error.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import torch

from trt_lower.deploy.allocations import DEFAULT_MAX_EAGER_ALLOCATION
from trt_lower.triton.signature import output_names, output_tensors

Request = Mapping[str, torch.Tensor]
Reply = dict[str, torch.Tensor]

# The errors trt_lower's input checks raise (EngineInputError and GenerationLimitError are
# ValueErrors; an out-of-range index an IndexError; a wrong kind of value a TypeError): the
# client's fault, answered as HTTP 400 / gRPC INVALID_ARGUMENT. Any other is the server's (500).
INPUT_ERRORS = (ValueError, IndexError, TypeError)


class Runner:
    def __init__(
        self,
        module: torch.nn.Module,
        inputs: Sequence[str],
        outputs: Sequence[str],
        device: torch.device,
        batching: bool,
    ) -> None:
        self.module = module
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.device = device
        self.batching = batching
        # A non-batching model's scalars travel as [1] (config.py): which inputs to take back to ().
        guard = getattr(module, "_input_guard", None)
        sigs = getattr(guard, "inputs", ())
        self._scalar_inputs = [not batching and len(s.min_shape) == 0 for s in sigs] or [False] * len(self.inputs)

    @classmethod
    def from_artifact(
        cls,
        path: str,
        inputs: Sequence[str],
        outputs: Sequence[str],
        device: str,
        batching: bool,
        max_eager_allocation: int = DEFAULT_MAX_EAGER_ALLOCATION,
    ) -> "Runner":
        """The runner of the artifact at `path`, loaded with trt_lower.load's `max_eager_allocation`."""
        import trt_lower

        torch_device = torch.device(device)
        if torch_device.type == "cuda":
            torch.cuda.set_device(torch_device)  # TensorRT engines deserialize on the current GPU
        return cls(
            trt_lower.load(path, max_eager_allocation=max_eager_allocation), inputs, outputs, torch_device, batching
        )

    def run(self, requests: Sequence[Request]) -> list[Reply | Exception]:
        replies: dict[int, Reply | Exception] = {}
        groups: dict[tuple[object, ...], list[int]] = {}
        for i, request in enumerate(requests):
            key = tuple((tuple(request[n].shape[1:]), request[n].dtype) for n in self.inputs) if self.batching else (i,)
            groups.setdefault(key, []).append(i)
        for members in groups.values():
            if len(members) > 1:
                try:
                    for i, reply in zip(members, self._merged([requests[i] for i in members])):
                        replies[i] = reply
                    continue
                except Exception:
                    pass  # some request of the group is at fault: run them one by one to find it
            for i in members:
                replies[i] = self._reply_or_error(requests[i])
        return [replies[i] for i in range(len(requests))]

    def _reply_or_error(self, request: Request) -> Reply | Exception:
        try:
            return self._merged([request])[0]
        except Exception as error:  # the request's reply: Triton hands it to the client
            return error

    def _merged(self, requests: Sequence[Request]) -> list[Reply]:
        if len(requests) == 1:
            return [dict(zip(self.outputs, self._call([requests[0][n] for n in self.inputs])))]
        sizes = [r[self.inputs[0]].shape[0] for r in requests]
        merged = self._call([torch.cat([r[n] for r in requests]) for n in self.inputs])
        parts = [torch.split(t, sizes) for t in merged]
        return [dict(zip(self.outputs, (p[k].contiguous() for p in parts))) for k in range(len(requests))]

    def _call(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        tensors = [
            t.reshape(()) if scalar and t.shape == (1,) else t for t, scalar in zip(tensors, self._scalar_inputs)
        ]
        with torch.inference_mode():
            result = self.module(*(t.to(self.device) for t in tensors))
        names = output_names(result)
        if names != self.outputs:
            raise RuntimeError(f"the model returned outputs {names}, its config.pbtxt declares {self.outputs}")
        return [t.reshape(1) if t.dim() == 0 and not self.batching else t.contiguous() for t in output_tensors(result)]
