"""The new tensors update_weights takes, checked against those the module was lowered with."""

from __future__ import annotations

from typing import Mapping

import torch

from trt_lower.refit.errors import WeightUpdateError

# How many offending names an error lists before "and N more".
_LISTED = 8


def _names(names: list[str]) -> str:
    shown = ", ".join(f"'{n}'" for n in names[:_LISTED])
    return shown + (f" and {len(names) - _LISTED} more" if len(names) > _LISTED else "")


def new_state(
    source: torch.nn.Module | Mapping[str, torch.Tensor], lowered: Mapping[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """`source`'s state dict (a model's, or a mapping given as one), detached, after checking it
    has exactly the keys of `lowered` (the captured program's state dict), each a tensor of the
    same shape and dtype; WeightUpdateError naming each offending key otherwise."""
    if isinstance(source, torch.nn.Module):
        given: Mapping[str, object] = source.state_dict()
    elif isinstance(source, Mapping):
        given = source
    else:
        raise WeightUpdateError(f"update_weights takes a model or a state dict, got {type(source).__name__}")
    missing = [k for k in lowered if k not in given]
    unexpected = [str(k) for k in given if k not in lowered]
    if missing or unexpected:
        parts = ([f"missing {_names(missing)}"] if missing else []) + (
            [f"unexpected {_names(unexpected)}"] if unexpected else []
        )
        raise WeightUpdateError(f"the new weights do not fit the lowered model: {'; '.join(parts)}")
    state = {}
    for key, old in lowered.items():
        new = given[key]
        if not isinstance(new, torch.Tensor):
            raise WeightUpdateError(f"weight '{key}' is a {type(new).__name__}, not a tensor")
        if new.shape != old.shape or new.dtype != old.dtype:
            raise WeightUpdateError(
                f"weight '{key}' is {new.dtype} {tuple(new.shape)}; the model was lowered with "
                f"{old.dtype} {tuple(old.shape)} (a new shape or dtype needs lower_to_trt again)"
            )
        # Of the lowered tensor's kind: the captured program holds parameters as parameters.
        state[key] = (
            torch.nn.Parameter(new.detach(), requires_grad=False)
            if isinstance(old, torch.nn.Parameter)
            else new.detach()
        )
    return state


def assign(gm: torch.nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """Put `state`'s tensors in place of the attributes of the same dotted paths in `gm` (in a
    CapturedGraph.graph_module(), the get_attr targets are the state dict's keys). Replaced, not
    written into: those of a lowered module are the user's model's own tensors."""
    for key, tensor in state.items():
        owner_path, _, name = key.rpartition(".")
        owner = gm.get_submodule(owner_path)
        if isinstance(tensor, torch.nn.Parameter) or name in owner._parameters:
            owner.register_parameter(name, torch.nn.Parameter(tensor.detach(), requires_grad=False))
        elif name in owner._buffers:
            owner.register_buffer(name, tensor)
        else:
            setattr(owner, name, tensor)
