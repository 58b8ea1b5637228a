"""The new tensors update_weights takes, checked against those the module was lowered with."""

from __future__ import annotations

from typing import Mapping

import torch
from torch.export.graph_signature import InputKind

from trt_lower.refit.errors import WeightUpdateError
from trt_lower.refit.shards import local_shards

# How many offending names an error lists before "and N more".
_LISTED = 8


def _names(names: list[str]) -> str:
    shown = ", ".join(f"'{n}'" for n in names[:_LISTED])
    return shown + (f" and {len(names) - _LISTED} more" if len(names) > _LISTED else "")


def frozen(program: torch.export.ExportedProgram) -> dict[str, torch.Tensor]:
    """Every tensor the captured program froze, by the name the model gives it: its state dict
    (parameters, persistent buffers) and its constants (non-persistent buffers such as a rotary
    `inv_freq`, tensor attributes, literals the forward made)."""
    return {**program.state_dict, **program.constants}


def _taken(program: torch.export.ExportedProgram, source: torch.nn.Module | Mapping[str, object]) -> dict[str, object]:
    """The tensors `source` gives by name. A model gives its state dict and every constant it holds
    (non-persistent buffers, tensor attributes); a buffer it lacks is refused by name. A state dict
    gives what it has: like torch's load_state_dict, a non-persistent buffer it leaves out keeps its
    value."""
    if isinstance(source, Mapping):
        return dict(source)
    given: dict[str, object] = dict(source.state_dict())
    buffers = {s.target for s in program.graph_signature.input_specs if s.kind == InputKind.BUFFER}
    for target in program.constants:
        owner_path, _, name = target.rpartition(".")
        try:
            given[target] = getattr(source.get_submodule(owner_path), name)
        except AttributeError:
            if target in buffers:
                raise WeightUpdateError(
                    f"buffer '{target}' the model was lowered with is not in the new model: it cannot be derived again"
                ) from None
            # Else a tensor the forward made (torch.tensor([...])): code, the same for any weights.
    return given


def new_state(
    source: torch.nn.Module | Mapping[str, torch.Tensor],
    program: torch.export.ExportedProgram,
    shards: Mapping[str, str],
) -> dict[str, torch.Tensor]:
    """The new value of every tensor in `frozen(program)` that `source` gives (all of the state
    dict's, those constants it has; of a tensor-parallel model, each DTensor's shard, laid out as
    `shards` says: refit/shards.py), detached, after checking `source` gives every state dict key
    and no key `program` lacks, each a tensor of the same shape and dtype; WeightUpdateError
    naming each offending key otherwise."""
    if not isinstance(source, (torch.nn.Module, Mapping)):
        raise WeightUpdateError(f"update_weights takes a model or a state dict, got {type(source).__name__}")
    given = local_shards(_taken(program, source), shards)
    lowered = frozen(program)
    missing = [k for k in program.state_dict if k not in given]
    unexpected = [str(k) for k in given if k not in lowered]
    if missing or unexpected:
        parts = ([f"missing {_names(missing)}"] if missing else []) + (
            [f"unexpected {_names(unexpected)}"] if unexpected else []
        )
        raise WeightUpdateError(f"the new weights do not fit the lowered model: {'; '.join(parts)}")
    state = {}
    for key, new in given.items():
        old = lowered[key]
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


def keep(program: torch.export.ExportedProgram, state: Mapping[str, torch.Tensor]) -> None:
    """`state` (new_state's) becomes the program's: the next update is checked against it."""
    for key, tensor in state.items():
        (program.state_dict if key in program.state_dict else program.constants)[key] = tensor


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
