"""The check after every update: the updated module against eager PyTorch on the example inputs."""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.utils._pytree as pytree

from trt_lower.debug.compare import OutputError, compare


def tolerance(precision: str) -> tuple[float, float]:
    """(rtol, atol) an updated module must meet against eager, for its precision. The one place
    that says it: build-time verification's own rules replace it where they exist."""
    return (1e-2, 1e-2) if precision == "fp16" else (1e-3, 1e-3)


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


def mismatches(expected: Any, actual: Any, precision: str) -> list[OutputError]:
    """The outputs of `actual` out of tolerance against `expected` (structure differences included)."""
    rtol, atol = tolerance(precision)
    want = pytree.tree_flatten_with_path(expected)[0]
    got = pytree.tree_leaves(actual)
    if len(want) != len(got):
        return [OutputError("", float("inf"), float("inf"), False)]
    errors = [
        compare(pytree.keystr(path), e, a.to(e.device), rtol, atol)
        for (path, e), a in zip(want, got)
        if isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor)
    ]
    return [e for e in errors if not e.passed]
