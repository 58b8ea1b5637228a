"""Views, layout changes, concatenation and casts.

Static target shapes come from the node's recorded output shape, so -1 and other inferred sizes
need no arithmetic. Dynamic ones are assembled at run time from the op's own size arguments,
whose unknown entries are 0-d int64 values (see symbolic.py).
"""

from __future__ import annotations

from typing import Sequence

import torch

from converters.core.builder import GraphBuilder, Ref, Value, is_static_shape
from converters.core.common import normalize_dim
from converters.core.dtypes import FP8
from converters.core.registry import converter
from converters.ops import fp8

aten = torch.ops.aten
prims = torch.ops.prims
_INT64_MAX = 2**63 - 1


@converter(aten.view.default, aten._unsafe_view.default)
def view(b: GraphBuilder, x: Value, size: Sequence[int | Value]) -> Ref:
    """view(Tensor(a) self, SymInt[] size) -> Tensor(a)"""
    if not is_static_shape(b.out.shape):
        return b.op("Reshape", x, b.shape_tensor(size), dtype=x.dtype)
    shape = list(b.out.shape)
    # Reshape reads a 0 as "copy the input's dim" unless allowzero: a 0 here is a real 0-size dim.
    return b.op("Reshape", x, b.ints(shape), allowzero=1 if 0 in shape else None, dtype=x.dtype)


@converter(aten.permute.default)
def permute(b: GraphBuilder, x: Value, dims: Sequence[int]) -> Ref:
    """permute(Tensor(a) self, int[] dims) -> Tensor(a)"""
    return b.op("Transpose", x, perm=[normalize_dim(d, x.rank) for d in dims], dtype=x.dtype)


@converter(aten.transpose.int)
def transpose(b: GraphBuilder, x: Value, dim0: int, dim1: int) -> Ref:
    """transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)"""
    perm = list(range(x.rank))
    i, j = normalize_dim(dim0, x.rank), normalize_dim(dim1, x.rank)
    perm[i], perm[j] = perm[j], perm[i]
    return b.op("Transpose", x, perm=perm, dtype=x.dtype)


@converter(aten.t.default)
def t(b: GraphBuilder, x: Value) -> Ref:
    """t(Tensor(a) self) -> Tensor(a)"""
    return b.op("Transpose", x, perm=list(reversed(range(x.rank))), dtype=x.dtype)


@converter(aten.expand.default)
def expand(b: GraphBuilder, x: Value, size: Sequence[int | Value], *, implicit: bool = False) -> Ref:
    """expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)"""
    if is_static_shape(b.out.shape):
        return b.op("Expand", x, b.ints(list(b.out.shape)), dtype=x.dtype)
    # Expand broadcasts, so torch's -1 ("keep this dim") is a 1 there.
    return b.op("Expand", x, b.shape_tensor([1 if s == -1 else s for s in size]), dtype=x.dtype)


@converter(aten.unsqueeze.default)
def unsqueeze(b: GraphBuilder, x: Value, dim: int) -> Ref:
    """unsqueeze(Tensor(a) self, int dim) -> Tensor(a)"""
    return b.op("Unsqueeze", x, b.ints([normalize_dim(dim, x.rank + 1)]), dtype=x.dtype)


def _is_one(d: object) -> bool:
    # A dynamic dim is never 1: export specializes sizes 0 and 1.
    return isinstance(d, int) and d == 1


@converter(aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims)
def squeeze(b: GraphBuilder, x: Value, dim: int | Sequence[int] | None = None) -> Ref:
    """squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)

    torch ignores listed dims whose size is not 1; ONNX would reject them, so they are dropped.
    """
    if x.rank == 0:  # torch accepts dim 0/-1 on a 0-d tensor, a no-op
        return b.op("Identity", x, dtype=x.dtype)
    dims = range(x.rank) if dim is None else [dim] if isinstance(dim, int) else dim
    axes = [d for d in (normalize_dim(d, x.rank) for d in dims) if _is_one(x.shape[d])]
    if not axes:
        return b.op("Identity", x, dtype=x.dtype)
    return b.op("Squeeze", x, b.ints(axes), dtype=x.dtype)


@converter(aten.slice.Tensor)
def slice_(
    b: GraphBuilder,
    x: Value,
    dim: int = 0,
    start: int | Value | None = None,
    end: int | Value | None = None,
    step: int = 1,
) -> Ref:
    """slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor(a)

    ONNX Slice wraps negative bounds and clamps out-of-range ones exactly as Python slicing does.
    """
    begin = b.shape_tensor([0 if start is None else start])
    stop = b.shape_tensor([_INT64_MAX if end is None else end])
    axis = normalize_dim(dim, x.rank)
    return b.op("Slice", x, begin, stop, b.ints([axis]), b.ints([step]), dtype=x.dtype)


@converter(aten.select.int)
def select(b: GraphBuilder, x: Value, dim: int, index: int) -> Ref:
    """select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)"""
    # Gather counts a negative index from the back, as select does.
    return b.op("Gather", x, b.const(index, torch.int64), axis=normalize_dim(dim, x.rank), dtype=x.dtype)


@converter(aten.cat.default)
def cat(b: GraphBuilder, tensors: Sequence[Value], dim: int = 0) -> Ref:
    """cat(Tensor[] tensors, int dim=0) -> Tensor"""
    dtype = b.out.dtype
    # torch skips legacy empty 1-D tensors beside higher-rank ones; ONNX would reject their rank.
    rank = len(b.out.shape)
    parts = [b.cast(t, dtype) for t in tensors if t.shape != (0,) or rank == 1]
    return b.op("Concat", *parts, axis=normalize_dim(dim, rank), dtype=dtype)


@converter(aten.clone.default, aten.alias.default, aten.detach.default)
def clone(b: GraphBuilder, x: Value, *, memory_format: torch.memory_format | None = None) -> Ref:
    """clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor"""
    return b.op("Identity", x, dtype=x.dtype)


@converter(aten._to_copy.default, capability=fp8.fp8_capability)
def to_copy(b: GraphBuilder, x: Value, **kwargs: object) -> Ref:
    """_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None, bool non_blocking=False, MemoryFormat? memory_format=None) -> Tensor"""
    if FP8 in (x.dtype, b.out.dtype):  # a quantize or dequantize to TensorRT
        return fp8.cast(b, x)
    return b.op("Identity", b.cast(x, b.out.dtype), dtype=b.out.dtype)


@converter(prims.convert_element_type.default)
def convert_element_type(b: GraphBuilder, x: Value, dtype: torch.dtype) -> Ref:
    """prims::convert_element_type(Tensor a, ScalarType dtype) -> Tensor"""
    return to_copy(b, x)


@converter(aten.split_with_sizes.default, aten.split.Tensor)
def split(b: GraphBuilder, x: Value, split_size: int | Sequence[int], dim: int = 0) -> tuple[Ref, ...]:
    """split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[];
    split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]"""
    dim = normalize_dim(dim, x.rank)
    sizes: list[int | Ref] = [t.shape[dim] for t in b.out]
    if not is_static_shape(sizes):
        if isinstance(split_size, int):  # equal pieces, the last one takes what is left
            rest = b.op(
                "Sub",
                b.op("Gather", b.op("Shape", x), b.const(dim, torch.int64), axis=0),
                b.const(split_size * (len(sizes) - 1), torch.int64),
            )
            sizes = [*[split_size] * (len(sizes) - 1), rest]
        else:
            sizes = list(split_size)
    return b.op_outputs("Split", x, b.shape_tensor(sizes), axis=dim, outputs=len(sizes), dtype=x.dtype)
