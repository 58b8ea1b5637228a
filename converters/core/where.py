"""Where that also selects bools: ONNX Runtime has no bool Where kernel, so bools pass as int32."""

from __future__ import annotations

import torch

from converters.core.builder import GraphBuilder, Ref


def where(b: GraphBuilder, condition: Ref, x: Ref, y: Ref, dtype: torch.dtype) -> Ref:
    """Where(condition, x, y) with x and y already of `dtype`."""
    if dtype != torch.bool:
        return b.op("Where", condition, x, y, dtype=dtype)
    picked = b.op("Where", condition, b.cast(x, torch.int32), b.cast(y, torch.int32), dtype=torch.int32)
    return b.cast(picked, torch.bool)
