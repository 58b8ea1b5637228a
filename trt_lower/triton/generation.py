"""What the generated python-backend model.py runs for a causal LM lowered for generation
(trt_lower.llm.lower_causal_lm): each request is one `generate()` call, a prompt plus options ->
the prompt and its new tokens.

Requests run one by one: their options differ, and each call has the model's key/value cache
buffers to itself. Triton's batcher is off (max_batch_size 0): a request's batch is its own
prompts, up to the model's max_batch. A request beyond the model's limits gets its
GenerationLimitError as its reply; the next one runs as usual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import torch

from trt_lower.deploy.allocations import DEFAULT_MAX_EAGER_ALLOCATION
from trt_lower.stitch.lowered import LoweredModule
from trt_lower.triton.backend import Reply, Request
from trt_lower.triton.signature import ModelSignature, TritonTensor

if TYPE_CHECKING:  # imported where a model is loaded (trt_lower.load): it imports transformers
    from trt_lower.llm import LoweredCausalLM

KIND = "causal_lm"  # the artifact's kind (its `extra`), and the config's `kind` parameter
# The options a request may carry, each a one-element tensor: its dtype, and the Python value
# generate() takes. `seed` is torch.manual_seed's, before generating: a sampling request with a
# seed gives the same tokens each time.
OPTIONS: dict[str, tuple[torch.dtype, Callable[[Any], Any]]] = {
    "max_new_tokens": (torch.int32, int),
    "do_sample": (torch.bool, bool),
    "temperature": (torch.float32, float),
    "top_k": (torch.int32, int),
    "top_p": (torch.float32, float),
    "eos_token_id": (torch.int64, int),
    "pad_token_id": (torch.int64, int),
    "seed": (torch.int64, int),
}


def causal_lm_step(model: object) -> LoweredModule | None:
    """The lowered step of a causal LM lowered for generation, where `model` is its
    LoweredCausalLM or the step itself, told by the artifact kind (importing trt_lower.llm to ask
    isinstance would import transformers for every export); else None."""
    step = getattr(model, "lowered_module", model)
    if isinstance(step, LoweredModule) and isinstance(step.extra, dict) and step.extra.get("kind") == KIND:
        return step
    return None


def generation_signature() -> ModelSignature:
    """input_ids [batch, prompt length] with an optional attention_mask of its shape (left
    padding), the optional OPTIONS -> output_ids [batch, prompt + new tokens]."""
    tokens = (-1, -1)
    inputs = (
        TritonTensor("input_ids", torch.int64, tokens),
        TritonTensor("attention_mask", torch.int64, tokens, optional=True),
        *(TritonTensor(name, dtype, (1,), optional=True) for name, (dtype, _) in OPTIONS.items()),
    )
    return ModelSignature(
        inputs,
        (TritonTensor("output_ids", torch.int64, tokens),),
        None,
        "each request is one generate() call with its own options",
    )


class GenerationRunner:
    """A LoweredCausalLM over Triton requests, one generate() call each."""

    def __init__(self, model: LoweredCausalLM, device: torch.device) -> None:
        self.model = model
        self.device = device
        self.inputs = [t.name for t in generation_signature().inputs]

    @classmethod
    def from_artifact(
        cls, path: str, device: str, max_eager_allocation: int = DEFAULT_MAX_EAGER_ALLOCATION
    ) -> "GenerationRunner":
        """The generation runner of the artifact at `path`, loaded with trt_lower.load's `max_eager_allocation`."""
        import trt_lower
        from trt_lower.llm import LoweredCausalLM

        torch_device = torch.device(device)
        if torch_device.type == "cuda":
            torch.cuda.set_device(torch_device)  # TensorRT engines deserialize on the current GPU
        model = trt_lower.load(path, max_eager_allocation=max_eager_allocation)
        if not isinstance(model, LoweredCausalLM):
            raise ValueError(f"{path} holds no causal LM lowered for generation (trt_lower.llm.lower_causal_lm)")
        return cls(model, torch_device)

    def run(self, requests: Sequence[Request]) -> list[Reply | Exception]:
        return [self._reply_or_error(request) for request in requests]

    def _reply_or_error(self, request: Request) -> Reply | Exception:
        try:
            return {"output_ids": self.generate(request)}
        except Exception as error:  # the request's reply: Triton hands it to the client
            return error

    def generate(self, request: Request) -> torch.Tensor:
        """generate() on the request's prompt with its options (the inputs it carries)."""
        ids, mask = request["input_ids"], request.get("attention_mask")
        if mask is not None and mask.shape != ids.shape:
            raise ValueError(
                f"attention_mask has shape {tuple(mask.shape)}, input_ids {tuple(ids.shape)}: they must be the same"
            )
        options = {name: convert(request[name].item()) for name, (_, convert) in OPTIONS.items() if name in request}
        seed = options.pop("seed", None)
        if seed is not None:
            torch.manual_seed(seed)
        tokens: torch.Tensor = self.model.generate(
            ids.to(self.device), **options, attention_mask=None if mask is None else mask.to(self.device)
        )
        return tokens.contiguous()
