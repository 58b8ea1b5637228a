"""LoweredCausalLM: a causal LM whose every forward during `generate()` is one lowered step
(llm/step.py) against key/value cache buffers allocated once, driven by transformers' own
`generate()` (greedy, sampling, logits processors, stopping, eos and padding as the eager model)."""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import re
import threading
from typing import Any, Callable, Iterator

import torch
from transformers import GenerationConfig, PreTrainedModel
from transformers.cache_utils import Cache
from transformers.modeling_outputs import CausalLMOutputWithPast

from converters.core.errors import TrtLowerError
from trt_lower.llm.step import CACHE_KWARG, FixedLayer
from trt_lower.stitch.lowered import LoweredModule
from trt_lower.values.ranges import INFERRED

_CLASS_PATH = re.compile(r"transformers(\.[A-Za-z_][A-Za-z0-9_]*)+")
# The most layers an artifact's model may have (building the model's shell costs ~1 ms a layer;
# the deepest released LLMs have ~130).
MAX_LAYERS = 1024


class GenerationLimitError(TrtLowerError, ValueError):
    """A generate() call beyond the batch or length the model was lowered for."""


class _Layer(FixedLayer):  # type: ignore[no-untyped-call]  # transformers is untyped there
    """A layer's preallocated buffers as transformers reads a cache ([B, H, max_length, D] views),
    written in place by LoweredCausalLM.forward, not by transformers."""

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        raise AssertionError("the lowered step writes the cache (LoweredCausalLM.forward)")

    def get_seq_length(self) -> int:
        raise AssertionError("the cache's length is BufferCache.length")


class BufferCache(Cache):
    """The cache generate() carries between steps: the buffers ([max_length, batch, H, D] per
    layer, sequence-major so that the positions in use are one contiguous block), how many
    positions are written, and that count as the 0-d tensor the step takes."""

    def __init__(self, keys: list[torch.Tensor], values: list[torch.Tensor], past: torch.Tensor) -> None:
        self.buffers = list(zip(keys, values))
        super().__init__(layers=[_Layer(k.permute(1, 2, 0, 3), v.permute(1, 2, 0, 3)) for k, v in self.buffers])
        self.length = 0
        self.past = past

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.length

    def get_max_cache_shape(self, layer_idx: int = 0) -> int:
        return int(self.buffers[layer_idx][0].shape[0])

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        raise NotImplementedError("beam search is not supported by a lowered causal LM; use num_beams=1")


# One call's buffers: keys and values per layer (flat: a call views them for its batch,
# `sequence_major`), and the 0-d count of positions written.
Buffers = tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]


def sequence_major(buffer: torch.Tensor, length: int, batch: int, heads: int, dim: int) -> torch.Tensor:
    """A flat buffer's first length x batch x heads x dim elements as [length, batch, heads, dim]:
    for every batch up to the one it was allocated for, the first L positions are its first
    L x batch x heads x dim elements, one contiguous block the step takes without a copy."""
    return buffer[: length * batch * heads * dim].view(length, batch, heads, dim)


class _BufferPool:
    """Cache buffers for concurrent generate() calls: a call takes a free set, or allocates one
    when every set is in use by another thread, and gives it back when it ends. Serial calls
    reuse one set; N threads generating at once hold N sets."""

    def __init__(self, allocate: Callable[[], Buffers]) -> None:
        self._allocate = allocate
        self._lock = threading.Lock()
        self.free = [allocate()]  # one set now, so that a shortage of memory shows when lowering

    @contextlib.contextmanager
    def taken(self) -> Iterator[Buffers]:
        with self._lock:
            buffers = self.free.pop() if self.free else None
        if buffers is None:
            buffers = self._allocate()
        try:
            yield buffers
        finally:
            with self._lock:
                self.free.append(buffers)


def _model_class(path: Any) -> type[PreTrainedModel]:
    """The transformers model class `path` names; only a module of transformers is imported."""
    if not isinstance(path, str) or not _CLASS_PATH.fullmatch(path):
        raise ValueError(
            f"model_class {str(path)[:80]!r} is not a class of transformers (transformers.<module>.<Class>)"
        )
    module, _, name = path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name, None)
    except ImportError as e:
        raise ValueError(f"model_class {path!r} cannot be imported here ({e})") from None
    if not (isinstance(cls, type) and issubclass(cls, PreTrainedModel)):
        raise ValueError(f"model_class {path!r} is not a transformers model class")
    return cls


