"""Max/average pooling in 1d, 2d and 3d, and adaptive pooling (even and uneven windows).

TensorRT pools 2-D and 3-D windows only, so 1d pooling runs as 2-D over (N, C, 1, L). Unbatched
(C, *) inputs get a batch dim for the ONNX op.

ceil_mode (static spatial sizes needed): ONNX's keeps a last window that starts inside the right
padding where torch drops it, and ONNX Runtime's kernels drop it while its shape inference keeps
it, which breaks its memory planning in larger graphs. Where the two counts differ, the pool runs
in floor mode with the right padding extended to torch's count: exact for max pooling and for
averages without padding in the divisor; an average that counts padding is refused when the
extension would reach its divisor.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from converters.core.builder import GraphBuilder, Ref, ShapeDim, Value
from converters.core.common import all_of, float_inputs, nan_propagated, only_first_output_used, per_spatial_dim
from converters.core.dims import dim_size, input_val, is_static_dim, node_arg, static
from converters.core.registry import Capability, converter
from converters.core.target import TrtTarget

aten = torch.ops.aten


def _attrs(
    n: int, kernel_size: Sequence[int], stride: Sequence[int], padding: Sequence[int] | int, ceil_mode: bool
) -> dict[str, Any]:
    kernel = per_spatial_dim(kernel_size, n)
    pads = per_spatial_dim(padding, n)
    return dict(
        kernel_shape=kernel,
        strides=per_spatial_dim(stride, n) if stride else kernel,
        pads=pads + pads,
        ceil_mode=int(ceil_mode),
    )


def _lift_1d(attrs: dict[str, Any]) -> dict[str, Any]:
    """1d attributes as 2-D ones over a leading spatial dim of size 1."""
    out = dict(attrs)
    for key in ("kernel_shape", "strides"):
        if key in attrs:
            out[key] = [1, *attrs[key]]
    if "pads" in attrs:
        out["pads"] = [0, attrs["pads"][0], 0, attrs["pads"][1]]
    return out


def _never_minus_inf(value: object) -> bool:
    """Whether an FX value holds no -inf: a ReLU's output (ResNet's stem), or a concatenation of
    such (SqueezeNet's Fire modules)."""
    if not isinstance(value, torch.fx.Node):
        return False
    if value.target == aten.cat.default:
        parts = value.args[0]
        return isinstance(parts, (list, tuple)) and all(_never_minus_inf(v) for v in parts)
    return value.target == aten.relu.default


def _nan_windows(
    b: GraphBuilder,
    op_type: str,
    x: Ref,
    pooled: Ref,
    attrs: dict[str, Any],
    dtype: torch.dtype,
    channels: ShapeDim,
    never_minus_inf: bool,
) -> Ref:
    """NaN where a window holds a NaN, as torch's max pooling gives (ONNX Runtime's MaxPool skips
    NaNs; found by tests/test_reliability_inputs.py): the pooled values times a factor that is 1,
    or NaN where the window's mean of tanh(x) is (tanh keeps NaN and bounds +-inf, so nothing else
    makes that mean NaN; times 1 keeps every value, -0.0 and +-inf included). Where x holds no
    -inf (_never_minus_inf), the plain mean is NaN only where a NaN is, so tanh goes after the
    average, onto the pooled grid: one pass over x less (SqueezeNet's engine 5-8% faster). The
    factor, 0 * tanh + 1, is a BatchNormalization of scale 0 and bias 1 where the channel count is
    known: ONNX Runtime's NCHWc layout pass then keeps Tanh, the average, the factor and the Mul
    in the convolutions' blocked layout (an IsNaN/Where test cost a reorder each way around every
    pool, and kept a residual Add or Relu after it from fusing into its convolution)."""

    def average(v: Ref) -> Ref:
        # Padding left out of the divisor (ONNX's default; NCHWc pools it in ceil mode only so):
        # every max pooling window holds at least one element.
        return b.op("GlobalAveragePool", v) if op_type == "GlobalMaxPool" else b.op("AveragePool", v, **attrs)

    mean = b.op("Tanh", average(x)) if never_minus_inf else average(b.op("Tanh", x))
    if is_static_dim(channels):
        zero, one = b.const([0.0] * int(channels), dtype), b.const([1.0] * int(channels), dtype)
        factor = b.op("BatchNormalization", mean, zero, one, zero, one, epsilon=0.0)
    else:
        factor = b.op("Add", b.op("Mul", mean, b.const(0, dtype)), b.const(1, dtype))
    return b.op("Mul", pooled, factor, dtype=dtype)


def _pool(b: GraphBuilder, op_type: str, x: Value, n: int, attrs: dict[str, Any]) -> Ref:
    """`op_type` over the last n dims of a batched (N, C, *) or unbatched (C, *) input."""
    out_spatial = list(b.out[0].shape if isinstance(b.out, (tuple, list)) else b.out.shape)[-n:]
    in_spatial = list(x.shape[-n:])
    squeeze = []
    y: Ref = x
    if x.rank == n + 1:
        y = b.op("Unsqueeze", y, b.ints([0]))
        squeeze.append(0)
    if n == 1:
        y = b.op("Unsqueeze", y, b.ints([2]))
        squeeze.append(2)
        attrs, in_spatial, out_spatial = _lift_1d(attrs), [1, *in_spatial], [1, *out_spatial]
    if attrs.get("ceil_mode") and all(is_static_dim(d) for d in in_spatial):  # else: _dynamic_ceil_mode
        static_in = [static(d, "a pooled dim") for d in in_spatial]
        if _onnx_ceil_count(attrs, static_in) != [int(o) for o in out_spatial]:
            attrs = dict(attrs, ceil_mode=0, pads=_floor_pads(attrs, static_in, out_spatial))
    pooled = b.op(op_type, y, **attrs)
    if op_type.endswith("MaxPool"):
        pooled = _nan_windows(
            b, op_type, y, pooled, attrs, x.dtype, x.shape[-n - 1], _never_minus_inf(b.converting.args[0])
        )
    if squeeze:
        pooled = b.op("Squeeze", pooled, b.ints(sorted(squeeze)))
    return Ref(pooled.name, x.dtype)


def _onnx_ceil_count(attrs: dict[str, Any], in_spatial: Sequence[int]) -> list[int]:
    """The window counts ONNX's ceil_mode shape inference gives."""
    return [
        -(-(int(i) + p + q - k) // s) + 1
        for i, p, q, k, s in zip(
            in_spatial, attrs["pads"], attrs["pads"][len(in_spatial) :], attrs["kernel_shape"], attrs["strides"]
        )
    ]


def _floor_pads(attrs: dict[str, Any], in_spatial: Sequence[int], out_spatial: Sequence[int]) -> list[int]:
    """Pads with which floor mode yields torch's ceil_mode window counts `out_spatial`."""
    n = len(in_spatial)
    pads = list(attrs["pads"])
    for d, (i, o, k, s) in enumerate(zip(in_spatial, out_spatial, attrs["kernel_shape"], attrs["strides"])):
        pads[n + d] = max(pads[n + d], _end_pad_needed(int(i), int(o), k, s, pads[d]))
    return pads


def _end_pad_needed(size: int, out: int, kernel: int, stride: int, begin_pad: int) -> int:
    """The right padding that makes `out` windows fit in floor mode (the last one starts at
    (out - 1) * stride - begin_pad, before the input's end, so this stays below `kernel`)."""
    return (out - 1) * stride + kernel - size - begin_pad


# -- capability checks, by argument position -------------------------------------------------
def _unit_dilation(n: int, at: int) -> Capability:
    def check(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
        if any(d != 1 for d in per_spatial_dim(node_arg(node, at, "dilation", 1), n)):
            return "TensorRT 10 pools only with dilation 1"
        return None

    return check


def _no_divisor_override(at: int) -> Capability:
    def check(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
        if node_arg(node, at, "divisor_override") is not None:
            return "divisor_override has no ONNX equivalent"
        return None

    return check


def _dynamic_ceil_mode(n: int, at: int, averages: bool = False) -> Capability:
    """ceil_mode over dynamic spatial dims, where the window count is not known when converting:
    ONNX's ceil count is torch's unless torch drops a last window that would start in the end
    padding, which needs padding + stride > kernel in that dim (googlenet's pools, kernel 3 and
    stride 2, never do). Average pooling counting the padding stays static (_ceil_within_padding)."""

    def check(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
        x = input_val(node, 0)
        if not node_arg(node, at, "ceil_mode", False) or all(is_static_dim(d) for d in x.shape[-n:]):
            return None
        if averages and node_arg(node, 5, "count_include_pad", True):
            return "ceil_mode over dynamic spatial dims with count_include_pad=True"
        attrs = _attrs(
            n, node_arg(node, 1, "kernel_size"), node_arg(node, 2, "stride", ()), node_arg(node, 3, "padding", 0), True
        )
        if any(p + s > k for p, s, k in zip(attrs["pads"], attrs["strides"], attrs["kernel_shape"])):
            return "ceil_mode over dynamic spatial dims with padding + stride > kernel (a last window torch may drop)"
        return None

    return check


def _ceil_within_padding(n: int) -> Any:
    """avg_pool's ceil_mode with count_include_pad, where ONNX's count is not torch's: the last
    window must end within the padding (torch's divisor counts only up to `padding`, the extended
    padding of floor mode would be counted)."""

    def check(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
        if not (node_arg(node, 4, "ceil_mode", False) and node_arg(node, 5, "count_include_pad", True)):
            return None
        x = input_val(node, 0)
        out = node.meta["val"]
        if not all(is_static_dim(d) for d in (*x.shape[-n:], *out.shape[-n:])):
            return None  # _dynamic_ceil_mode refuses it
        attrs = _attrs(
            n, node_arg(node, 1, "kernel_size"), node_arg(node, 2, "stride", ()), node_arg(node, 3, "padding", 0), True
        )
        if _onnx_ceil_count(attrs, x.shape[-n:]) == [int(o) for o in out.shape[-n:]]:
            return None
        pads = attrs["pads"][:n]
        for i, o, k, s, p in zip(x.shape[-n:], out.shape[-n:], attrs["kernel_shape"], attrs["strides"], pads):
            if _end_pad_needed(int(i), int(o), k, s, p) > p:
                return (
                    "ceil_mode with count_include_pad=True whose last window reaches past the padding "
                    "(ONNX would count the extra positions in its divisor)"
                )
        return None

    return check


# -- max pooling (values only: TensorRT's MaxPool has no Indices output) ---------------------
@converter(
    aten.max_pool2d_with_indices.default,
    capability=all_of(float_inputs, only_first_output_used, _unit_dilation(2, at=4), _dynamic_ceil_mode(2, at=5)),
)
def max_pool2d_with_indices(
    b: GraphBuilder,
    x: Value,
    kernel_size: Sequence[int],
    stride: Sequence[int] = (),
    padding: Sequence[int] = (0,),
    dilation: Sequence[int] = (1,),
    ceil_mode: bool = False,
) -> tuple[Ref, None]:
    """max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0,
    int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)"""
    return _pool(b, "MaxPool", x, 2, _attrs(2, kernel_size, stride, padding, ceil_mode)), None


@converter(
    aten.max_pool3d_with_indices.default,
    capability=all_of(float_inputs, only_first_output_used, _unit_dilation(3, at=4), _dynamic_ceil_mode(3, at=5)),
)
def max_pool3d_with_indices(
    b: GraphBuilder,
    x: Value,
    kernel_size: Sequence[int],
    stride: Sequence[int] = (),
    padding: Sequence[int] = (0,),
    dilation: Sequence[int] = (1,),
    ceil_mode: bool = False,
) -> tuple[Ref, None]:
    """max_pool3d_with_indices(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0,
    int[3] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)"""
    return _pool(b, "MaxPool", x, 3, _attrs(3, kernel_size, stride, padding, ceil_mode)), None


# -- average pooling -------------------------------------------------------------------------
def _avg_pool(
    b: GraphBuilder,
    x: Value,
    n: int,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    ceil_mode: bool,
    count_include_pad: bool,
) -> Ref:
    attrs = _attrs(n, kernel_size, stride, padding, ceil_mode)
    return _pool(b, "AveragePool", x, n, dict(attrs, count_include_pad=int(count_include_pad)))


@converter(
    aten.avg_pool1d.default,
    capability=all_of(float_inputs, _dynamic_ceil_mode(1, at=4, averages=True), _ceil_within_padding(1)),
)
def avg_pool1d(
    b: GraphBuilder,
    x: Value,
    kernel_size: Sequence[int],
    stride: Sequence[int] = (),
    padding: Sequence[int] = (0,),
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Ref:
    """avg_pool1d(Tensor self, int[1] kernel_size, int[1] stride=[], int[1] padding=0, bool ceil_mode=False,
    bool count_include_pad=True) -> Tensor"""
    return _avg_pool(b, x, 1, kernel_size, stride, padding, ceil_mode, count_include_pad)


@converter(
    aten.avg_pool2d.default,
    capability=all_of(
        float_inputs, _no_divisor_override(at=6), _dynamic_ceil_mode(2, at=4, averages=True), _ceil_within_padding(2)
    ),
)
def avg_pool2d(
    b: GraphBuilder,
    x: Value,
    kernel_size: Sequence[int],
    stride: Sequence[int] = (),
    padding: Sequence[int] = (0,),
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Ref:
    """avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0,
    bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor"""
    return _avg_pool(b, x, 2, kernel_size, stride, padding, ceil_mode, count_include_pad)


@converter(
    aten.avg_pool3d.default,
    capability=all_of(
        float_inputs, _no_divisor_override(at=6), _dynamic_ceil_mode(3, at=4, averages=True), _ceil_within_padding(3)
    ),
)
def avg_pool3d(
    b: GraphBuilder,
    x: Value,
    kernel_size: Sequence[int],
    stride: Sequence[int] = (),
    padding: Sequence[int] = (0,),
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Ref:
    """avg_pool3d(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, bool ceil_mode=False,
    bool count_include_pad=True, int? divisor_override=None) -> Tensor"""
    return _avg_pool(b, x, 3, kernel_size, stride, padding, ceil_mode, count_include_pad)


# -- adaptive pooling ------------------------------------------------------------------------
# Uneven windows (an output size that does not divide the input, or may not: a dynamic input size)
# overlap and differ in length, so no single pool gives them. Both reductions are separable, so
# each spatial dim is reduced on its own, one Slice and ReduceMean/ReduceMax per output index,
# concatenated. (Not a MatMul with an averaging matrix: its zeros would turn an inf or NaN into NaN
# in every window.)
def _windows(size: int, out: int) -> list[tuple[int, int]]:
    """torch's adaptive windows: [floor(i * size / out), ceil((i + 1) * size / out))."""
    return [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]


def _dynamic_windows(b: GraphBuilder, x: Value, axis: int, out: int) -> list[tuple[Ref, Ref]]:
    """The same windows' bounds over a dim known only at run time, computed in the engine from
    its size (as 1-element Slice starts and ends)."""
    size = dim_size(b, x, axis)

    def bound(numerator_step: int, rounding: int) -> Ref:  # (step * size + rounding) // out
        scaled = b.op("Mul", size, b.ints([numerator_step]), dtype=torch.int64)
        return b.op("Div", b.op("Add", scaled, b.ints([rounding])), b.ints([out]), dtype=torch.int64)

    return [(bound(i, 0), bound(i + 1, out - 1)) for i in range(out)]


def _reduced_shape(x: Value, axis: int, out: int) -> tuple[ShapeDim, ...]:
    return (*x.shape[:axis], out, *x.shape[axis + 1 :])


def _reduce_dim(b: GraphBuilder, x: Value, axis: int, out: int, reduce_op: str) -> Value:
    """One Slice and `reduce_op` per output index along `axis`, concatenated."""
    d = x.shape[axis]
    windows: list[tuple[Ref, Ref]] = (
        [(b.ints([start]), b.ints([stop])) for start, stop in _windows(d, out)]
        if is_static_dim(d)
        else _dynamic_windows(b, x, axis, out)
    )
    axes = b.ints([axis])
    cells = []
    for start, stop in windows:
        window = b.op("Slice", x, start, stop, axes, dtype=x.dtype)
        reduced = b.op(reduce_op, window, axes=[axis], keepdims=1)
        cells.append(nan_propagated(b, window, reduced, [axis], True) if reduce_op == "ReduceMax" else reduced)
    return b.op("Concat", *cells, axis=axis, dtype=x.dtype, shape=_reduced_shape(x, axis, out))


def _adaptive(b: GraphBuilder, op_type: str, x: Value, n: int, output_size: Sequence[int]) -> Ref:
    """Even windows are a plain pool (a global one for output size 1); uneven ones, and windows
    over dynamic dims, are reduced one spatial dim at a time."""
    out = per_spatial_dim(output_size, n)
    if all(o == 1 for o in out):
        return _pool(b, f"Global{op_type}", x, n, {})
    sizes = x.shape[-n:]
    if all(is_static_dim(i) and i % o == 0 for i, o in zip(sizes, out)):
        kernel = [int(i) // o for i, o in zip(sizes, out)]
        return _pool(b, op_type, x, n, dict(kernel_shape=kernel, strides=kernel))
    reduce_op = "ReduceMean" if op_type == "AveragePool" else "ReduceMax"
    y = x
    for k, (size, o) in enumerate(zip(sizes, out)):
        if not (is_static_dim(size) and size == o):
            y = _reduce_dim(b, y, x.rank - n + k, o, reduce_op)
    return y


@converter(aten.adaptive_avg_pool1d.default, capability=float_inputs)
def adaptive_avg_pool1d(b: GraphBuilder, x: Value, output_size: Sequence[int]) -> Ref:
    """adaptive_avg_pool1d(Tensor self, int[1] output_size) -> Tensor"""
    return _adaptive(b, "AveragePool", x, 1, output_size)


@converter(aten._adaptive_avg_pool2d.default, capability=float_inputs)
def adaptive_avg_pool2d(b: GraphBuilder, x: Value, output_size: Sequence[int]) -> Ref:
    """_adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor"""
    return _adaptive(b, "AveragePool", x, 2, output_size)


@converter(aten._adaptive_avg_pool3d.default, capability=float_inputs)
def adaptive_avg_pool3d(b: GraphBuilder, x: Value, output_size: Sequence[int]) -> Ref:
    """_adaptive_avg_pool3d(Tensor self, SymInt[3] output_size) -> Tensor"""
    return _adaptive(b, "AveragePool", x, 3, output_size)


@converter(aten.adaptive_max_pool1d.default, capability=all_of(float_inputs, only_first_output_used))
def adaptive_max_pool1d(b: GraphBuilder, x: Value, output_size: Sequence[int]) -> tuple[Ref, None]:
    """adaptive_max_pool1d(Tensor self, int[1] output_size) -> (Tensor, Tensor)  (values only)"""
    return _adaptive(b, "MaxPool", x, 1, output_size), None


@converter(aten.adaptive_max_pool2d.default, capability=all_of(float_inputs, only_first_output_used))
def adaptive_max_pool2d(b: GraphBuilder, x: Value, output_size: Sequence[int]) -> tuple[Ref, None]:
    """adaptive_max_pool2d(Tensor self, int[2] output_size) -> (Tensor, Tensor)  (values only)"""
    return _adaptive(b, "MaxPool", x, 2, output_size), None
