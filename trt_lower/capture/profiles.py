"""Several optimization profiles per engine: lower_to_trt's `profiles` checked against its inputs."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch
import torch.utils._pytree as pytree

from trt_lower.capture.aten_graph import example_call, leaf_name
from trt_lower.values.call import model_call
from trt_lower.values.spec import TensorSpec


def _entry_call(where: str, entry: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """A profile as `(args, kwargs)`: an `inputs`-shaped entry, or a dict with "inputs" and/or
    "kwargs" (the part it leaves out is the lowering's own)."""
    if not isinstance(entry, Mapping):
        return model_call(entry, name=where)[0], kwargs
    unknown = sorted(map(str, set(entry) - {"inputs", "kwargs"}))
    if unknown:
        raise ValueError(f"{where} takes the keys 'inputs' and 'kwargs', got {unknown}")
    own_args = model_call(entry["inputs"], name=f"{where}['inputs']")[0] if "inputs" in entry else args
    own_kwargs = model_call((), entry.get("kwargs", kwargs), kwargs_name=f"{where}['kwargs']")[1]
    return own_args, own_kwargs


def _checked(where: str, spec: TensorSpec, leaf: Any) -> TensorSpec:
    """`leaf` (a TensorSpec, or a tensor: its shape alone) as a spec inside `spec`'s range: same
    rank, dtype and static sizes; ValueError naming the leaf otherwise."""
    if isinstance(leaf, torch.Tensor):
        leaf = TensorSpec.of(leaf)
    if not isinstance(leaf, TensorSpec):
        raise ValueError(f"{where} must be a trt_lower.TensorSpec or a tensor, got {type(leaf).__name__}")
    if leaf.dtype != spec.dtype or len(leaf.min_shape) != len(spec.min_shape):
        raise ValueError(
            f"{where} is {leaf.describe()}, the input is {spec.describe()}: a profile keeps rank and dtype"
        )
    for i, (lo, hi, low, high) in enumerate(zip(leaf.min_shape, leaf.max_shape, spec.min_shape, spec.max_shape)):
        if not low <= lo <= hi <= high:
            raise ValueError(
                f"{where} dim {i}: {lo}..{hi} is outside the input's range {low}..{high} (a profile is a part of "
                "the range `inputs` declares, which the model is traced over)"
            )
    return leaf


def profile_specs(
    profiles: Sequence[Any] | None, args: tuple[Any, ...], kwargs: dict[str, Any], specs: Sequence[TensorSpec]
) -> tuple[tuple[TensorSpec, ...], ...]:
    """Each profile's specs, one per leaf of `(args, kwargs)` as check_inputs orders them (which
    registered the pytree types); () for no profiles. ValueError naming the profile and leaf."""
    if profiles is None:
        return ()
    if not isinstance(profiles, (list, tuple)) or not profiles:
        raise ValueError(f"profiles must be a non-empty list of profiles or None, got {profiles!r}")
    tree = pytree.tree_structure((args, kwargs))
    checked = []
    for k, entry in enumerate(profiles):
        where = f"profiles[{k}]"
        leaves, own = pytree.tree_flatten_with_path(_entry_call(where, entry, args, kwargs))
        if own != tree:
            raise ValueError(f"{where} must have the structure of inputs and kwargs ({len(specs)} leaves)")
        checked.append(tuple(_checked(f"{where} {leaf_name(p)}", s, x) for s, (p, x) in zip(specs, leaves)))
    _check_opt(args, kwargs, specs, checked)
    return tuple(checked)


def _holds(spec: TensorSpec, shape: tuple[int, ...]) -> bool:
    return all(lo <= d <= hi for lo, d, hi in zip(spec.min_shape, shape, spec.max_shape))


def _check_opt(
    args: tuple[Any, ...], kwargs: dict[str, Any], specs: Sequence[TensorSpec], profiles: Sequence[Sequence[TensorSpec]]
) -> None:
    """The opt shapes `inputs` declares lie in one profile: what runs the model at them (Triton's
    export probes it there) would be refused otherwise."""
    if any(all(_holds(p, s.opt_shape) for p, s in zip(profile, specs)) for profile in profiles):
        return
    paths = [path for path, _ in pytree.tree_flatten_with_path((args, kwargs))[0]]
    opt = ", ".join(f"{leaf_name(path)} {s.opt_shape}" for path, s in zip(paths, specs) if s.dynamic_dims)
    raise ValueError(f"the opt shapes of inputs and kwargs ({opt}) lie in no profile: give them an opt inside one")


def checked_call(
    specs: Sequence[TensorSpec],
    inputs: Sequence[Any],
    kwargs: dict[str, Any],
    traced: tuple[tuple[Any, ...], dict[str, Any]],
    profiles: Sequence[Sequence[TensorSpec]],
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The example call update_weights checks the lowered module on: the `traced` one, but with
    profiles one at the opt shapes (a profile holds them: _check_opt), since the traced sizes
    (never 0 or 1, for torch.export) may lie between profiles, where the module refuses a call."""
    if not profiles:
        return traced
    return example_call([TensorSpec(s.opt_shape, s.opt_shape, s.opt_shape, s.dtype) for s in specs], inputs, kwargs)
