"""Capture of a tensor-parallel model: one made with torch.distributed.tensor.parallel's
`parallelize_module`, whose weights are DTensors and whose plans' hooks turn activations into
DTensors and back.

torch.export already desugars such a model into what one rank runs: its decompositions unwrap
each DTensor weight into the rank's local shard and spell each redistribution out as functional
collectives (`_c10d_functional.all_reduce`, `all_gather_into_tensor`, `reduce_scatter_tensor` and
their `wait_tensor`). What stops it is the plans' hooks: each makes a DTensor from a local tensor
inside forward, and export records that construction with the DTensor's spec (mesh, placements)
as an argument, which pytree must know as a constant; and DTensor shards an op only after it is
decomposed to the ops its sharding rules cover, so the fused ops a converter keeps whole elsewhere
(linear, attention) are decomposed for such a model.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Mapping

import torch
import torch.utils._pytree as pytree


def _dtensor_class() -> type | None:
    """DTensor, if torch.distributed.tensor is loaded (a model of it means it is), else None."""
    module = sys.modules.get("torch.distributed.tensor")
    return getattr(module, "DTensor", None)


def is_tensor_parallel(model: torch.nn.Module) -> bool:
    """Whether any parameter or buffer of `model` is a DTensor."""
    dtensor = _dtensor_class()
    return dtensor is not None and any(isinstance(t, dtensor) for t in (*model.parameters(), *model.buffers()))


def shard_layout(tensor: object) -> str | None:
    """How a DTensor is laid out across ranks (its placements and its mesh's shape), or None for
    any other value: what a new weight for the same engines must keep."""
    if _dtensor_class() is None:
        return None
    from torch.distributed.tensor import DTensor  # loaded already: imports nothing

    if not isinstance(tensor, DTensor):
        return None
    return f"sharded with placements {tuple(tensor.placements)} on a mesh of shape {tuple(tensor.device_mesh.shape)}"


def shard_layouts(model: torch.nn.Module) -> dict[str, str]:
    """Each DTensor of `model`'s state dict, by name -> its shard_layout: update_weights holds new
    weights to the plan the engines were lowered with. Empty, without a look at the state dict,
    for any other model."""
    if not is_tensor_parallel(model):
        return {}
    layouts = {name: shard_layout(t) for name, t in model.state_dict().items()}
    return {name: layout for name, layout in layouts.items() if layout is not None}


def layout_mismatch(given: Mapping[str, object], layouts: Mapping[str, str]) -> str | None:
    """What is wrong with the first value of `given` (name -> new weight) laid out otherwise than
    `layouts` (the lowered model's shard_layouts) says, a plain tensor for a DTensor included; None
    when each is laid out as lowered. The shard shapes alone cannot tell: a square weight split by
    rows has the shards' shapes of one split by columns."""
    for key, value in given.items():
        lowered, layout = layouts.get(key), shard_layout(value)
        if layout != lowered:
            return (
                f"weight '{key}' is {layout or 'not sharded'}; in the lowered model it is "
                f"{lowered or 'not sharded'} (another tensor-parallel plan needs lower_to_trt again)"
            )
    return None


def unwrapped(state: Mapping[str, object]) -> dict[str, object]:
    """`state` (name -> value) with each tensor subclass (a DTensor weight `owner.name`) replaced by
    its plain tensor parts, named as torch.export's parametrization names them in the lowered graph
    (`owner.parametrizations.name.original<i>`; a DTensor's one part is the rank's shard); every
    other value as it is."""
    from torch._functorch._aot_autograd.subclass_parametrization import UnwrapTensorSubclass
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    plain: dict[str, object] = {}
    for key, value in state.items():
        if not (isinstance(value, torch.Tensor) and is_traceable_wrapper_subclass(value)):
            plain[key] = value
            continue
        owner, _, name = key.rpartition(".")
        prefix = f"{owner}.parametrizations.{name}" if owner else f"parametrizations.{name}"
        parts = UnwrapTensorSubclass().right_inverse(value)  # the device mesh rides along, not a weight
        plain.update({f"{prefix}.original{i}": p for i, p in enumerate(parts) if isinstance(p, torch.Tensor)})
    return plain


def allow_dtensor_export(model: torch.nn.Module) -> None:
    """Lets torch.export trace `model`'s tensor-parallel hooks: the DTensor spec they pass becomes
    a pytree constant (as PyTorch intends to register it itself, pytorch/pytorch#175467). Once
    per process, and only for a tensor-parallel model."""
    if not is_tensor_parallel(model):
        return
    from torch.distributed.tensor._dtensor_spec import DTensorSpec

    if DTensorSpec not in pytree.SUPPORTED_NODES:
        pytree.register_constant(DTensorSpec)


def capture_table(model: torch.nn.Module, table: dict[Any, Callable[..., Any]]) -> dict[Any, Callable[..., Any]]:
    """The decompositions to capture `model` with: `table`, or core ATen's whole table for a
    tensor-parallel model (a kept CompositeImplicit op such as linear reaches DTensor whole, and
    DTensor refuses it with a bare AssertionError)."""
    return dict(torch.export.default_decompositions()) if is_tensor_parallel(model) else table


def tensor_parallel_hint(model: torch.nn.Module, error: Exception) -> str:
    """What to do when torch.export cannot trace a tensor-parallel layer, or ''. DTensor hashes
    its spec, shapes included, when an activation enters a sharded layer, and fails where a
    dynamic size sits in it in some forms: a generation step's last-position slice into a sharded
    LM head is one."""
    if not is_tensor_parallel(model) or "unhashable type: non-nested SymInt" not in str(error):
        return ""
    return (
        " (DTensor cannot take this dynamic-shape activation into a sharded layer under torch.export: "
        "keep that layer replicated, out of the parallelize_module plan; for lower_causal_lm, the LM head)"
    )
