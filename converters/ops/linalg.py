"""More products and distances: baddbmm, mv, dot, outer, einsum, cosine_similarity, cdist, pdist
(composites kept whole at capture because they have a converter). MatMul and Einsum are
float-only in TensorRT."""

from __future__ import annotations

import math
from typing import Optional, Sequence

import torch

from converters.core.builder import GraphBuilder, Ref, Value, onnx_type
from converters.core.common import all_of, float_inputs, normalize_dim
from converters.core.dims import dim_size_scalar, empty_input, input_val, is_static_dim, node_arg, same_static_shape
from converters.core.registry import converter
from converters.core.target import TrtTarget

aten = torch.ops.aten


@converter(aten.baddbmm.default, capability=float_inputs)
def baddbmm(b: GraphBuilder, x: Value, batch1: Value, batch2: Value, *, beta: float = 1, alpha: float = 1) -> Ref:
    """baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor

    beta = 0 ignores self (NaN/inf in it included), as torch does.
    """
    dtype = b.out.dtype
    product = b.op("MatMul", batch1, batch2)
    if alpha != 1:
        product = b.op("Mul", product, b.const(alpha, dtype))
    if beta == 0:
        return b.op("Identity", product, dtype=dtype)
    bias = x if beta == 1 else b.op("Mul", x, b.const(beta, dtype))
    return b.op("Add", product, bias, dtype=dtype)


@converter(aten.mv.default, capability=float_inputs)
def mv(b: GraphBuilder, x: Value, vec: Value) -> Ref:
    """mv(Tensor self, Tensor vec) -> Tensor"""
    return b.op("MatMul", x, vec, dtype=b.out.dtype)


@converter(aten.dot.default, capability=float_inputs)
def dot(b: GraphBuilder, x: Value, other: Value) -> Ref:
    """dot(Tensor self, Tensor tensor) -> Tensor"""
    return b.op("MatMul", x, other, dtype=b.out.dtype)


@converter(aten.outer.default)
def outer(b: GraphBuilder, x: Value, vec2: Value) -> Ref:
    """outer(Tensor self, Tensor vec2) -> Tensor  (a broadcast product: no MatMul, so any dtype)"""
    dtype = b.out.dtype
    column = b.op("Unsqueeze", b.cast(x, dtype), b.ints([1]))
    return b.op("Mul", column, b.cast(vec2, dtype), dtype=dtype)


def _einsum_equation(equation: str) -> str | None:
    """The equation as ONNX's Einsum spells it: no spaces, an explicit output, labels renamed to
    a-z in order of first use (torch also takes A-Z: maxvit writes "B G H I D, ..."); None where
    it holds more than 26 labels. Renamed after the output is made explicit, since torch's
    implicit output lists the labels used once in their own (ASCII) order."""
    equation = equation.replace(" ", "")
    if "..." in equation:
        return equation
    inputs, arrow, output = equation.partition("->")
    letters = inputs.replace(",", "")
    if not arrow:
        output = "".join(sorted(label for label in set(letters) if letters.count(label) == 1))
    labels = dict.fromkeys(letters + output)
    if len(labels) > 26:
        return None
    renamed = dict(zip(labels, "abcdefghijklmnopqrstuvwxyz"))
    return "".join(renamed.get(c, c) for c in f"{inputs}->{output}")


def _einsum_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    """TensorRT before 10.12: no ellipsis, no diagonal (a label repeated in one operand), no
    broadcasting between operands."""
    given = node_arg(node, 0, "equation")
    equation = _einsum_equation(given)
    if equation is None:
        return "einsum with more than 26 labels"
    if "..." in equation:
        return "einsum with an ellipsis"
    terms = equation.split("->")[0].split(",")
    vals = [t.meta["val"] for t in node_arg(node, 1, "tensors")]
    if any(not v.dtype.is_floating_point for v in vals):
        return "einsum of non-floating-point tensors (TensorRT's Einsum is float-only)"
    sizes: dict[str, object] = {}
    for term, val in zip(terms, vals):
        if len(set(term)) != len(term):
            return f"einsum diagonal (an operand repeats a label in {given!r})"
        for label, size in zip(term, val.shape):
            # A dynamic size by its symbolic expression: operands sharing a label share it.
            known = size.node.expr if isinstance(size, torch.SymInt) else size
            if sizes.setdefault(label, known) != known:
                return f"einsum broadcasts a label ({sizes[label]} vs {known}) in {given!r}"
    return None


