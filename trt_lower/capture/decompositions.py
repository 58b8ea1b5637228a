"""The decomposition table used at capture: core ATen, minus ops a converter maps whole.

Keeping an op whole lets its converter emit one fused ONNX op (TensorRT recognises those)
instead of a chain of primitives.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

import converters


@functools.cache
def decomposition_table() -> dict[Any, Callable[..., Any]]:
    """Built once; run_decompositions copies it."""
    table: dict[Any, Callable[..., Any]] = dict(torch.export.default_decompositions())
    for op in converters.supported_ops():
        table.pop(op, None)
    return table