def _count(description: dict[str, Any], key: str, least: int) -> int:
    value = description.get(key)
    if type(value) is not int or value < least:
        raise ValueError(f"{key} must be an int >= {least}, got {str(value)[:80]}")
    return value


def _check_description(step: LoweredModule, description: dict[str, Any]) -> tuple[list[tuple[int, int, int]], int]:
    """Each layer's (heads, key dim, value dim) and the most tokens one step takes (the prefill
    chunk), once `description` is shown to agree with the step's recorded input signatures (input
    ids, mask, positions, past, keys..., values...) and its cache to fit this machine's memory.
    ValueError naming the field otherwise: an artifact's `extra` is untrusted input."""
    batch, length = _count(description, "max_batch", 1), _count(description, "max_length", 2)
    cache = description.get("cache")
    if not isinstance(cache, list) or not all(
        isinstance(c, list) and len(c) == 3 and all(type(n) is int and n >= 1 for n in c) for c in cache
    ):
        raise ValueError("cache must be a list of [heads, key dim, value dim] per layer, each an int >= 1")
    if len(cache) > MAX_LAYERS:
        raise ValueError(f"cache describes {len(cache)} layers; at most {MAX_LAYERS}")
    dtype = getattr(torch, str(description.get("dtype")), None) if isinstance(description.get("dtype"), str) else None
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype {str(description.get('dtype'))[:80]!r} is not a floating-point torch dtype")
    for key in ("config", "generation_config"):
        if not isinstance(description.get(key), dict):
            raise ValueError(f"{key} must be a JSON object")
    guard = getattr(step, "_input_guard", None)
    sigs = list(getattr(guard, "inputs", ()))
    got = [tuple(s.max_shape) for s in sigs]
    chunk = _query_length(got[0] if got else (), length)
    wanted = [(batch, chunk), (batch, length), (batch, chunk), ()]
    wanted += [(length, batch, h, k) for h, k, _ in cache] + [(length, batch, h, v) for h, _, v in cache]
    if got != wanted or any(s.dtype != dtype for s in sigs[4:]):
        # Where the capture narrowed a range (a size test in the model), the report's note says which.
        narrowed = [n for n in getattr(getattr(step, "report", None), "notes", []) if INFERRED in n]
        raise ValueError(
            f"max_batch, max_length, cache and dtype describe the step's inputs as {wanted[:6]}..., "
            f"its signatures say {got[:6]}..." + "".join(f"; {n}" for n in narrowed)
        )
    size = batch * length * sum(h * (k + v) for h, k, v in cache) * dtype.itemsize
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if size > memory:
        raise ValueError(f"the cache would take {size / 2**30:.1f} GiB; this machine has {memory / 2**30:.1f} GiB")
    return [(h, k, v) for h, k, v in cache], chunk


def _query_length(ids_shape: tuple[int, ...], length: int) -> int:
    """The most new tokens the step takes (input_ids' largest dim 1): up to max_length, fewer
    where the lowering asked (prefill_chunk) or the capture narrowed it (torch.export's guards on
    a tensor-parallel model's embedding). max_length where the shape is not [batch, q] with q in
    1..max_length (the caller's comparison then names the mismatch)."""
    q = ids_shape[1] if len(ids_shape) == 2 else None
    return q if type(q) is int and 1 <= q <= length else length