@converter(aten.einsum.default, capability=_einsum_capability)
def einsum(b: GraphBuilder, equation: str, tensors: Sequence[Value], *, path: Sequence[int] | None = None) -> Ref:
    """einsum(str equation, Tensor[] tensors, *, int[]? path=None) -> Tensor"""
    dtype = b.out.dtype
    return b.op("Einsum", *[b.cast(t, dtype) for t in tensors], equation=_einsum_equation(equation), dtype=dtype)


def _vectors(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    if any(arg.meta["val"].dim() == 0 for arg in node.all_input_nodes):
        return "cosine similarity of 0-d tensors"
    return None


@converter(aten.cosine_similarity.default, capability=all_of(float_inputs, _vectors))
def cosine_similarity(b: GraphBuilder, x1: Value, x2: Value, dim: int = 1, eps: float = 1e-8) -> Ref:
    """cosine_similarity(Tensor x1, Tensor x2, int dim=1, float eps=1e-08) -> Tensor

    As torch computes it: both broadcast to a common shape, each divided by its norm clamped to
    eps, then the products summed.
    """
    dtype = b.out.dtype
    left: Ref = x1
    right: Ref = x2
    if x1.rank == 0 and x2.rank == 0:  # torch takes two 0-d tensors as 1-element vectors
        left, right = b.op("Unsqueeze", x1, b.ints([0])), b.op("Unsqueeze", x2, b.ints([0]))
    elif not same_static_shape(x1.shape, x2.shape):
        left, right = b.op("Expand", x1, b.op("Shape", x2)), b.op("Expand", x2, b.op("Shape", x1))
    axis = normalize_dim(dim, len(b.out.shape) + 1)
    floor = b.const(eps, dtype)

    def unit(x: Ref) -> Ref:
        return b.op("Div", x, b.op("Max", b.op("ReduceL2", x, axes=[axis], keepdims=1), floor))

    return b.op("ReduceSum", b.op("Mul", unit(left), unit(right)), b.ints([axis]), keepdims=0, dtype=dtype)


def _cdist_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    reason = float_inputs(node, trt_target) or empty_input(node, trt_target)
    if reason:
        return reason
    p = node_arg(node, 2, "p", 2.0)
    if p < 0:
        return f"cdist with p = {p}"
    return None


@converter(aten.cdist.default, aten._cdist_forward.default, capability=_cdist_capability)
def cdist(b: GraphBuilder, x1: Value, x2: Value, p: float = 2.0, compute_mode: int | None = None) -> Ref:
    """cdist(Tensor x1, Tensor x2, float p=2, int? compute_mode=None) -> Tensor;
    _cdist_forward(Tensor x1, Tensor x2, float p, int? compute_mode) -> Tensor

    The p-norm of every row difference, from (…, P, 1, M) - (…, 1, R, M): exact where torch's
    matrix-product shortcut for p = 2 is not, at the cost of a P×R×M intermediate.
    """
    diff = b.op("Sub", b.op("Unsqueeze", x1, b.ints([-2])), b.op("Unsqueeze", x2, b.ints([-3])))
    return _p_norm(b, diff, p, b.out.dtype)


def _p_norm(b: GraphBuilder, diff: Ref, p: float, dtype: torch.dtype) -> Ref:
    """The p-norm of `diff` over its last dim (p = 0 counts the non-zeros)."""
    if p == 2:
        return b.op("ReduceL2", diff, axes=[-1], keepdims=0, dtype=dtype)
    if p == 1:
        return b.op("ReduceL1", diff, axes=[-1], keepdims=0, dtype=dtype)
    magnitude = b.op("Abs", diff)
    if p == math.inf:
        return b.op("ReduceMax", magnitude, axes=[-1], keepdims=0, dtype=dtype)
    if p == 0:
        nonzero = b.cast(b.op("Not", b.op("Equal", diff, b.const(0, dtype))), dtype)
        return b.op("ReduceSum", nonzero, b.ints([-1]), keepdims=0, dtype=dtype)
    total = b.op("ReduceSum", b.op("Pow", magnitude, b.const(p, dtype)), b.ints([-1]), keepdims=0)
    return b.op("Pow", total, b.const(1 / p, dtype), dtype=dtype)


def _pdist_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    reason = float_inputs(node, trt_target)
    if reason:
        return reason
    rows = input_val(node, 0).shape[0]
    if isinstance(rows, int) and rows < 2:
        return f"pdist of {rows} row(s): no pairs (an empty result)"
    p = node_arg(node, 1, "p", 2.0)
    if p < 0:
        return f"pdist with p = {p}"
    return None


@converter(aten._pdist_forward.default, capability=_pdist_capability)
def pdist(b: GraphBuilder, x: Value, p: float = 2.0) -> Ref:
    """_pdist_forward(Tensor self, float p=2) -> Tensor

    The p-norm of the difference of rows i < j, in torch's (row-major upper-triangle) order:
    two gathers at the pair indices (constants, or computed where the rows vary), then the row
    norm cdist uses.
    """
    if is_static_dim(x.shape[0]):
        first, second = torch.triu_indices(x.shape[0], x.shape[0], offset=1)
        pair: tuple[Ref, Ref] = (b.initializer("pdist_rows_i", first), b.initializer("pdist_rows_j", second))
    else:
        pair = _pairs(b, dim_size_scalar(b, x, 0))
    rows_i = b.op("Gather", x, pair[0], axis=0)
    rows_j = b.op("Gather", x, pair[1], axis=0)
    return _p_norm(b, b.op("Sub", rows_i, rows_j), p, b.out.dtype)


def _pairs(b: GraphBuilder, n: Ref) -> tuple[Ref, Ref]:
    """The pairs i < j of n rows (a 0-d int64 known at run time), row-major: pair k's row i is
    the largest with start(i) = i (2n - i - 1) / 2 <= k, the root of a quadratic. Its float32
    square root can be one off (from ~2000 rows); one step each way makes it exact (checked
    against torch.triu_indices to 6000 rows, and sampled to 300000)."""
    i64 = torch.int64
    one, two = b.const(1, i64), b.const(2, i64)
    width = b.op("Sub", b.op("Mul", two, n), one)  # 2n - 1
    count = b.op("Div", b.op("Mul", n, b.op("Sub", n, one)), two)
    k = b.op("Range", b.const(0, i64), count, one)
    discriminant = b.op("Sub", b.op("Mul", width, width), b.op("Mul", b.const(8, i64), k))
    root = b.op("Sqrt", b.op("Cast", discriminant, to=onnx_type(torch.float32)))
    half = b.op("Div", b.op("Sub", b.op("Cast", width, to=onnx_type(torch.float32)), root), b.const(2.0, torch.float32))
    guess = b.op("Cast", b.op("Floor", half), to=onnx_type(i64))

    def start(i: Ref) -> Ref:
        return b.op("Div", b.op("Mul", i, b.op("Sub", width, i)), two)

    up = b.op("Add", guess, one)
    guess = b.op("Where", b.op("LessOrEqual", start(up), k), up, guess)
    row = b.op("Where", b.op("Greater", start(guess), k), b.op("Sub", guess, one), guess)
    column = b.op("Add", b.op("Add", b.op("Sub", k, start(row)), row), one)
    return row, column
