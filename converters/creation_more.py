"""More creation ops: new_* (shaped by an argument list), fill, linspace/eye, one_hot, copy and
type_as.

A filled tensor is an Expand of a scalar over its shape: no initializer as large as the tensor.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from converters._dims import node_arg
from converters.builder import GraphBuilder, Value
from converters.registry import converter

aten = torch.ops.aten


def _constant_size(node: torch.fx.Node) -> Optional[str]:
    size = node_arg(node, 1, "size")
    if not all(isinstance(d, int) for d in size):  # type: ignore[union-attr]
        return "size depends on a dynamic dimension"
    return None


def _filled(b: GraphBuilder, size: Sequence[int], fill: Any) -> Value:
    dtype = b.out.dtype
    return b.op("Expand", b.const(fill, dtype), b.ints(list(size)), dtype=dtype)


@converter(aten.new_zeros.default, capability=_constant_size)
def new_zeros(b: GraphBuilder, x: Value, size: Sequence[int], **kwargs: Any) -> Value:
    """new_zeros(Tensor self, SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None,
    Device? device=None, bool? pin_memory=None) -> Tensor"""
    return _filled(b, size, 0)


@converter(aten.new_ones.default, capability=_constant_size)
def new_ones(b: GraphBuilder, x: Value, size: Sequence[int], **kwargs: Any) -> Value:
    """new_ones(Tensor self, SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _filled(b, size, 1)


@converter(aten.new_full.default, capability=_constant_size)
def new_full(b: GraphBuilder, x: Value, size: Sequence[int], fill_value: Any, **kwargs: Any) -> Value:
    """new_full(Tensor self, SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, ...) -> Tensor"""
    return _filled(b, size, fill_value)


@converter(aten.new_empty.default, capability=_constant_size)
def new_empty(b: GraphBuilder, x: Value, size: Sequence[int], **kwargs: Any) -> Value:
    """new_empty(Tensor self, SymInt[] size, *, ScalarType? dtype=None, ...) -> Tensor  (zeros: contents are unspecified)"""
    return _filled(b, size, 0)


def _constant_first_size(node: torch.fx.Node) -> Optional[str]:
    if not all(isinstance(d, int) for d in node.args[0]):  # type: ignore[union-attr]
        return "size depends on a dynamic dimension"
    return None


@converter(aten.empty_strided.default, capability=_constant_first_size)
def empty_strided(b: GraphBuilder, size: Sequence[int], stride: Sequence[int], **kwargs: Any) -> Value:
    """empty_strided(SymInt[] size, SymInt[] stride, *, ScalarType? dtype=None, ...) -> Tensor

    Zeros; strides are a memory layout, meaningless for an engine's dense outputs.
    """
    return _filled(b, size, 0)


@converter(aten.fill.Scalar)
def fill(b: GraphBuilder, x: Value, value: Any) -> Value:
    """fill.Scalar(Tensor self, Scalar value) -> Tensor"""
    return b.op("Expand", b.const(value, x.dtype), b.op("Shape", x), dtype=x.dtype)  # type: ignore[arg-type]


@converter(aten.fill.Tensor)
def fill_tensor(b: GraphBuilder, x: Value, value: Value) -> Value:
    """fill.Tensor(Tensor self, Tensor value) -> Tensor  (value is 0-d)"""
    return b.op("Expand", b.cast(value, x.dtype), b.op("Shape", x), dtype=x.dtype)  # type: ignore[arg-type]


def _python_args(node: torch.fx.Node) -> Optional[str]:
    if node.all_input_nodes:
        return f"{node.target} with a tensor or dynamic argument"
    return None


@converter(aten.linspace.default, aten.eye.default, aten.eye.m, capability=_python_args)
def constant_grid(b: GraphBuilder, *args: Any, **kwargs: Any) -> Value:
    """linspace(Scalar start, Scalar end, int steps, *, ScalarType? dtype=None, ...) -> Tensor;
    eye(SymInt n, *, ...) -> Tensor; eye.m(SymInt n, SymInt m, *, ...) -> Tensor

    All arguments are Python values: the converter runs the op and stores the result.
    """
    assert b.node is not None
    value = b.node.target(*args, **{**kwargs, "device": "cpu"})  # type: ignore[operator]
    return b.const(value.numpy(), value.dtype)


def _known_classes(node: torch.fx.Node) -> Optional[str]:
    if node_arg(node, 1, "num_classes", -1) == -1:
        return "one_hot without num_classes (the width would depend on the data)"
    return None


@converter(aten.one_hot.default, capability=_known_classes)
def one_hot(b: GraphBuilder, x: Value, num_classes: int = -1) -> Value:
    """one_hot(Tensor self, int num_classes=-1) -> Tensor"""
    values = b.const([0, 1], torch.int64)
    return b.op("OneHot", x, b.ints([num_classes]), values, axis=-1, dtype=torch.int64)


@converter(aten.copy.default)
def copy(b: GraphBuilder, x: Value, src: Value, non_blocking: bool = False) -> Value:
    """copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor  (src broadcast to self, in self's dtype)"""
    return b.op("Expand", b.cast(src, x.dtype), b.op("Shape", x), dtype=x.dtype)  # type: ignore[arg-type]


@converter(aten.type_as.default)
def type_as(b: GraphBuilder, x: Value, other: Value) -> Value:
    """type_as(Tensor self, Tensor other) -> Tensor"""
    return b.op("Identity", b.cast(x, other.dtype), dtype=other.dtype)  # type: ignore[arg-type]
