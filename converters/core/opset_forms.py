"""ONNX forms that changed after opset 17, written for the opset a graph is emitted at.

Converters write every node in its opset-17 form; GraphBuilder passes each one through
`rewrite` so a graph for a higher opset (TrtTarget.opset) gets the same computation in that
opset's form. Only changes that break an opset-17 node are here: additions (new attributes,
new types) need nothing.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, TypeVar

R = TypeVar("R")

# Opset 18 moved `axes` from an attribute to an input on these (ReduceSum did so at 13).
_AXES_INPUT_18 = frozenset(
    {
        "ReduceL1",
        "ReduceL2",
        "ReduceLogSum",
        "ReduceLogSumExp",
        "ReduceMax",
        "ReduceMean",
        "ReduceMin",
        "ReduceProd",
        "ReduceSumSquare",
    }
)
# Opset 20 renamed GridSample's modes (and let it take N-D input).
_GRID_SAMPLE_MODES_20 = {"bilinear": "linear", "bicubic": "cubic"}


def rewrite(
    op_type: str, inputs: list[R | None], attrs: dict[str, Any], opset: int, ints: Callable[[Sequence[int]], R]
) -> tuple[list[R | None], dict[str, Any]]:
    """`op_type`'s inputs and attributes at `opset`, from its opset-17 form; `ints` makes an int64
    initializer (TensorRT wants axes operands as initializers)."""
    if opset >= 18 and op_type in _AXES_INPUT_18 and attrs.get("axes") is not None:
        attrs = dict(attrs)
        axes = attrs.pop("axes")
        return [inputs[0] if inputs else None, ints(list(axes))], attrs
    if opset >= 20 and op_type == "GridSample":
        mode = attrs.get("mode", "bilinear")
        return inputs, {**attrs, "mode": _GRID_SAMPLE_MODES_20.get(mode, mode)}
    return inputs, attrs
