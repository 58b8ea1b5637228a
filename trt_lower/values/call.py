"""The one form of a model call that every public function running a model takes: the positional
arguments as a tuple (a lone tensor meaning `(x,)`) and the keyword arguments as a dict, as
torch.export's `(args, kwargs)`. Each function normalises through here, so that one call that
works with lower_to_trt works with check_accuracy, benchmark and the rest alike."""

from __future__ import annotations

from typing import Any, Mapping, Sequence, Union

import torch

from trt_lower.values.spec import TensorSpec

# What a user passes as `inputs`: a tuple or list of the positional arguments (pytrees with a
# tensor or TensorSpec at each leaf), or one tensor standing for `(x,)`.
Inputs = Union[torch.Tensor, TensorSpec, Sequence[Any]]


def model_call(
    inputs: Any, kwargs: Mapping[str, Any] | None = None, *, name: str = "inputs", kwargs_name: str = "kwargs"
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`(args, kwargs)` for `model(*args, **kwargs)`. ValueError naming `name` when `inputs` is
    neither a tensor, a TensorSpec, a tuple nor a list (a dict or a generator would be iterated
    into the wrong arguments), and naming `kwargs_name` when `kwargs` is not a dict keyed by strings."""
    if isinstance(inputs, (torch.Tensor, TensorSpec)):
        args: tuple[Any, ...] = (inputs,)
    elif isinstance(inputs, (tuple, list)):
        args = tuple(inputs)
    else:
        raise ValueError(
            f"{name} must be a tensor or a tuple or list of the model's positional arguments, got "
            f"{type(inputs).__name__}" + (" (pass keyword arguments as kwargs=)" if isinstance(inputs, Mapping) else "")
        )
    if kwargs is not None and not (isinstance(kwargs, Mapping) and all(isinstance(k, str) for k in kwargs)):
        raise ValueError(f"{kwargs_name} must be a dict of keyword arguments, got {type(kwargs).__name__}")
    return args, dict(kwargs or {})
