"""Reductions: sum/mean/prod, max/min (with indices) and any/all, var/std, log-sum-exp, cumsum,
vector norms, nan-sum.

In opset 17 ReduceSum takes its axes as an input (an initializer, as TensorRT wants) while
ReduceMean/Max/Min/Prod/L1/L2 take them as an attribute.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import torch

from converters.core.builder import GraphBuilder, Ref, ShapeDim, Value, onnx_type
from converters.core.common import all_of, float_inputs, nan_propagated, normalize_dim
from converters.core.dims import input_val, int_bound, is_static_dim, never_empty, node_arg, static_numel
from converters.core.registry import converter
from converters.core.target import TrtTarget
from converters.passes.trt_support import SEVERAL_CUMSUMS

aten = torch.ops.aten
prims = torch.ops.prims
Dims = int | Sequence[int] | None


def _axes(x: Value, dim: Dims) -> list[int]:
    if dim is None or (not isinstance(dim, int) and len(dim) == 0):
        return list(range(x.rank))
    dims = [dim] if isinstance(dim, int) else dim
    return sorted(normalize_dim(d, x.rank) for d in dims)


def _reduce(b: GraphBuilder, op_type: str, x: Value, axes: list[int], keepdim: bool) -> Ref:
    """`op_type` over `axes`, in x's dtype."""
    if x.rank == 0:  # torch reduces a 0-d tensor over dim 0/-1 to itself
        return b.op("Identity", x, dtype=x.dtype, shape=())
    if op_type == "ReduceSum":
        return b.op(op_type, x, b.ints(axes), keepdims=int(keepdim), dtype=x.dtype)
    if op_type == "ReduceMean" and not all(never_empty(x.shape[a]) for a in axes):
        # torch's mean of no elements is NaN (0 / 0), ONNX Runtime's ReduceMean gives 0: where a
        # reduced dim is or may be 0, the sum over the count.
        total = b.op("ReduceSum", x, b.ints(axes), keepdims=int(keepdim))
        return b.op("Div", total, _divisor(b, x, axes, 0), dtype=x.dtype)
    if op_type == "ReduceMean" and keepdim and _over_static_spatial_dims(x, axes):
        # adaptive_avg_pool to size 1 after decomposition; the exporter's GlobalAveragePool, which
        # ONNX Runtime's NCHWc layout pass keeps in the convolutions' blocked layout (a ReduceMean
        # costs a reorder each side).
        return b.op("GlobalAveragePool", x, dtype=x.dtype)
    out = b.op(op_type, x, axes=axes, keepdims=int(keepdim), dtype=x.dtype)
    if op_type in ("ReduceMax", "ReduceMin") and x.dtype is not None and x.dtype.is_floating_point:
        out = nan_propagated(b, x, out, axes, keepdim)
    return out


def _over_static_spatial_dims(x: Value, axes: list[int]) -> bool:
    """Whether `axes` are all the dims after (N, C) of a float tensor, each of a known nonzero size."""
    return (
        x.rank >= 3
        and axes == list(range(2, x.rank))
        and x.dtype in (torch.float16, torch.float32, torch.float64)
        and all(is_static_dim(x.shape[a]) and x.shape[a] > 0 for a in axes)
    )


def _reduce_dims(b: GraphBuilder, op_type: str, x: Value, dim: Dims, keepdim: bool, compute_dtype: torch.dtype) -> Ref:
    """`op_type` over `dim` (every dim for None or []) taken in `compute_dtype`; the result in
    the node's dtype."""
    x = b.cast(x, compute_dtype)
    return b.cast(_reduce(b, op_type, x, _axes(x, dim), keepdim), b.out.dtype)


def _ordered(x: Value) -> torch.dtype:
    """The dtype to take a max/min in: opset 17 ReduceMax/Min have no bool, so bools go via int32."""
    return torch.int32 if x.dtype == torch.bool else x.dtype


