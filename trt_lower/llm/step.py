"""The step a causal LM's generation repeats, as one module to lower: the model's forward over
`q` new tokens against the key/value cache positions in use (`L` = past + q of them, a dynamic
length up to `max_length`), handed in as tensors.

The cache is sequence-major ([L, B, H, D]): the caller's buffers hold `max_length` positions, and
their first `L` are one contiguous block, so handing them in copies nothing and the attention costs
what the positions in use cost, not the whole buffer. The step returns the last position's logits
and the new tokens' keys and values ([q, B, H, D]); the caller copies those into its buffers at
`past..L` in place, so the cache keeps its addresses. The same step serves the prompt (q = its
length) and each new token (q = 1)."""

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
    """One layer's key/value cache as transformers' attention reads it ([B, H, L, D]), attended
    over in full: L is the positions the caller handed in (the causal and padding masks hide the
    rest)."""

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
    """`model`'s forward over new tokens with the cache positions in use as tensors:
    (input_ids [B, q], attention_mask [B, L], position_ids [B, q], past [] (= L - q), keys, values:
    one [L, B, H, D] per layer) -> (logits [B, V] at the last position, new keys, new values:
    [q, B, H, D])."""

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
        # transformers' attention reads [B, H, L, D]: a permuted view (in the engine a transpose of
        # the positions in use, which the caller's sequence-major buffers hand in without a copy).
        cache = _BufferCache(_heads_first(keys), _heads_first(values), past, input_ids.shape[1])
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
        new_keys = tuple(n[0] for n in new if n is not None)
        new_values = tuple(n[1] for n in new if n is not None)
        return out.logits[:, -1], _sequence_first(new_keys), _sequence_first(new_values)


def _heads_first(cache: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """[L, B, H, D] -> [B, H, L, D]."""
    return tuple(t.permute(1, 2, 0, 3) for t in cache)


def _sequence_first(cache: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """[B, H, q, D] -> [q, B, H, D]: the layout of the caller's buffers."""
    return tuple(t.permute(2, 0, 1, 3) for t in cache)
