"""Grouped matrix products: each row of `input` times the weight of its group, the groups given
by cumulative offsets (`offs[g]` is where group g's rows end). transformers' mixture-of-experts
layers run their experts this way by default (`grouped_mm`): its CPU/compile fallback custom op,
or `aten._grouped_mm` on GPUs.

Each row's group is the number of offsets at or below its index. Two forms every target's parser
takes (Gather and MatMul; no Loop): with few groups, every group's product over all rows in one
MatMul, each row then picking its own group's result; with many, each row's group weight
gathered and one batched MatMul. On ONNX Runtime (bench/bench_grouped_mm.py) the first ran 1.4-3x
faster with 8 experts, the second 1.3x faster with 64 (top-8). Rows past the last offset belong
to no group: 0, as the fallback op leaves them (aten._grouped_mm leaves them uninitialized).
"""

from __future__ import annotations

from typing import Optional

import torch

from converters.core.builder import GraphBuilder, Ref, Value, onnx_type
from converters.core.dims import arg_val, dim_size, dim_size_scalar, input_val, node_arg, shape_of, static
from converters.core.registry import converter
from converters.core.target import TrtTarget

aten = torch.ops.aten


def gathered_rows(b: GraphBuilder, x: Value, weight: Value, group: Ref, rows: Ref) -> Ref:
    """Every group's product over all rows, (G, S, N) as one MatMul, each row then gathered from
    its own `group`'s."""
    products = b.op("Reshape", b.op("MatMul", x, weight), shape_of(b, [-1, dim_size(b, weight, 2)]))
    flat = b.op("Add", b.op("Mul", group, dim_size_scalar(b, x, 0)), rows)
    return b.op("Gather", products, flat, axis=0)


def gathered_weights(b: GraphBuilder, x: Value, weight: Value, group: Ref, rows: Ref) -> Ref:
    """Each row's `group` weight gathered, (S, K, N), and one batched MatMul of (S, 1, K) rows."""
    chosen = b.op("Gather", weight, group, axis=0)
    product = b.op("MatMul", b.op("Unsqueeze", x, b.ints([1])), chosen)
    return b.op("Squeeze", product, b.ints([1]))


# Up to this many groups the converters emit gathered_rows, above it gathered_weights (measured
# at 8 and 64 groups; the switch between is a guess).
ROWS_UP_TO_GROUPS = 16


def grouped(b: GraphBuilder, x: Value, weight: Value, offs: Value) -> Ref:
    """Rows of `x` (S, K) times their group's `weight` (G, K, N); 0 past offs[-1]."""
    dtype = b.out.dtype
    x, weight = b.cast(x, dtype), b.cast(weight, dtype)
    groups = static(weight.shape[0], "the number of groups")
    rows = b.op("Range", b.const(0, torch.int64), dim_size_scalar(b, x, 0), b.const(1, torch.int64))
    # A row's group: how many offsets are at or below its index (G for rows past the last).
    passed = b.op(
        "LessOrEqual", b.op("Unsqueeze", b.cast(offs, torch.int64), b.ints([0])), b.op("Unsqueeze", rows, b.ints([1]))
    )
    group = b.op("ReduceSum", b.op("Cast", passed, to=onnx_type(torch.int64)), b.ints([1]), keepdims=0)
    form = gathered_rows if groups <= ROWS_UP_TO_GROUPS else gathered_weights
    out = form(b, x, weight, b.op("Min", group, b.const(groups - 1, torch.int64)), rows)
    grouped_row = b.op("Unsqueeze", b.op("Less", group, b.const(groups, torch.int64)), b.ints([1]))
    return b.op("Where", grouped_row, out, b.const(0, dtype), dtype=dtype)


def _rows_by_groups(x: torch.Tensor, weight: torch.Tensor | None, offs: torch.Tensor | None) -> Optional[str]:
    if offs is None:
        return "grouped matmul without offsets (a batch of equal groups): no converter"
    if x.dim() != 2 or weight is None or weight.dim() != 3 or offs.dim() != 1:
        return (
            f"grouped matmul of a {x.dim()}-D input and a {None if weight is None else weight.dim()}-D weight: "
            f"only rows (2-D) times stacked group weights (3-D) have a converter"
        )
    if not isinstance(weight.shape[0], int):
        return "grouped matmul with a number of groups known only at run time: no converter"
    if not x.dtype.is_floating_point:
        return f"TensorRT multiplies floating-point matrices only, got {x.dtype}"
    return None


def _fallback_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    return _rows_by_groups(input_val(node, 0), arg_val(node, 1), arg_val(node, 2, "offs"))


@converter("transformers.grouped_mm_fallback.default", capability=_fallback_capability)
def grouped_mm_fallback(b: GraphBuilder, x: Value, weight: Value, offs: Value) -> Ref:
    """transformers::grouped_mm_fallback(Tensor input, Tensor weight, Tensor offs) -> Tensor"""
    return grouped(b, x, weight, offs)


def _grouped_mm_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    if node_arg(node, 3, "bias") is not None:  # torch's kernels refuse one too (2.14)
        return "_grouped_mm with a bias: no converter"
    out_dtype = node_arg(node, 4, "out_dtype")
    if out_dtype is not None and out_dtype != input_val(node, 0).dtype:
        return f"_grouped_mm with out_dtype {out_dtype} other than its input's: no converter"
    return _rows_by_groups(input_val(node, 0), arg_val(node, 1), arg_val(node, 2, "offs"))


@converter(aten._grouped_mm.default, capability=_grouped_mm_capability)
def grouped_mm(
    b: GraphBuilder,
    x: Value,
    weight: Value,
    offs: Value | None = None,
    bias: Value | None = None,
    out_dtype: torch.dtype | None = None,
) -> Ref:
    """_grouped_mm(Tensor self, Tensor mat2, Tensor? offs=None, Tensor? bias=None, ScalarType? out_dtype=None)
    -> Tensor"""
    assert offs is not None  # the capability check refuses a call without offsets
    return grouped(b, x, weight, offs)
