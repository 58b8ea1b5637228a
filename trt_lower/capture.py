"""Model + example inputs -> an ATen FX GraphModule (weights as get_attr constants)."""
from __future__ import annotations

import inspect
import warnings
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


def _from_torchscript(model: torch.jit.ScriptModule, inputs: tuple[torch.Tensor, ...]) -> torch.export.ExportedProgram:
    from torch._export.converter import TS2EPConverter

    try:
        with warnings.catch_warnings():
            # The converter warns once per unused buffer (e.g. num_batches_tracked).
            warnings.simplefilter("ignore")
            converted = TS2EPConverter(model, inputs).convert()
        # The converter leaves dims symbolic (Dim.AUTO); re-export pins them to `inputs`.
        return torch.export.export(converted.module(), inputs, strict=False)
    except Exception as e:
        raise CaptureError(
            f"could not convert TorchScript module {model.original_name} to an ExportedProgram: "
            f"{type(e).__name__}: {e}. Pass the eager nn.Module instead if you have it."
        ) from e


def export(model: torch.nn.Module, inputs: Sequence[torch.Tensor]) -> torch.export.ExportedProgram:
    """The model as core ATen, fusable ops kept whole.

    nn.Modules and fx GraphModules go through torch.export (non-strict, eval mode);
    TorchScript modules through PyTorch's TorchScript-to-ExportedProgram converter.
    """
    was_training = model.training
    model.eval()
    try:
        if isinstance(model, torch.jit.ScriptModule):
            program = _from_torchscript(model, tuple(inputs))
        else:
            program = torch.export.export(model, tuple(inputs), strict=False)
        return program.run_decompositions(decomposition_table())
    except CaptureError:
        raise
    except Exception as e:
        raise CaptureError(
            f"torch.export could not capture {type(model).__name__}: {type(e).__name__}: {e}"
        ) from e
    finally:
        model.train(was_training)
