"""The tensors verification runs the model on: the example inputs where they are all tensors,
else the real samples the user gave as verify_inputs (never values made up from a TensorSpec: an
index or a mask made up is no test of a model)."""
from __future__ import annotations

from typing import Any, Sequence

import torch
import torch.utils._pytree as pytree

from trt_lower.capture.graph import check_inputs, leaf_name
from trt_lower.values.spec import TensorSpec

SKIPPED = ("verification skipped: some inputs are TensorSpecs and no verify_inputs were given "
           "(pass real sample tensors as verify_inputs= to check the engines against eager PyTorch)")


def _fits(spec: TensorSpec, tensor: torch.Tensor) -> bool:
    return tensor.dtype == spec.dtype and tensor.dim() == len(spec.min_shape) and all(
        lo <= d <= hi for d, lo, hi in zip(tensor.shape, spec.min_shape, spec.max_shape))


def samples(model: torch.nn.Module, inputs: Sequence[Any], kwargs: dict[str, Any] | None,
            specs: Sequence[TensorSpec], verify_inputs: Sequence[Any] | None) -> tuple[torch.Tensor, ...] | None:
    """The flattened tensors of `(inputs, kwargs)`, or of `(verify_inputs, kwargs)` when given
    (ValueError naming a leaf that is no tensor or outside its spec); None when some input is a
    TensorSpec and no samples were given."""
    given = inputs if verify_inputs is None else verify_inputs
    if verify_inputs is not None:
        check_inputs(model, verify_inputs, kwargs)
    leaves, _ = pytree.tree_flatten_with_path((tuple(given), kwargs or {}))
    if len(leaves) != len(specs):
        raise ValueError(f"verify_inputs has {len(leaves)} tensors with kwargs, the inputs {len(specs)}: "
                         "give one sample per input, in the same structure")
    for (path, leaf), spec in zip(leaves, specs):
        if isinstance(leaf, TensorSpec):
            if verify_inputs is None:
                return None
            raise ValueError(f"verify_{leaf_name(path)} must be a tensor (a real sample), got a TensorSpec")
        if verify_inputs is not None and not _fits(spec, leaf):
            raise ValueError(f"verify_{leaf_name(path)} is {tuple(leaf.shape)} "
                             f"{str(leaf.dtype).removeprefix('torch.')}, outside its input's {spec.describe()}")
    return tuple(leaf for _, leaf in leaves)
