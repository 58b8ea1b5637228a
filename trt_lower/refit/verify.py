"""The check after every update: the updated module against eager PyTorch on the example inputs."""

from __future__ import annotations

from typing import Any, Callable, Iterable

import torch
import torch.fx._pytree as fx_pytree
import torch.utils._pytree as pytree

from trt_lower.values.segment import ConvertedSegment
from trt_lower.verify.float64 import graph_float64
from trt_lower.verify.stage import tolerance_of
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


# Precisions from the strictest tolerance to the widest.
_WIDENING = ("fp32", "fp16", "bf16")


def module_tolerance(segments: Iterable[ConvertedSegment], precision: str) -> Tolerance:
    """What verification accepts of the module's engines (each at its own tolerance: bf16 where its
    ONNX computes in bfloat16, int8 or FP8 steps where it has quantized layers), the widest of
    them: an updated module is held to it, no looser."""
    each = [tolerance_of(s, precision) for s in segments] or [Tolerance(precision, False)]
    return Tolerance(
        max((t.precision for t in each), key=_WIDENING.index), any(t.int8 for t in each), any(t.fp8 for t in each)
    )


def float64_outputs(gm: torch.fx.GraphModule, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The output leaves of `gm` (the captured graph, with the new weights) on the inputs, computed
    in float64 with their magnitudes (verify/float64.py)."""
    flat = fx_pytree.tree_flatten_spec((args, kwargs), gm.graph._codegen.pytree_info.in_spec)  # type: ignore[attr-defined]
    with torch.no_grad():
        return graph_float64(gm, flat)


def mismatches(expected: Any, actual: Any, tol: Tolerance, references: list[Any]) -> list[OutputCheck]:
    """The outputs of `actual` that verification's check fails against `expected` and the float64
    `references` of its leaves (structure differences included)."""
    want = pytree.tree_flatten_with_path(expected)[0]
    got = pytree.tree_leaves(actual)
    if len(want) != len(got):
        return [OutputCheck("the outputs' structure", float("inf"), False)]
    refs = references if len(references) == len(want) else [None] * len(want)
    checks = [
        check_output(f"output{pytree.keystr(path)}", e, a.to(e.device), tol, r)
        for (path, e), a, r in zip(want, got, refs)
        if isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor)
    ]
    return [c for c in checks if not c.passed]
