"""The step a causal LM's generation repeats, as one module to lower: the model's forward over
`q` new tokens against a key/value cache of fixed size `max_length`, handed in as tensors.

It returns the last position's logits and the new tokens' keys and values; the caller writes those
into its preallocated cache buffers in place (`index_copy_`), so the cache keeps its addresses and
no step copies it. The same step serves the prompt (q = its length) and each new token (q = 1)."""

from __future__ import annotations

from typing import Any

import torch
from transformers import PreTrainedModel
from transformers.cache_utils import Cache, CacheLayerMixin
from transformers.modeling_outputs import CausalLMOutputWithPast

# What transformers calls the key/value cache in forward() and generate() and their outputs:
# `cache` from 5.24 (which still takes `past_key_values`, with a deprecation warning), before that
# `past_key_values`.
CACHE_KWARG = "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"


class FixedLayer(CacheLayerMixin):  # type: ignore[no-untyped-call]  # transformers is untyped there
    """One layer's preallocated key/value buffers, attended over in full (the causal and padding
    masks hide what is not written yet)."""

    is_compileable = False
    is_sliding = False  # the whole window is kept: a sliding window is the mask's (as transformers builds it)

    def __init__(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.buffers = (keys, values)
        self.keys, self.values = keys, values
        self.is_initialized = True

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        raise AssertionError("the buffers are allocated up front")

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.buffers[0].shape[2], 0

    def get_max_length(self) -> int:
        return int(self.buffers[0].shape[2])


class _BufferLayer(FixedLayer):  # type: ignore[no-untyped-call]  # transformers is untyped there
    """One layer's cache as transformers' attention sees it in the step: the buffers with the new
    keys and values written at `past..past+q` (out of place: the buffers are the step's inputs)."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, positions: torch.Tensor) -> None:
        super().__init__(keys, values)
        self.positions = positions
        self.new: tuple[torch.Tensor, torch.Tensor] | None = None

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        self.new = (key_states, value_states)
        keys, values = self.buffers
        return keys.index_copy(2, self.positions, key_states), values.index_copy(2, self.positions, value_states)

    def get_seq_length(self) -> int:
        raise AssertionError("the step passes position_ids; the mask reads the query offset")


class _BufferCache(Cache):
    """The step's cache: one _BufferLayer per layer; the queries start at `past` (a 0-d tensor, so
    one captured step serves every position)."""

    def __init__(
        self, keys: tuple[torch.Tensor, ...], values: tuple[torch.Tensor, ...], past: torch.Tensor, q: int
    ) -> None:
        positions = past + torch.arange(q, device=past.device)
        self.buffer_layers = [_BufferLayer(k, v, positions) for k, v in zip(keys, values)]
        super().__init__(layers=list(self.buffer_layers))
        self.past = past

    def get_query_offset(self, layer_idx: int = 0) -> Any:
        return self.past

    def get_seq_length(self, layer_idx: int = 0) -> Any:
        return self.past


class DecodeStep(torch.nn.Module):
    """`model`'s forward over new tokens with the cache as tensors:
    (input_ids [B, q], attention_mask [B, L], position_ids [B, q], past [], keys, values: one
    [B, H, L, D] per layer) -> (logits [B, V] at the last position, new keys, new values: [B, H, q, D])."""

    def __init__(self, model: PreTrainedModel) -> None:
        super().__init__()
        self.model = model

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        past: torch.Tensor,
        keys: tuple[torch.Tensor, ...],
        values: tuple[torch.Tensor, ...],
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
        cache = _BufferCache(keys, values, past, input_ids.shape[1])
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=True,
            **{CACHE_KWARG: cache},
            logits_to_keep=1,
        )
        new = [layer.new for layer in cache.buffer_layers]
        assert all(n is not None for n in new), "every layer updates the cache"
        return (out.logits[:, -1], tuple(n[0] for n in new if n is not None), tuple(n[1] for n in new if n is not None))