class LoweredCausalLM:
    """What `trt_lower.llm.lower_causal_lm` returns: `.generate(...)` as the eager model's, each
    forward one call of the lowered `step` (a LoweredModule). The key/value cache is one buffer per
    layer of `max_length` x `max_batch` x heads x head dim elements, allocated once per concurrent
    call (_BufferPool); generate() views it as [max_length, batch, heads, head dim]. generate() may
    be called from several threads at once: each call has buffers of its own. `trt_lower.save` / `load` take it
    (its artifact is the step's, plus `describe()`)."""

    def __init__(self, step: LoweredModule, description: dict[str, Any]) -> None:
        cache, self.prefill_chunk = _check_description(step, description)
        self.step = step
        self.description = step.extra = description  # trt_lower.save writes it beside the step
        self.max_batch: int = description["max_batch"]
        self.max_length: int = description["max_length"]
        cls = _model_class(description["model_class"])
        if cls.config_class is None:
            raise ValueError(f"{description['model_class']} names no config class")
        config = cls.config_class.from_dict(description["config"])
        layers = getattr(config, "num_hidden_layers", None)
        if type(layers) is not int or layers > len(cache):  # the model shell below builds each layer
            raise ValueError(
                f"config.num_hidden_layers is {str(layers)[:80]}; the step's signatures hold caches of {len(cache)}"
            )
        dtype = getattr(torch, description["dtype"])
        guard = getattr(step, "_input_guard", None)  # the device the engines run on, the buffers' too
        device = getattr(getattr(guard, "check", None), "device", None) or torch.device("cpu")

        def allocate() -> Buffers:
            def zeros(*shape: int, dtype: torch.dtype = dtype) -> torch.Tensor:
                return torch.zeros(shape, dtype=dtype, device=device)

            return (
                [zeros(self.max_length * self.max_batch * h * d) for h, d, _ in cache],
                [zeros(self.max_length * self.max_batch * h * d) for h, _, d in cache],
                zeros(dtype=torch.int64),
            )

        self._buffers = _BufferPool(allocate)
        self._layer_sizes = cache

        # transformers' generate() on a model of the same class and config, its weights on the meta
        # device (none are read: every forward is the lowered step's).
        @functools.wraps(cls.forward)  # generate() reads forward's parameters (position_ids...) to know what to pass
        def forward(shell: PreTrainedModel, *args: Any, **kwargs: Any) -> CausalLMOutputWithPast:
            return self.forward(*args, **kwargs)

        shell_class = type(f"Lowered{cls.__name__}", (cls,), {"forward": forward, "device": property(lambda _: device)})
        with torch.device("meta"):
            self.model = shell_class(config)
        self.model.eval()
        self.model.generation_config = GenerationConfig.from_dict(description["generation_config"])

    @classmethod
    def from_lowered(cls, step: LoweredModule) -> "LoweredCausalLM":
        """The generation module of a step trt_lower.load read (its `extra` describes the rest)."""
        if not isinstance(step.extra, dict) or step.extra.get("kind") != "causal_lm":
            raise ValueError("this LoweredModule is no causal LM's step (see trt_lower.llm.lower_causal_lm)")
        return cls(step, step.extra)

    @property
    def lowered_module(self) -> LoweredModule:
        """What trt_lower.save writes: the step, with what generation needs as its `extra`."""
        return self.step

    @property
    def report(self) -> Any:
        """The step's LoweringReport (coverage, engines, fallbacks)."""
        return self.step.report

    @staticmethod
    def describe_model(
        model: PreTrainedModel, max_batch: int, max_length: int, cache: list[tuple[int, int, int]], dtype: torch.dtype
    ) -> dict[str, Any]:
        """What generation needs besides the step, as JSON (the artifact's `extra`)."""
        cls = type(model)
        return {
            "kind": "causal_lm",
            "model_class": f"{cls.__module__}.{cls.__qualname__}",
            "config": model.config.to_dict(),
            "generation_config": model.generation_config.to_dict(),
            "max_batch": max_batch,
            "max_length": max_length,
            "cache": [list(c) for c in cache],
            "dtype": str(dtype).removeprefix("torch."),
        }

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        cache: Cache | None = None,
        **kwargs: Any,
    ) -> CausalLMOutputWithPast:
        """One step: the lowered model over `input_ids` (the tokens not yet in the cache), which
        transformers gives as `cache` from 5.24 on, as `past_key_values` before."""
        past_key_values = past_key_values if cache is None else cache
        if not isinstance(past_key_values, BufferCache):
            raise ValueError("a lowered causal LM runs with the cache generate() is given by LoweredCausalLM.generate")
        batch, q = input_ids.shape
        past = past_key_values.length
        length = past + q  # the positions the step attends over: those written and the new ones
        if length > self.max_length:
            raise GenerationLimitError(
                f"{length} positions exceed max_length={self.max_length}, the cache size the model was lowered for"
            )
        if attention_mask is None:
            mask = torch.ones(batch, length, dtype=torch.int64, device=input_ids.device)
        else:
            mask = attention_mask[:, -length:].to(torch.int64)
        if position_ids is None:
            position_ids = torch.arange(past, length, device=input_ids.device)
        positions = position_ids.expand(batch, q)
        # A prompt longer than the step takes runs in consecutive chunks, each attending over the
        # positions before it and its own; the last chunk's logits are the prompt's.
        for start in range(0, max(q, 1), self.prefill_chunk):  # once for no tokens: the step refuses them
            end = min(start + self.prefill_chunk, q)
            logits = self._step(
                input_ids[:, start:end], mask[:, : past + end], positions[:, start:end], past_key_values
            )
        cache_field: dict[str, Any] = {CACHE_KWARG: past_key_values}
        return CausalLMOutputWithPast(logits=logits[:, None, :], **cache_field)

    def _step(
        self, input_ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache: BufferCache
    ) -> torch.Tensor:
        """The lowered step over `input_ids` (at most prefill_chunk tokens) after the cache's
        positions written; writes their keys and values in place; the last position's logits."""
        past, length = cache.length, cache.length + input_ids.shape[1]
        cache.past.fill_(past)
        # The first `length` positions of each sequence-major buffer: contiguous views, no copy.
        keys = tuple(k[:length] for k, _ in cache.buffers)
        values = tuple(v[:length] for _, v in cache.buffers)
        logits, new_keys, new_values = self.step(
            input_ids.contiguous(), mask.contiguous(), positions.contiguous(), cache.past, keys, values
        )
        for (keys_buffer, values_buffer), k, v in zip(cache.buffers, new_keys, new_values):
            keys_buffer[past:length].copy_(k)
            values_buffer[past:length].copy_(v)
        cache.length = length
        return logits  # type: ignore[no-any-return]

    def generate(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs: Any) -> Any:
        """transformers' `generate()` of the eager model (same arguments, same result), every
        forward lowered. GenerationLimitError where the batch or the prompt plus `max_new_tokens`
        exceed `max_batch` / `max_length`."""
        if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
            raise ValueError(
                f"input_ids must be a [batch, length] tensor of token ids, got "
                f"{getattr(input_ids, 'shape', type(input_ids).__name__)}"
            )
        batch, length = input_ids.shape
        if batch > self.max_batch:
            raise GenerationLimitError(
                f"batch {batch} exceeds max_batch={self.max_batch}, the batch the model was lowered for"
            )
        if length > self.max_length:
            raise GenerationLimitError(
                f"the prompt's {length} tokens exceed max_length={self.max_length}, the "
                "cache size the model was lowered for"
            )
        config = kwargs.get("generation_config") or self.model.generation_config
        new = kwargs.get("max_new_tokens", config.max_new_tokens)
        total = length + new if new is not None else kwargs.get("max_length", config.max_length) or 20
        if total > self.max_length + 1:  # the last token is sampled, never written to the cache
            raise GenerationLimitError(
                f"the prompt's {length} tokens and {total - length} new ones exceed "
                f"max_length={self.max_length}, the cache size the model was lowered for"
            )
        if (kwargs.get("num_beams", config.num_beams) or 1) != 1:
            raise ValueError("a lowered causal LM generates with num_beams=1 (greedy or sampling)")
        with self._buffers.taken() as (keys, values, past):
            cache = BufferCache(
                [sequence_major(k, self.max_length, batch, h, d) for k, (h, d, _) in zip(keys, self._layer_sizes)],
                [sequence_major(v, self.max_length, batch, h, d) for v, (h, _, d) in zip(values, self._layer_sizes)],
                past,
            )
            return self.model.generate(input_ids, attention_mask=attention_mask, **{CACHE_KWARG: cache}, **kwargs)
