"""`trt_lower::check_indices`: the runtime check that a gather's indices were in range.

ONNX Gather counts a negative index from the end, and TensorRT reads out of bounds (undefined
behaviour) for any index past the end, where eager PyTorch raises IndexError. Capture inserts,
before each op that reads at indices taken from data (trt_lower/capture/index_checks.py), the
test of those indices and a clamp of them (computed wherever the op runs, in an engine too), and
this op on the test's result: it runs in eager PyTorch, reads the one bool and raises
IndexOutOfRangeError with the message capture wrote. The splitter counts it as a check, not as
compute (support.is_check).
"""
from __future__ import annotations

import torch
import torch.fx

_LIBRARY = torch.library.Library("trt_lower", "DEF")
_LIBRARY.define("check_indices(Tensor in_range, str message) -> ()")


class IndexOutOfRangeError(IndexError, ValueError):
    """An op of a lowered model read at an index outside its input, where eager PyTorch raises
    IndexError; a ValueError too, as every bad input to a lowered model is."""


def _check(in_range: torch.Tensor, message: str) -> None:
    if not bool(in_range):
        raise IndexOutOfRangeError(message)


def _meta(in_range: torch.Tensor, message: str) -> None:
    """Tracing with fake tensors reads no data."""


_LIBRARY.impl("check_indices", _check, "CompositeExplicitAutograd")
_LIBRARY.impl("check_indices", _meta, "Meta")
CHECK_INDICES = torch.ops.trt_lower.check_indices.default
# It returns nothing: without this, dead-code elimination would drop it.
torch.fx.node.has_side_effect(CHECK_INDICES)
