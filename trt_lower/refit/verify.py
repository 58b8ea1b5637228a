"""The check after every update: the updated module against eager PyTorch on the example inputs."""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.utils._pytree as pytree

from trt_lower.report.report import LoweringReport
from trt_lower.verify.tolerance import OutputCheck, Tolerance, check_output


def eager_outputs(model: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """`model`'s outputs on the inputs, in eval mode (each module's own mode restored after)."""
    modes = {m: m.training for m in model.modules()} if isinstance(model, torch.nn.Module) else {}
    for m in modes:
        m.training = False
    try:
        with torch.no_grad():
            return model(*args, **kwargs)
    finally:
        for m, training in modes.items():
            m.training = training


def module_tolerance(report: LoweringReport) -> Tolerance:
    """What verification accepts of an engine, for the module's precision (with int8 or FP8 steps
    where an engine has quantized layers): an updated module is held to it, no looser."""
    return Tolerance(report.precision, any(e.int8_ops for e in report.engines), any(e.fp8_ops for e in report.engines))


def mismatches(expected: Any, actual: Any, tol: Tolerance) -> list[OutputCheck]:
    """The outputs of `actual` that verification's check fails against `expected` (structure
    differences included)."""
    want = pytree.tree_flatten_with_path(expected)[0]
    got = pytree.tree_leaves(actual)
    if len(want) != len(got):
        return [OutputCheck("the outputs' structure", float("inf"), False)]
    checks = [
        check_output(f"output{pytree.keystr(path)}", e, a.to(e.device), tol)
        for (path, e), a in zip(want, got)
        if isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor)
    ]
    return [c for c in checks if not c.passed]
