"""Model + example inputs -> an ATen FX GraphModule (weights as get_attr constants)."""
from __future__ import annotations

import inspect
from typing import Any, Sequence

import torch

from trt_lower.decompositions import decomposition_table


class CaptureError(RuntimeError):
    """torch.export could not capture the model."""


def check_inputs(model: torch.nn.Module, inputs: Any) -> tuple[torch.Tensor, ...]:
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not isinstance(inputs, (tuple, list)):
        raise ValueError(f"inputs must be a tuple or list of tensors, got {type(inputs).__name__}")
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"inputs[{i}] must be a torch.Tensor, got {type(x).__name__}")
    try:
        inspect.signature(model.forward).bind(*inputs)
    except TypeError as e:
        raise ValueError(
            f"inputs has {len(inputs)} tensor(s), which {type(model).__name__}.forward does not accept: {e}"
        ) from None
    except ValueError:  # builtin or C++ forward without a signature: let export decide
        pass
    return tuple(inputs)


def export(model: torch.nn.Module, inputs: Sequence[torch.Tensor]) -> torch.export.ExportedProgram:
    """torch.export (non-strict, eval mode) decomposed to core ATen, fusable ops kept whole."""
    was_training = model.training
    model.eval()
    try:
        program = torch.export.export(model, tuple(inputs), strict=False)
        return program.run_decompositions(decomposition_table())
    except Exception as e:
        raise CaptureError(
            f"torch.export could not capture {type(model).__name__}: {type(e).__name__}: {e}"
        ) from e
    finally:
        model.train(was_training)
