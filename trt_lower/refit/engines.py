"""Each engine's module with new weights, made beside the one in use: a new ONNX Runtime session,
or a TensorRT engine deserialized from the same plan and refitted (nothing rebuilt)."""

from __future__ import annotations

import torch

from trt_lower.engine.engines import build, engine_is_whole_call
from trt_lower.refit.errors import WeightUpdateError
from trt_lower.values.segment import ConvertedSegment
from trt_lower.values.settings import LoweringSettings


def check_refittable(modules: dict[str, torch.nn.Module], backend: str) -> None:
    """WeightUpdateError naming the first TensorRT engine built without refittable=True."""
    if backend != "tensorrt":
        return
    from trt_lower.engine.trt_refit import is_refittable

    for name, module in modules.items():
        if not is_refittable(module):
            raise WeightUpdateError(
                f"{name} is a TensorRT engine built without refittable=True: lower the model "
                "with lower_to_trt(..., refittable=True) to update its weights"
            )


def new_modules(
    old: dict[str, torch.nn.Module],
    segments: dict[str, ConvertedSegment],
    backend: str,
    settings: LoweringSettings,
    eager_ops: int,
) -> dict[str, torch.nn.Module]:
    """The engine module for each segment: the old ones stay untouched until swapped."""
    if backend == "onnxruntime":
        alone = engine_is_whole_call(len(segments), eager_ops)
        built = build(list(segments.values()), backend, settings, alone=alone)
        return {e.segment.name: e.module for e in built}
    from trt_lower.engine.trt_refit import RefitError, refitted

    try:
        return {name: refitted(old[name], segment) for name, segment in segments.items()}
    except RefitError as e:
        raise WeightUpdateError(str(e)) from e