# -- sum, mean, prod -------------------------------------------------------------------------
@converter(aten.sum.dim_IntList, aten.sum.default)
def sum_(
    b: GraphBuilder, x: Value, dim: Dims = None, keepdim: bool = False, *, dtype: torch.dtype | None = None
) -> Ref:
    """sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor;
    sum(Tensor self, *, ScalarType? dtype=None) -> Tensor"""
    return _reduce_dims(b, "ReduceSum", x, dim, keepdim, b.out.dtype)


@converter(aten.mean.dim, aten.mean.default)
def mean(
    b: GraphBuilder, x: Value, dim: Dims = None, keepdim: bool = False, *, dtype: torch.dtype | None = None
) -> Ref:
    """mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor;
    mean(Tensor self, *, ScalarType? dtype=None) -> Tensor"""
    return _reduce_dims(b, "ReduceMean", x, dim, keepdim, b.out.dtype)


@converter(aten.prod.dim_int, aten.prod.default)
def prod(
    b: GraphBuilder, x: Value, dim: int | None = None, keepdim: bool = False, *, dtype: torch.dtype | None = None
) -> Ref:
    """prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor;
    prod(Tensor self, *, ScalarType? dtype=None) -> Tensor"""
    return _reduce_dims(b, "ReduceProd", x, dim, keepdim, b.out.dtype)


# -- max, min, any, all ----------------------------------------------------------------------
@converter(aten.amax.default, aten.max.default)
def amax(b: GraphBuilder, x: Value, dim: Sequence[int] = (), keepdim: bool = False) -> Ref:
    """amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor; max(Tensor self) -> Tensor"""
    return _reduce_dims(b, "ReduceMax", x, dim, keepdim, _ordered(x))


@converter(aten.amin.default, aten.min.default)
def amin(b: GraphBuilder, x: Value, dim: Sequence[int] = (), keepdim: bool = False) -> Ref:
    """amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor; min(Tensor self) -> Tensor"""
    return _reduce_dims(b, "ReduceMin", x, dim, keepdim, _ordered(x))


@converter(aten.aminmax.default)
def aminmax(b: GraphBuilder, x: Value, *, dim: int | None = None, keepdim: bool = False) -> tuple[Ref, Ref]:
    """aminmax(Tensor self, *, int? dim=None, bool keepdim=False) -> (Tensor min, Tensor max)"""
    xv = b.cast(x, _ordered(x))
    axes = _axes(xv, dim)
    low = b.cast(_reduce(b, "ReduceMin", xv, axes, keepdim), b.out[0].dtype)
    return low, b.cast(_reduce(b, "ReduceMax", xv, axes, keepdim), b.out[1].dtype)


def _truth(b: GraphBuilder, x: Value) -> Value:
    """x != 0 as int32 0/1 (opset 17 has no boolean ReduceMax/Min)."""
    return b.cast(b.cast(x, torch.bool), torch.int32)


@converter(aten.any.dim, aten.any.dims, aten.any.default)
def any_(b: GraphBuilder, x: Value, dim: Dims = None, keepdim: bool = False) -> Ref:
    """any.dim(Tensor self, int dim, bool keepdim=False) -> Tensor"""
    return _reduce_dims(b, "ReduceMax", _truth(b, x), dim, keepdim, torch.int32)


@converter(aten.all.dim, aten.all.dims, aten.all.default)
def all_(b: GraphBuilder, x: Value, dim: Dims = None, keepdim: bool = False) -> Ref:
    """all.dim(Tensor self, int dim, bool keepdim=False) -> Tensor"""
    return _reduce_dims(b, "ReduceMin", _truth(b, x), dim, keepdim, torch.int32)


# -- variance and standard deviation ---------------------------------------------------------
def _divisor(b: GraphBuilder, x: Value, axes: list[int], correction: float) -> Ref:
    """max(N - correction, 0) with N the count of reduced elements (read at runtime if dynamic)."""
    n = static_numel([x.shape[a] for a in axes])
    if n is not None:
        return b.const(max(n - correction, 0), x.dtype)
    sizes = b.op("Gather", b.op("Shape", x), b.ints(axes), axis=0)
    count = b.cast(b.op("ReduceProd", sizes, keepdims=0, dtype=torch.int64), x.dtype)
    return b.op("Max", b.op("Sub", count, b.const(correction, x.dtype)), b.const(0, x.dtype))


