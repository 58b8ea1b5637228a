"""OutputAllocator: memory for engine outputs whose size TensorRT knows only while running."""

from __future__ import annotations

import math
from typing import Callable

import tensorrt as trt
import torch


class OutputAllocator(trt.IOutputAllocator):
    """Serves the outputs of one execution context whose shapes depend on the data (NonZero,
    boolean masks): TensorRT reports -1 for such a dim until the engine has run, so no buffer
    can be sized beforehand.

    During `execute_async_v3` TensorRT asks `reallocate_output(_async)` for the bytes it needs
    and tells `notify_shape` the real shape; both happen before `execute_async_v3` returns
    (TensorRT waits on the stream internally for the size it computed on the GPU: that wait is
    what a data-dependent output costs, and why such an enqueue cannot be recorded into a CUDA
    graph). The data itself is written on the stream, like any output. Each run gets fresh
    memory from `allocate` (torch's caching allocator on the engine's device, on the engine's
    stream): the tensors of an earlier call may still be in use.
    """

    def __init__(self, allocate: Callable[[int], torch.Tensor]) -> None:
        trt.IOutputAllocator.__init__(self)
        self._allocate = allocate
        self._buffers: dict[str, torch.Tensor] = {}
        self._shapes: dict[str, tuple[int, ...]] = {}

    def reallocate_output(self, tensor_name: str, memory: int, size: int, alignment: int) -> int:
        # Never a null pointer, which TensorRT takes as a failed allocation, for an empty output.
        buffer = self._buffers[tensor_name] = self._allocate(max(size, 1))
        return buffer.data_ptr()

    def reallocate_output_async(self, tensor_name: str, memory: int, size: int, alignment: int, stream: int) -> int:
        return self.reallocate_output(tensor_name, memory, size, alignment)

    def notify_shape(self, tensor_name: str, shape: trt.Dims) -> None:
        self._shapes[tensor_name] = tuple(int(shape[i]) for i in range(len(shape)))

    def take(self, name: str, dtype: torch.dtype) -> torch.Tensor:
        """The output `name` of the last run, as a tensor of its real shape."""
        if name not in self._shapes or name not in self._buffers:
            raise RuntimeError(f"TensorRT did not report the size of the data-dependent output '{name}'")
        shape, buffer = self._shapes.pop(name), self._buffers.pop(name)
        return buffer[: math.prod(shape) * dtype.itemsize].view(dtype).view(shape)
