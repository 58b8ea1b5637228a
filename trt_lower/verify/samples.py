"""The tensors verification runs the model on: the example inputs where they are all tensors,
else the real samples the user gave as verify_inputs (never values made up from a TensorSpec: an
index or a mask made up is no test of a model)."""

from __future__ import annotations

from typing import Any, Sequence

import torch
import torch.utils._pytree as pytree

from trt_lower.capture.aten_graph import check_inputs, leaf_name
from trt_lower.values.spec import TensorSpec

SKIPPED = (
    "verification skipped: some inputs are TensorSpecs and no verify_inputs were given "
    "(pass real sample tensors as verify_inputs= to check the engines against eager PyTorch)"
)
MUTATES = (
    "verification skipped: the model updates its inputs or buffers in place, which an eager run "
    "for reference would do to yours"
)


def _mutates(program: torch.export.ExportedProgram) -> bool:
    """Whether the captured program writes into its inputs or buffers."""
    signature = program.graph_signature
    return bool(signature.buffers_to_mutate or signature.user_inputs_to_mutate)


def reference_inputs(
    model: torch.nn.Module,
    inputs: Sequence[Any],
    kwargs: dict[str, Any] | None,
    specs: Sequence[TensorSpec],
    verify_inputs: Sequence[Any] | None,
    program: torch.export.ExportedProgram,
    verify_kwargs: dict[str, Any] | None = None,
) -> tuple[tuple[torch.Tensor, ...] | None, str | None]:
    """The flattened tensors to verify with (`samples`), or None and the report note saying why
    verification is skipped."""
    found = samples(model, inputs, kwargs, specs, verify_inputs, verify_kwargs)
    if found is None:
        return None, SKIPPED
    return (None, MUTATES) if _mutates(program) else (found, None)


def _fits(spec: TensorSpec, tensor: torch.Tensor) -> bool:
    return (
        tensor.dtype == spec.dtype
        and tensor.dim() == len(spec.min_shape)
        and all(lo <= d <= hi for d, lo, hi in zip(tensor.shape, spec.min_shape, spec.max_shape))
    )


def samples(
    model: torch.nn.Module,
    inputs: Sequence[Any],
    kwargs: dict[str, Any] | None,
    specs: Sequence[TensorSpec],
    verify_inputs: Sequence[Any] | None,
    verify_kwargs: dict[str, Any] | None = None,
) -> tuple[torch.Tensor, ...] | None:
    """The flattened tensors of `(inputs, kwargs)`, each replaced by its samples where given
    (`verify_inputs`, `verify_kwargs`; ValueError naming a leaf that is no tensor or outside its
    spec); None when some input is a TensorSpec and no samples were given."""
    sampled = verify_inputs is not None or verify_kwargs is not None
    given = inputs if verify_inputs is None else verify_inputs
    given_kwargs = kwargs if verify_kwargs is None else verify_kwargs
    if sampled:
        check_inputs(model, given, given_kwargs)
    leaves, _ = pytree.tree_flatten_with_path((tuple(given), given_kwargs or {}))
    if len(leaves) != len(specs):
        raise ValueError(
            f"verify_inputs and verify_kwargs have {len(leaves)} tensors, the inputs and kwargs {len(specs)}: "
            "give one sample per input, in the same structure"
        )
    for (path, leaf), spec in zip(leaves, specs):
        if isinstance(leaf, TensorSpec):
            if not sampled:
                return None
            raise ValueError(f"verify_{leaf_name(path)} must be a tensor (a real sample), got a TensorSpec")
        if sampled and not _fits(spec, leaf):
            raise ValueError(
                f"verify_{leaf_name(path)} is {tuple(leaf.shape)} "
                f"{str(leaf.dtype).removeprefix('torch.')}, outside its input's {spec.describe()}"
            )
    return tuple(leaf for _, leaf in leaves)
