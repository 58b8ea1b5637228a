"""LoweredModule.update_weights: derive, build beside, swap in, check, and roll back on failure."""

from __future__ import annotations

import operator
from typing import Mapping

import torch

from trt_lower.api import Lowering
from trt_lower.refit.engines import check_refittable, new_modules
from trt_lower.refit.errors import WeightUpdateError
from trt_lower.refit.rederive import rederive
from trt_lower.refit.state import assign, keep, new_state
from trt_lower.refit.verify import eager_outputs, mismatches, module_tolerance
from trt_lower.stitch.lowered import LoweredModule


def update_weights(lowered: LoweredModule, source: torch.nn.Module | Mapping[str, torch.Tensor]) -> None:
    """See LoweredModule.update_weights."""
    lowering = lowered.lowering
    if not isinstance(lowering, Lowering):
        raise WeightUpdateError(
            "this module holds no model to derive new weights from (trt_lower.load made it): "
            "load its artifact with trt_lower.load(path, weights=...) instead"
        )
    backend = lowered.report.backend
    old_modules = {name: lowered.get_submodule(name) for name in lowered.segments}
    check_refittable(old_modules, backend)
    state = new_state(source, lowering.captured.program, lowering.captured.shards)
    # The model's own outputs, where it is one: it must compute what the lowered graph computes.
    own = eager_outputs(source, lowering.inputs, lowering.kwargs) if isinstance(source, torch.nn.Module) else None
    derived = rederive(lowered, lowering, state)
    modules = new_modules(old_modules, derived.segments, backend, lowering.settings, len(lowered.report.fallbacks))

    old_eager = {t: operator.attrgetter(t)(lowered) for t in derived.eager}
    swapped = False
    try:
        swapped = True  # from the first change on: a swap that fails halfway is undone too
        _swap(lowered, modules, derived.eager)
        actual = eager_outputs(lowered, lowering.inputs, lowering.kwargs)
        tol = module_tolerance(derived.segments.values(), lowering.settings.precision)
        failed = mismatches(derived.expected, actual, tol, derived.references)
        if own is not None:  # judged as an engine is: against the graph's eager run and float64
            failed += mismatches(derived.expected, own, tol, derived.references)
        if failed:
            worst = ", ".join(f"{c.name} error {c.error:.3g}" for c in failed[:4])
            raise WeightUpdateError(
                f"the module with the new weights does not match eager PyTorch on the example "
                f"inputs (verification's tolerance, {tol.describe()}): {worst}; kept the old weights"
            )
    except BaseException:
        if swapped:
            _swap(lowered, old_modules, old_eager)
        raise
    lowered.segments = derived.segments
    # The captured program holds the new weights from now on, not the old ones (whose model may be gone).
    keep(lowering.captured.program, state)


def _swap(lowered: LoweredModule, modules: Mapping[str, torch.nn.Module], eager: Mapping[str, torch.Tensor]) -> None:
    lowered.replace_engines(modules)
    assign(lowered, eager)
