"""lower_causal_lm: a transformers causal LM lowered for generation."""

from __future__ import annotations

import logging
from typing import Any

import torch
from transformers import PreTrainedModel

from trt_lower.api import lower_to_trt
from trt_lower.llm.generation import LoweredCausalLM
from trt_lower.llm.step import DecodeStep
from trt_lower.values.spec import TensorSpec

log = logging.getLogger("trt_lower")


def lower_causal_lm(
    model: PreTrainedModel, *, max_batch: int, max_length: int, prefill_chunk: int | None = None, **options: Any
) -> LoweredCausalLM:
    """`model` (a transformers causal LM: `LlamaForCausalLM`, `Qwen2ForCausalLM`, `GPT2LMHeadModel`...)
    lowered for `generate()` on up to `max_batch` sequences of up to `max_length` positions (prompt
    and new tokens). One engine runs the prompt (a dynamic query length) and each new token, against
    the positions in use of a key/value cache of `max_length` positions preallocated per layer and
    updated in place; it has two optimization profiles, prefill and decode (one new token).
    prefill_chunk: the most prompt tokens one step takes (default max_length); a longer prompt runs
    in consecutive chunks of that many, which bounds the prefill's activation memory. Where the
    capture narrows the query length (a tensor-parallel model on more than 2 ranks), prompts run in
    chunks of what it kept, and the report's notes say so.
    options: lower_to_trt's (backend, precision, require_full, ...)."""
    if not isinstance(model, PreTrainedModel) or not model.can_generate() or model.config.is_encoder_decoder:
        raise ValueError(
            f"model must be a transformers causal LM (a decoder-only PreTrainedModel that can "
            f"generate), got {type(model).__name__}"
        )
    chunk = max_length if prefill_chunk is None else prefill_chunk
    for name, value, least in (("max_batch", max_batch, 1), ("max_length", max_length, 2)):
        if not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an int >= {least}, got {value!r}")
    if type(chunk) is not int or not 1 <= chunk <= max_length:
        raise ValueError(f"prefill_chunk must be an int in 1..max_length ({max_length}), got {chunk!r}")
    model.eval()  # type: ignore[no-untyped-call]  # transformers' override is untyped
    # Each layer's key/value heads and head dims, read off a one-token forward's cache.
    with torch.no_grad():
        layers = model(torch.zeros(1, 1, dtype=torch.int64, device=model.device), use_cache=True).past_key_values.layers
    cache = [(int(layer.keys.shape[1]), int(layer.keys.shape[3]), int(layer.values.shape[3])) for layer in layers]
    dtype = layers[0].keys.dtype
    b, n = max_batch, max_length
    past = torch.zeros((), dtype=torch.int64)
    # The cache length L (the positions in use, prompt included) is dynamic, 1..max_length; the
    # query length q too, 1..prefill_chunk (a prompt or a chunk of it, or one new token). Two
    # optimization profiles: prefill (q up to prefill_chunk, tuned for a prompt of half of
    # max_length or the whole chunk) and decode (q = 1, tuned for a cache half full), so that
    # TensorRT times each phase's kernels at shapes it runs.
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

    prefill = step_inputs(ids(min(half, chunk), chunk), ids(half, n))
    decode = step_inputs(ids(1, 1), ids(half, n))
    declared = step_inputs(ids(1, chunk), ids(half, n))  # the union, opt in decode's
    step = lower_to_trt(DecodeStep(model), declared, profiles=[prefill, decode], **options)
    lowered = LoweredCausalLM(step, LoweredCausalLM.describe_model(model, max_batch, max_length, cache, dtype))
    if lowered.prefill_chunk < max_length:
        note = f"prompts longer than {lowered.prefill_chunk} tokens run in chunks of {lowered.prefill_chunk}"
        step.report.notes.append(note)
        log.info("%s", note)
    return lowered
