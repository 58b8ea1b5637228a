"""lower_causal_lm: a transformers causal LM lowered for generation."""

from __future__ import annotations

from typing import Any

import torch
from transformers import PreTrainedModel

from trt_lower.api import lower_to_trt
from trt_lower.llm.generation import LoweredCausalLM
from trt_lower.llm.step import DecodeStep
from trt_lower.values.spec import TensorSpec


def lower_causal_lm(model: PreTrainedModel, *, max_batch: int, max_length: int, **options: Any) -> LoweredCausalLM:
    """`model` (a transformers causal LM: `LlamaForCausalLM`, `Qwen2ForCausalLM`, `GPT2LMHeadModel`...)
    lowered for `generate()` on up to `max_batch` sequences of up to `max_length` positions (prompt
    and new tokens). One engine runs the prompt (a dynamic query length) and each new token, against
    the positions in use of a key/value cache of `max_length` positions preallocated per layer and
    updated in place.
    options: lower_to_trt's (backend, precision, require_full, ...)."""
    if not isinstance(model, PreTrainedModel) or not model.can_generate() or model.config.is_encoder_decoder:
        raise ValueError(
            f"model must be a transformers causal LM (a decoder-only PreTrainedModel that can "
            f"generate), got {type(model).__name__}"
        )
    for name, value, least in (("max_batch", max_batch, 1), ("max_length", max_length, 2)):
        if not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an int >= {least}, got {value!r}")
    model.eval()  # type: ignore[no-untyped-call]  # transformers' override is untyped
    # Each layer's key/value heads and head dims, read off a one-token forward's cache.
    with torch.no_grad():
        layers = model(torch.zeros(1, 1, dtype=torch.int64, device=model.device), use_cache=True).past_key_values.layers
    cache = [(int(layer.keys.shape[1]), int(layer.keys.shape[3]), int(layer.values.shape[3])) for layer in layers]
    dtype = layers[0].keys.dtype
    b, n = max_batch, max_length
    # The cache length L (the positions in use, prompt included) is dynamic, 1..max_length, tuned
    # for the middle of the range; the query length q too (the prompt, or one new token).
    half = max(n // 2, 1)
    tokens = TensorSpec((1, 1), (b, 1), (b, n), torch.int64)
    mask = TensorSpec((1, 1), (b, half), (b, n), torch.int64)

    def cache_spec(heads: int, dim: int) -> TensorSpec:
        return TensorSpec((1, 1, heads, dim), (half, b, heads, dim), (n, b, heads, dim), dtype)

    keys = tuple(cache_spec(h, d) for h, d, _ in cache)
    values = tuple(cache_spec(h, d) for h, _, d in cache)
    step = lower_to_trt(
        DecodeStep(model), (tokens, mask, tokens, torch.zeros((), dtype=torch.int64), keys, values), **options
    )
    return LoweredCausalLM(step, LoweredCausalLM.describe_model(model, max_batch, max_length, cache, dtype))
