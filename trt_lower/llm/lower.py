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
    updated in place; it has two optimization profiles, prefill and decode (one new token).
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
    past = torch.zeros((), dtype=torch.int64)
    # The cache length L (the positions in use, prompt included) is dynamic, 1..max_length; the
    # query length q too (the prompt, or one new token). Two optimization profiles: prefill (q up
    # to max_length, tuned for a prompt of half of it) and decode (q = 1, tuned for a cache half
    # full), so that TensorRT times each phase's kernels at shapes it runs.
    half = max(n // 2, 1)

    def step_inputs(tokens: TensorSpec, length: TensorSpec) -> tuple[Any, ...]:
        """The step's inputs for query lengths `tokens` and cache lengths `length` (dim 1 of both)."""

        def cache_spec(heads: int, dim: int) -> TensorSpec:
            return TensorSpec(
                (length.min_shape[1], 1, heads, dim),
                (length.opt_shape[1], b, heads, dim),
                (length.max_shape[1], b, heads, dim),
                dtype,
            )

        keys = tuple(cache_spec(h, d) for h, d, _ in cache)
        values = tuple(cache_spec(h, d) for h, _, d in cache)
        return (tokens, length, tokens, past, keys, values)

    def ids(opt: int, high: int) -> TensorSpec:
        return TensorSpec((1, 1), (b, opt), (b, high), torch.int64)

    prefill = step_inputs(ids(half, n), ids(half, n))
    decode = step_inputs(ids(1, 1), ids(half, n))
    declared = step_inputs(ids(1, n), ids(half, n))  # the union, opt in decode's
    step = lower_to_trt(DecodeStep(model), declared, profiles=[prefill, decode], **options)
    return LoweredCausalLM(step, LoweredCausalLM.describe_model(model, max_batch, max_length, cache, dtype))
