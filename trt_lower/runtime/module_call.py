"""A module call that goes straight to `forward` when nn.Module would do nothing else."""

from __future__ import annotations

from typing import Any

import torch
from torch.nn.modules import module as _nn


def direct_call(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
    """`nn.Module.__call__` for modules called on every step of a lowered model's call.

    nn.Module's own call runs forward directly when the module has no hooks (its own or global),
    is not compiled and is not being traced, but gets there through two Python frames and a
    re-packing of the arguments: ~1-2 µs a call, a sixth of a small model's host cost. This is the
    same test in one frame; with a hook, compiled or traced, it is nn.Module's call itself.
    """
    if (
        self._forward_pre_hooks
        or self._forward_hooks
        or self._backward_pre_hooks
        or self._backward_hooks
        or _nn._global_forward_pre_hooks
        or _nn._global_forward_hooks
        or _nn._global_backward_pre_hooks
        or _nn._global_backward_hooks
        or self._compiled_call_impl is not None
        or torch._C._get_tracing_state()
    ):
        return torch.nn.Module.__call__(self, *args, **kwargs)
    return self.forward(*args, **kwargs)