def _var(b: GraphBuilder, x: Value, dim: Dims, correction: float | None, keepdim: bool) -> tuple[Ref, list[int]]:
    """Squared deviations from the mean, summed and divided by max(N - correction, 0) (a zero
    divisor gives inf/NaN, as in torch)."""
    axes = _axes(x, dim)
    if x.rank == 0:
        deviation = b.op("Sub", x, x)
    else:
        deviation = b.op("Sub", x, b.op("ReduceMean", x, axes=axes, keepdims=1))
    squares = b.op("Mul", deviation, deviation, dtype=x.dtype, shape=x.shape)
    total = _reduce(b, "ReduceSum", squares, axes, keepdim)
    divisor = _divisor(b, x, axes, 1 if correction is None else correction)
    return b.op("Div", total, divisor, dtype=x.dtype), axes


@converter(aten.var.correction, capability=float_inputs)
def var(b: GraphBuilder, x: Value, dim: Dims = None, *, correction: float | None = None, keepdim: bool = False) -> Ref:
    """var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor"""
    return _var(b, x, dim, correction, keepdim)[0]


@converter(aten.var.dim, capability=float_inputs)
def var_dim(b: GraphBuilder, x: Value, dim: Dims, unbiased: bool = True, keepdim: bool = False) -> Ref:
    """var.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor"""
    return _var(b, x, dim, 1 if unbiased else 0, keepdim)[0]


@converter(aten.std.correction, capability=float_inputs)
def std(b: GraphBuilder, x: Value, dim: Dims = None, *, correction: float | None = None, keepdim: bool = False) -> Ref:
    """std.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor"""
    return b.op("Sqrt", _var(b, x, dim, correction, keepdim)[0], dtype=x.dtype)


@converter(aten.std.dim, capability=float_inputs)
def std_dim(b: GraphBuilder, x: Value, dim: Dims, unbiased: bool = True, keepdim: bool = False) -> Ref:
    """std.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor"""
    return b.op("Sqrt", _var(b, x, dim, 1 if unbiased else 0, keepdim)[0], dtype=x.dtype)


def _running_mean(b: GraphBuilder, x: Value, axes: list[int], keepdim: bool) -> Ref:
    """The mean var_mean and std_mean return. torch computes it by Welford's running update, where
    an infinity followed by any element gives NaN: the mean is ±inf only where the slice's one
    infinity is its last element (row-major), else NaN (found by tests/test_fuzz.py)."""
    mean = _reduce(b, "ReduceMean", x, axes, keepdim)
    if x.rank == 0:
        return mean
    last = b.op("Slice", x, b.ints([-1] * len(axes)), b.ints([2**62] * len(axes)), b.ints(axes))
    last_shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))

    def infinities(v: Ref, shape: tuple[ShapeDim, ...]) -> Ref:
        flags = b.op("Cast", b.op("IsInf", v), to=onnx_type(x.dtype), dtype=x.dtype, shape=shape)
        return _reduce(b, "ReduceSum", flags, axes, keepdim)

    early = b.op("Greater", b.op("Sub", infinities(x, x.shape), infinities(last, last_shape)), b.const(0, x.dtype))
    return b.op("Where", early, b.const(math.nan, x.dtype), mean, dtype=x.dtype)


@converter(aten.var_mean.correction, capability=float_inputs)
def var_mean(
    b: GraphBuilder, x: Value, dim: Dims = None, *, correction: float | None = None, keepdim: bool = False
) -> tuple[Ref, Ref]:
    """var_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None,
    bool keepdim=False) -> (Tensor, Tensor)"""
    variance, axes = _var(b, x, dim, correction, keepdim)
    return variance, _running_mean(b, x, axes, keepdim)


