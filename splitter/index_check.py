"""`check_indices`: the runtime check that an op's indices were in range.

ONNX Gather counts a negative index from the end, and TensorRT reads out of bounds (undefined
behaviour) for any index past the end, where eager PyTorch raises IndexError. Capture inserts,
before each op that reads at indices taken from data (trt_lower/capture/index_checks.py), the
test of those indices and a clamp of them (computed wherever the op runs, in an engine too), and
a call of `check_indices` on the test's result: it runs in eager PyTorch, reads the one bool and
raises IndexOutOfRangeError with the message capture wrote. On a GPU it reads nothing: the test
stays there as an asynchronous device assert, as eager PyTorch's own index checks are on a GPU.
The splitter counts neither the test's nodes (marked INDEX_TEST) nor the check as compute (for
coverage and min_block_size).
"""

from __future__ import annotations

import torch
import torch.fx

from converters.core.errors import TrtLowerError

# The node.meta key capture marks the nodes of an index test with.
INDEX_TEST = "trt_lower_index_test"


class IndexOutOfRangeError(TrtLowerError, IndexError, ValueError):
    """An op of a lowered model read at an index outside its input, where eager PyTorch raises
    IndexError; a ValueError too, as every bad input to a lowered model is."""


def check_indices(in_range: torch.Tensor, message: str) -> None:
    """Raise IndexOutOfRangeError(message) unless `in_range` (a 0-d bool tensor) is true. A plain
    function, not an operator: the graph calls it once per guarded op per call (~1 µs, where an
    OpOverload's dispatch into Python costs ~10).

    On a GPU, reading the bool would be a device-to-host copy and a wait for the engine on every
    call, and would keep the module out of CUDA graphs: there the test is a device-side assert
    instead (torch._assert_async), which a CUDA graph captures and which fails as eager PyTorch's
    own out-of-range index does on a GPU (`CUDA error: device-side assert triggered` at the next
    call that synchronizes; the message does not reach the host)."""
    if in_range.is_cuda:
        torch._assert_async(in_range, message)
    elif not bool(in_range):
        raise IndexOutOfRangeError(message)


def is_index_test(node: torch.fx.Node) -> bool:
    return bool(node.meta.get(INDEX_TEST))


# It returns nothing: without this, dead-code elimination would drop it.
torch.fx.node.has_side_effect(check_indices)
