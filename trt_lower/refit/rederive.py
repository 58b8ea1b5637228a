"""Every engine's ONNX and every eager tensor of a lowered module, derived again from new weights
the way lowering derived them: the captured graph with the new tensors, split and converted again."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Mapping

import torch

from converters.core.interpreter import ConversionError
from trt_lower.api import Lowering
from trt_lower.refit.diff import difference
from trt_lower.refit.errors import WeightUpdateError
from trt_lower.refit.state import assign
from trt_lower.refit.verify import eager_outputs, float64_outputs
from trt_lower.stitch.lowered import LoweredModule
from trt_lower.values.segment import ConvertedSegment


@dataclass(frozen=True)
class Rederived:
    segments: dict[str, ConvertedSegment]  # by engine name, in the module's order
    eager: dict[str, torch.Tensor]  # the eager nodes' get_attr targets -> their new tensors
    # The lowered architecture's outputs on the example inputs with the new weights.
    expected: Any
    # The same computation in float64, by output leaf (verify/float64.py): what the check after
    # the update judges both against, as verification does.
    references: list[Any]


def rederive(
    lowered: LoweredModule, lowering: Lowering, state: Mapping[str, torch.Tensor], expected: Any = None
) -> Rederived:
    """The module's engines' segments and eager tensors with `state`'s weights (checked by
    state.new_state); `expected`: the eager outputs to check against, else those of the captured
    graph with the new weights. WeightUpdateError where the new weights would change a graph."""
    gm = lowering.captured.graph_module()
    assign(gm, state)
    if expected is None:
        expected = eager_outputs(gm, lowering.inputs, lowering.kwargs)
    checked = not (isinstance(expected, tuple) and len(expected) == 0)  # () asks for no check (names.py)
    references = float64_outputs(gm, lowering.inputs, lowering.kwargs) if checked else []
    parts = lowering.split(gm)
    old_eager = sorted(f.node for f in lowered.report.fallbacks)
    if list(parts.engines) != list(lowered.segments) or sorted(n.name for n in parts.fallbacks) != old_eager:
        raise WeightUpdateError(
            "with the new weights the graph splits into other engines "
            f"({', '.join(parts.engines)} instead of {', '.join(lowered.segments)})"
        )
    try:
        segments = {s.name: s for s in lowering.convert(parts)}
    except ConversionError as e:
        raise WeightUpdateError(f"converting with the new weights failed: {e}") from e
    for name, segment in segments.items():
        reason = difference(lowered.segments[name].onnx, segment.onnx)
        if reason is not None:
            raise WeightUpdateError(f"{name} cannot take the new weights: {reason}")
    eager = {}
    for node in lowered.graph.find_nodes(op="get_attr"):
        target = str(node.target)
        old = operator.attrgetter(target)(lowered)
        try:
            new = operator.attrgetter(target)(parts.gm)
        except AttributeError:
            raise WeightUpdateError(
                f"eager node '{node.name}' reads '{target}', which the new weights' graph does not have"
            ) from None
        if not isinstance(new, torch.Tensor) or new.shape != old.shape or new.dtype != old.dtype:
            raise WeightUpdateError(
                f"eager node '{node.name}' reads '{target}', which the new weights change in shape or dtype"
            )
        eager[target] = new.detach().to(old.device)
    return Rederived(segments, eager, expected, references)