@converter(aten.std_mean.correction, capability=float_inputs)
def std_mean(
    b: GraphBuilder, x: Value, dim: Dims = None, *, correction: float | None = None, keepdim: bool = False
) -> tuple[Ref, Ref]:
    """std_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None,
    bool keepdim=False) -> (Tensor, Tensor)"""
    variance, axes = _var(b, x, dim, correction, keepdim)
    return b.op("Sqrt", variance, dtype=x.dtype), _running_mean(b, x, axes, keepdim)


# -- arg reductions and max/min with indices --------------------------------------------------
def _orderable(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    """TensorRT's ArgMax/ArgMin/ReduceMax take float, int32 and int64 (int8/uint8 are quantized
    types there); bools are ordered as int32."""
    dtype = input_val(node, 0).dtype
    if not dtype.is_floating_point and dtype not in (torch.int32, torch.int64, torch.bool):
        return f"{node.target} of {dtype}: TensorRT orders float, int32 and int64 tensors"
    return None


def _arg(b: GraphBuilder, op_type: str, x: Value, dim: int | None, keepdim: bool) -> Ref:
    """The first index of the extreme (select_last_index=0, as torch documents). A NaN is the
    extreme of a float slice for both, as in torch: ONNX leaves where NaNs go open."""
    x = b.cast(x, _ordered(x))
    flat = dim is None or x.rank == 0
    v = b.op("Reshape", x, b.ints([-1])) if flat else x
    axis, keep = (0, 0) if dim is None or flat else (normalize_dim(dim, x.rank), int(keepdim))
    index = b.op(op_type, v, axis=axis, keepdims=keep, dtype=torch.int64)
    if x.dtype is not None and x.dtype.is_floating_point:
        nans = b.op("Cast", b.op("IsNaN", v), to=onnx_type(x.dtype), dtype=x.dtype)
        first_nan = b.op("ArgMax", nans, axis=axis, keepdims=keep)
        any_nan = b.op("Greater", b.op("ReduceMax", nans, axes=[axis], keepdims=keep), b.const(0, x.dtype))
        index = b.op("Where", any_nan, first_nan, index, dtype=torch.int64)
    if flat and keepdim and x.rank > 0:
        index = b.op("Reshape", index, b.ints([1] * x.rank), dtype=torch.int64)
    return index


@converter(aten.argmax.default, capability=_orderable)
def argmax(b: GraphBuilder, x: Value, dim: int | None = None, keepdim: bool = False) -> Ref:
    """argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor"""
    return _arg(b, "ArgMax", x, dim, keepdim)


@converter(aten.argmin.default, capability=_orderable)
def argmin(b: GraphBuilder, x: Value, dim: int | None = None, keepdim: bool = False) -> Ref:
    """argmin(Tensor self, int? dim=None, bool keepdim=False) -> Tensor"""
    return _arg(b, "ArgMin", x, dim, keepdim)


@converter(aten.max.dim, capability=_orderable)
def max_dim(b: GraphBuilder, x: Value, dim: int, keepdim: bool = False) -> tuple[Ref, Ref]:
    """max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    values = _reduce(b, "ReduceMax", b.cast(x, _ordered(x)), _axes(x, dim), keepdim)
    return b.cast(values, x.dtype), _arg(b, "ArgMax", x, dim, keepdim)


@converter(aten.min.dim, capability=_orderable)
def min_dim(b: GraphBuilder, x: Value, dim: int, keepdim: bool = False) -> tuple[Ref, Ref]:
    """min.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"""
    values = _reduce(b, "ReduceMin", b.cast(x, _ordered(x)), _axes(x, dim), keepdim)
    return b.cast(values, x.dtype), _arg(b, "ArgMin", x, dim, keepdim)


# -- log-sum-exp, norms, nan-sum -------------------------------------------------------------
@converter(aten.logsumexp.default)
def logsumexp(b: GraphBuilder, x: Value, dim: Sequence[int], keepdim: bool = False) -> Ref:
    """logsumexp(Tensor self, int[1] dim, bool keepdim=False) -> Tensor

    max + log(sum(exp(x - max))), so exp never overflows; an infinite max is not subtracted
    (inf - inf would be NaN).
    """
    dtype = b.out.dtype
    xv = b.cast(x, dtype)
    if xv.rank == 0:
        return b.op("Identity", xv, dtype=dtype)
    axes = _axes(xv, dim)
    peak = b.op("ReduceMax", xv, axes=axes, keepdims=1)
    infinite = b.op("Equal", b.op("Abs", peak), b.const(math.inf, dtype))
    peak = b.op("Where", infinite, b.const(0, dtype), peak)
    total = b.op("ReduceSum", b.op("Exp", b.op("Sub", xv, peak)), b.ints(axes), keepdims=int(keepdim))
    if not keepdim:
        peak = b.op("Squeeze", peak, b.ints(axes))
    return b.op("Add", b.op("Log", total), peak, dtype=dtype)


# float32 holds every integer of magnitude up to 2**24 exactly.
FLOAT32_EXACT = 2**24
# Ops that pass their input's values through unchanged (casts to a wider type, copies, views).
_SAME_VALUES = {
    aten._to_copy.default,
    aten.clone.default,
    aten.alias.default,
    aten.view.default,
    aten.reshape.default,
    aten.unsqueeze.default,
    aten.squeeze.dim,
    aten.expand.default,
}


def _magnitude_bound(arg: object) -> int | None:
    """A bound on |value| of an FX argument where the graph proves one: bools (comparison
    results, masks) and casts or views of them are 0/1."""
    while isinstance(arg, torch.fx.Node):
        val = arg.meta.get("val")
        if isinstance(val, torch.Tensor) and val.dtype == torch.bool:
            return 1
        if arg.target not in _SAME_VALUES:
            return None
        arg = arg.args[0]
    return None


def _total_bound(arg: object) -> int | None:
    """A bound on the sum of all values of an FX argument where the graph proves one: histc's
    counts (and casts or reshapes of them, not broadcasts) sum to at most its input's element
    count, however the bins share it."""
    while isinstance(arg, torch.fx.Node):
        if arg.target is aten.histc.default:
            sizes = [_max_size(d) for d in input_val(arg, 0).shape]
            return None if None in sizes else math.prod(s for s in sizes if s is not None)
        if arg.target not in _SAME_VALUES or arg.target is aten.expand.default:
            return None
        arg = arg.args[0]
    return None


def _max_size(d: int | torch.SymInt) -> int | None:
    """A dim's size, or the upper bound of its range when dynamic (None when unbounded)."""
    if isinstance(d, int):
        return d
    shape_env = d.node.shape_env
    return int_bound(shape_env.bound_sympy(d.node.expr).upper, None) if shape_env is not None else None


def _exact_cumsum(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    """TensorRT's CumSum is float-only: an integer cumsum runs in float32, which is exact only
    while every partial sum stays within 2**24."""
    if node.meta["val"].dtype.is_floating_point:
        return None
    x = input_val(node, 0)
    n = _max_size(x.shape[normalize_dim(node_arg(node, 1, "dim"), x.dim())]) if x.dim() else 1
    bound = _magnitude_bound(node.args[0])
    why = (
        "integer cumsum runs as float32 (TensorRT's CumSum is float-only), exact only when the partial "
        "sums provably stay within 2**24"
    )
    total = _total_bound(node.args[0])
    if total is not None and total <= FLOAT32_EXACT:
        return None
    if bound is None:
        return (
            f"{why}; nothing in the graph bounds the input's values (only bools, histc counts and casts of "
            f"them are bounded)"
        )
    if n is None or bound * n > FLOAT32_EXACT:
        return f"{why}; values up to {bound} over a dim of up to {n if n is not None else 'unbounded'} elements may not"
    return None


# An integer cumsum over a last axis of at most this many elements is a MatMul with a triangle of
# ones (below): no CumSum layer, so none of SEVERAL_CUMSUMS (MoE's counts per expert are one).
MATMUL_CUMSUM_MAX = 1024


def _matmul_cumsum(node: torch.fx.Node) -> bool:
    x = input_val(node, 0)
    if node.meta["val"].dtype.is_floating_point or x.dim() == 0:
        return False
    n = x.shape[-1]
    return (
        normalize_dim(node_arg(node, 1, "dim"), x.dim()) == x.dim() - 1
        and isinstance(n, int)
        and n <= MATMUL_CUMSUM_MAX
    )


def _one_cumsum_axis(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    """Where the target may be a release that miscompiles several CumSums over different axes
    (trt_support.SEVERAL_CUMSUMS), only the cumsums over the graph's first cumsum's axis (by
    rank and dim) go into engines; those written as a MatMul do not count."""
    if _matmul_cumsum(node):
        return None
    cumsums = [
        n for n in node.graph.find_nodes(op="call_function", target=aten.cumsum.default) if not _matmul_cumsum(n)
    ]
    if len(cumsums) < 2:
        return None

    def kind(n: torch.fx.Node) -> tuple[int, int]:
        rank = input_val(n, 0).dim()
        return rank, normalize_dim(node_arg(n, 1, "dim"), max(rank, 1))

    return SEVERAL_CUMSUMS.reason(trt_target) if kind(node) != kind(cumsums[0]) else None


@converter(aten.cumsum.default, capability=all_of(_exact_cumsum, _one_cumsum_axis))
def cumsum(b: GraphBuilder, x: Value, dim: int, *, dtype: torch.dtype | None = None) -> Ref:
    """cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor

    Integer results are summed in float32 and cast back (exact: see the capability check); over a
    short last axis as a MatMul with an upper triangle of ones, x[..., i] counted into every j >= i.
    """
    out_dtype = b.out.dtype
    work = out_dtype if out_dtype.is_floating_point else torch.float32
    xv = b.cast(x, work)
    if xv.rank == 0:
        return b.cast(xv, out_dtype)
    if _matmul_cumsum(b.converting):
        n = int(xv.shape[-1])
        triangle = torch.triu(torch.ones(n, n, dtype=work))
        return b.cast(b.op("MatMul", xv, b.initializer("cumsum_triangle", triangle), dtype=work), out_dtype)
    axis = b.const(normalize_dim(dim, xv.rank), torch.int64)  # an initializer, as TensorRT wants
    return b.cast(b.op("CumSum", xv, axis, dtype=work), out_dtype)


@converter(aten.linalg_vector_norm.default, capability=float_inputs)
def linalg_vector_norm(
    b: GraphBuilder,
    x: Value,
    ord: float = 2,
    dim: Dims = None,
    keepdim: bool = False,
    *,
    dtype: torch.dtype | None = None,
) -> Ref:
    """linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *,
    ScalarType? dtype=None) -> Tensor"""
    out_dtype = b.out.dtype
    xv = b.cast(x, out_dtype)
    axes = _axes(xv, dim)
    if ord == 2 and xv.rank > 0:
        # ONNX Runtime's ReduceL2 gives FLT_MAX, not inf, for a slice holding an inf (found by
        # tests/test_fuzz.py); torch's norm is inf there, and NaN where the slice holds a NaN.
        norm = b.cast(_reduce(b, "ReduceL2", xv, axes, keepdim), out_dtype)
        norm = nan_propagated(b, xv, norm, axes, keepdim, test="IsInf", value=math.inf)
        return nan_propagated(b, xv, norm, axes, keepdim)
    if ord == 1 or (ord == 2 and xv.rank == 0):  # the norm of a 0-d tensor is its magnitude
        if xv.rank == 0:
            return b.op("Abs", xv, dtype=out_dtype)
        return b.cast(_reduce(b, "ReduceL1", xv, axes, keepdim), out_dtype)
    magnitude = b.op("Abs", xv, dtype=out_dtype, shape=xv.shape)
    if ord == math.inf:
        return _reduce(b, "ReduceMax", magnitude, axes, keepdim)
    if ord == -math.inf:
        return _reduce(b, "ReduceMin", magnitude, axes, keepdim)
    if ord == 0:
        nonzero = b.op(
            "Cast",
            b.op("Not", b.op("Equal", xv, b.const(0, out_dtype))),
            to=onnx_type(out_dtype),
            dtype=out_dtype,
            shape=xv.shape,
        )
        return _reduce(b, "ReduceSum", nonzero, axes, keepdim)
    powered = b.op("Pow", magnitude, b.const(ord, out_dtype), dtype=out_dtype, shape=xv.shape)
    return b.op("Pow", _reduce(b, "ReduceSum", powered, axes, keepdim), b.const(1 / ord, out_dtype), dtype=out_dtype)


@converter(aten.nansum.default)
def nansum(
    b: GraphBuilder, x: Value, dim: Dims = None, keepdim: bool = False, *, dtype: torch.dtype | None = None
) -> Ref:
    """nansum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"""
    out_dtype = b.out.dtype
    xv = b.cast(x, out_dtype)
    if out_dtype.is_floating_point:
        xv = b.op("Where", b.op("IsNaN", xv), b.const(0, out_dtype), xv, dtype=out_dtype, shape=xv.shape)
    return _reduce(b, "ReduceSum", xv, _axes(xv, dim), keepdim)


# -- prims: the reductions torch._refs calls (`torch._refs.sum` is prims.sum) -----------------
def _some_dims(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    """A prim over dims=[]: torch's shape rule keeps every dim, its kernel reduces them all."""
    dims = node_arg(node, 1, "dims")
    if isinstance(dims, (list, tuple)) and not dims:
        return f"{node.target} over dims=[]: torch's shape rule reduces no dim there, its kernel every dim"
    return None


@converter(prims.sum.default, capability=_some_dims)
def prims_sum(b: GraphBuilder, x: Value, dims: Sequence[int] | None, *, output_dtype: torch.dtype | None = None) -> Ref:
    """prims::sum(Tensor inp, int[]? dims, *, ScalarType? output_dtype=None) -> Tensor"""
    return _reduce_dims(b, "ReduceSum", x, dims, False, b.out.dtype)


@converter(prims.prod.default, capability=_some_dims)
def prims_prod(
    b: GraphBuilder, x: Value, dims: Sequence[int] | None, *, output_dtype: torch.dtype | None = None
) -> Ref:
    """prims::prod(Tensor inp, int[]? dims, *, ScalarType? output_dtype=None) -> Tensor"""
    return _reduce_dims(b, "ReduceProd", x, dims, False, b.out.dtype)


@converter(prims.amax.default, capability=_some_dims)
def prims_amax(
    b: GraphBuilder, x: Value, dims: Sequence[int] | None, *, output_dtype: torch.dtype | None = None
) -> Ref:
    """prims::amax(Tensor inp, int[]? dims, *, ScalarType? output_dtype=None) -> Tensor"""
    return _reduce_dims(b, "ReduceMax", x, dims, False, _ordered(x))


@converter(prims.amin.default, capability=_some_dims)
def prims_amin(
    b: GraphBuilder, x: Value, dims: Sequence[int] | None, *, output_dtype: torch.dtype | None = None
) -> Ref:
    """prims::amin(Tensor inp, int[]? dims, *, ScalarType? output_dtype=None) -> Tensor"""
    return _reduce_dims(b, "ReduceMin", x, dims, False, _ordered(x))


@converter(prims.var.default, capability=all_of(float_inputs, _some_dims))
def prims_var(
    b: GraphBuilder,
    x: Value,
    dims: Sequence[int] | None,
    correction: float | None = 1,
    *,
    output_dtype: torch.dtype | None = None,
) -> Ref:
    """prims::var(Tensor inp, int[]? dims, float? correction=1, *, ScalarType? output_dtype=None) -> Tensor"""
    return _var(b, x, dims, correction, False)[0]
