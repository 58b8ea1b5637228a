"""One case (or more) per registered converter: the op runs inside an engine and matches eager.

`CASES` maps each ATen overload to the cases that produce it after capture. Calling the
overload explicitly (`aten.add.Scalar(x, 2)`) is how a case pins an overload that ordinary
Python code would not produce.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import onnx
import pytest
import torch
import torch.nn.functional as F
from harness import Fn, engine_ops, lower_and_compare
from transformers.integrations import moe  # noqa: F401  (registers transformers::grouped_mm_fallback)

import converters
import trt_lower
from converters.ops import prims as prim_converters
from converters.ops import quantize  # noqa: F401  (quantized_decomposed, before the cases use it)
from trt_lower.capture import aten_graph as capture

aten = torch.ops.aten


@dataclass(frozen=True)
class Case:
    op: Any
    fn: Callable[..., Any]
    make_inputs: Callable[[], tuple[torch.Tensor, ...]]
    id: str = ""
    rtol: float | None = None
    atol: float | None = None
    trt_version: str | None = None  # the target, where the default one cannot run the op (bfloat16)


qd = torch.ops.quantized_decomposed
INT8 = (-128, 127, torch.int8)
Q_SCALE = 2.0**-4
Q_SCALE_T, Q_ZERO_T, ON = torch.tensor(Q_SCALE), torch.tensor(0), torch.tensor(1)
# Weights: (out, in) for linear, (out, in, kh, kw) for conv, (in, out, kh, kw) for conv_transpose.
W, CONV, CONV_T = torch.randn(4, 6), torch.randn(4, 2, 3, 3), torch.randn(2, 4, 3, 3)
W_SCALES, W_ZEROS = torch.tensor([2.0**-5, 2.0**-4, 2.0**-3, 2.0**-4]), torch.zeros(4, dtype=torch.int64)
W_INT8 = qd.quantize_per_channel.default(W, W_SCALES, W_ZEROS, 0, *INT8)
CONV_INT8 = qd.quantize_per_channel.default(CONV, W_SCALES, W_ZEROS, 0, *INT8)


def _dq(q: torch.Tensor) -> torch.Tensor:
    return qd.dequantize_per_tensor.default(q, Q_SCALE, 0, *INT8)


def r(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape).to(dtype)


def ri(*shape: int, high: int = 10) -> torch.Tensor:
    return torch.randint(-high, high, shape)


def rp(*shape: int) -> torch.Tensor:
    """Positive floats (log, sqrt, pow bases)."""
    return torch.rand(*shape) + 0.1


def ru(*shape: int) -> torch.Tensor:
    """Floats inside (-1, 1) (asin, acos, atanh)."""
    return torch.rand(*shape) * 1.8 - 0.9


def rb(*shape: int) -> torch.Tensor:
    return torch.rand(*shape) > 0.5


def nz(*shape: int, high: int = 5) -> torch.Tensor:
    """Non-zero ints of both signs (divisors)."""
    x = torch.randint(1, high, shape)
    return torch.where(torch.rand(*shape) > 0.5, x, -x)


CASES: list[Case] = [
    # -- arithmetic: int vs float, alpha, bools (logic in torch) ------------------------------
    Case(aten.add.Tensor, lambda x, y: x + y, lambda: (r(2, 3), r(2, 3))),
    Case(aten.add.Tensor, lambda x, y: torch.add(x, y, alpha=2), lambda: (ri(2, 3), ri(3)), id="int-alpha"),
    Case(aten.add.Tensor, lambda x, y: (x > 0) + (y > 0), lambda: (r(6), r(6)), id="bool"),
    Case(aten.add.Scalar, lambda x: aten.add.Scalar(x, 2, alpha=3), lambda: (ri(4),), id="alpha"),
    Case(aten.sub.Tensor, lambda x, y: torch.sub(x, y, alpha=0.5), lambda: (r(2, 3), r(3)), id="alpha"),
    Case(aten.sub.Scalar, lambda x: aten.sub.Scalar(x, 3), lambda: (ri(4),)),
    Case(aten.rsub.Tensor, lambda x, y: torch.rsub(x, y, alpha=2), lambda: (r(2, 3), r(2, 3))),
    Case(aten.rsub.Scalar, lambda x: 1 - x, lambda: (r(4),)),
    Case(aten.mul.Tensor, lambda x, y: x * y, lambda: (r(2, 3), r(2, 1))),
    Case(aten.mul.Tensor, lambda x, y: (x > 0) * (y > 0), lambda: (r(6), r(6)), id="bool"),
    Case(aten.mul.Scalar, lambda x: aten.mul.Scalar(x, 1.5), lambda: (ri(4),), id="int-float"),
    Case(aten.div.Tensor, lambda x, y: x / y, lambda: (r(2, 3), rp(2, 3))),
    Case(aten.div.Tensor, lambda x, y: x / y, lambda: (ri(6), nz(6)), id="int-true-div"),
    Case(aten.div.Scalar, lambda x: aten.div.Scalar(x, 4), lambda: (ri(4),)),
    Case(
        aten.div.Tensor_mode,
        lambda x, y: torch.div(x, y, rounding_mode="trunc"),
        lambda: (ri(8), nz(8)),
        id="int-trunc",
    ),
    Case(
        aten.div.Tensor_mode,
        lambda x, y: torch.div(x, y, rounding_mode="floor"),
        lambda: (ri(8), nz(8)),
        id="int-floor",
    ),
    Case(
        aten.div.Tensor_mode,
        lambda x, y: torch.div(x, y, rounding_mode="trunc"),
        lambda: (r(8) * 5, r(8)),
        id="float-trunc",
    ),
    Case(
        aten.div.Tensor_mode,
        lambda x, y: torch.div(x, y, rounding_mode="floor"),
        lambda: (r(8) * 5, r(8)),
        id="float-floor",
    ),
    Case(
        aten.div.Scalar_mode,
        lambda x: aten.div.Scalar_mode(x, -3, rounding_mode="floor"),
        lambda: (ri(8),),
        id="int-floor",
    ),
    Case(aten.floor_divide.default, torch.floor_divide, lambda: (ri(8), nz(8)), id="int"),
    Case(aten.floor_divide.Scalar, lambda x: aten.floor_divide.Scalar(x, -3), lambda: (ri(8),)),
    Case(aten.pow.Tensor_Scalar, lambda x: x**2, lambda: (r(4),), id="square"),
    Case(aten.pow.Tensor_Scalar, lambda x: x**1.5, lambda: (rp(4),)),
    Case(aten.pow.Tensor_Tensor, torch.pow, lambda: (rp(2, 3), r(3))),
    Case(aten.pow.Scalar, lambda x: 2**x, lambda: (r(4),)),
    # A float base with an integer exponent (BLOOM's ALiBi slopes): the exponent promoted.
    Case(
        aten.pow.Tensor_Tensor,
        torch.pow,
        lambda: (torch.tensor(0.7), torch.arange(1, 9, dtype=torch.int32)),
        id="int-exponent",
    ),
    Case(aten.pow.Scalar, lambda x: 1.5**x, lambda: (ri(4, high=5),), id="int-exponent"),
    Case(aten.maximum.default, torch.maximum, lambda: (r(2, 3), r(3))),
    Case(aten.maximum.default, lambda x, y: torch.maximum(x > 0, y > 0), lambda: (r(6), r(6)), id="bool"),
    Case(aten.minimum.default, torch.minimum, lambda: (r(2, 3), ri(3)), id="float-int"),
    Case(aten.remainder.Tensor, torch.remainder, lambda: (ri(8), nz(8)), id="int"),
    Case(aten.remainder.Tensor, torch.remainder, lambda: (r(8) * 5, r(8)), id="float"),
    Case(aten.remainder.Scalar, lambda x: x % -3, lambda: (ri(8),)),
    Case(aten.fmod.Tensor, torch.fmod, lambda: (ri(8), nz(8)), id="int"),
    Case(aten.fmod.Tensor, torch.fmod, lambda: (r(8) * 5, r(8)), id="float"),
    Case(aten.fmod.Scalar, lambda x: x.fmod(1.5), lambda: (r(8) * 5,)),
    # -- unary math ----------------------------------------------------------------------------
    Case(aten.neg.default, torch.neg, lambda: (ri(4),)),
    Case(aten.abs.default, torch.abs, lambda: (r(4),)),
    Case(aten.sign.default, torch.sign, lambda: (torch.tensor([-2.0, 0.0, 3.0]),)),
    Case(aten.exp.default, torch.exp, lambda: (r(4),)),
    Case(aten.exp.default, torch.exp, lambda: (ri(4, high=5),), id="int-to-float"),
    Case(aten.log.default, torch.log, lambda: (rp(4),)),
    Case(aten.sqrt.default, torch.sqrt, lambda: (rp(4),)),
    Case(aten.rsqrt.default, torch.rsqrt, lambda: (rp(4),)),
    Case(aten.reciprocal.default, torch.reciprocal, lambda: (rp(4),)),
    Case(aten.erf.default, torch.erf, lambda: (r(4),)),
    Case(aten.sin.default, torch.sin, lambda: (r(4),)),
    Case(aten.cos.default, torch.cos, lambda: (r(4),)),
    Case(aten.tan.default, torch.tan, lambda: (ru(4),)),
    Case(aten.asin.default, torch.asin, lambda: (ru(4),)),
    Case(aten.acos.default, torch.acos, lambda: (ru(4),)),
    Case(aten.atan.default, torch.atan, lambda: (r(4),)),
    Case(aten.sinh.default, torch.sinh, lambda: (r(4),)),
    Case(aten.cosh.default, torch.cosh, lambda: (r(4),)),
    Case(aten.asinh.default, torch.asinh, lambda: (r(4),)),
    Case(aten.acosh.default, torch.acosh, lambda: (rp(4) + 1,)),
    Case(aten.atanh.default, torch.atanh, lambda: (ru(4),)),
    Case(aten.floor.default, torch.floor, lambda: (r(6) * 3,)),
    Case(aten.ceil.default, torch.ceil, lambda: (r(6) * 3,)),
    Case(aten.trunc.default, torch.trunc, lambda: (r(6) * 3,)),
    # Halves round to even in both.
    Case(aten.round.default, torch.round, lambda: (torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.3]),)),
    Case(aten.logical_not.default, torch.logical_not, lambda: (torch.tensor([0.0, 1.5, -2.0]),)),
    Case(aten.logical_not.default, torch.logical_not, lambda: (rb(4),), id="bool"),
    # -- comparisons and logic: Tensor and Scalar, int/float promotion, bools -----------------
    Case(aten.eq.Tensor, torch.eq, lambda: (ri(6, high=2), ri(6, high=2))),
    Case(aten.eq.Scalar, lambda x: x == 2.5, lambda: (torch.tensor([2, 3]),), id="int-float"),
    Case(aten.ne.Tensor, torch.ne, lambda: (ri(6, high=2), ri(6, high=2).float()), id="int-float"),
    Case(aten.ne.Scalar, lambda x: x != 1, lambda: (ri(6, high=2),)),
    Case(aten.lt.Tensor, torch.lt, lambda: (r(2, 3), r(3))),
    Case(aten.lt.Tensor, torch.lt, lambda: (rb(6), rb(6)), id="bool"),
    Case(aten.lt.Scalar, lambda x: x < 0.5, lambda: (ri(6, high=2),), id="int-float"),
    Case(aten.le.Tensor, torch.le, lambda: (ri(6, high=2), ri(6, high=2))),
    Case(aten.le.Scalar, lambda x: x <= 0, lambda: (r(6),)),
    Case(aten.gt.Tensor, torch.gt, lambda: (r(6), ri(6, high=2)), id="float-int"),
    Case(aten.gt.Scalar, lambda x: x > 0, lambda: (r(6),)),
    Case(aten.ge.Tensor, torch.ge, lambda: (ri(6, high=2), ri(6, high=2))),
    Case(aten.ge.Scalar, lambda x: x >= 1, lambda: (ri(6, high=2),)),
    Case(aten.logical_and.default, torch.logical_and, lambda: (ri(6, high=2), r(6)), id="numbers"),
    Case(aten.logical_or.default, torch.logical_or, lambda: (rb(6), ri(6, high=2)), id="mixed"),
    Case(aten.logical_xor.default, torch.logical_xor, lambda: (rb(6), rb(6))),
    Case(aten.where.self, lambda c, x, y: torch.where(c, x, y), lambda: (rb(2, 3), r(2, 3), ri(3)), id="promote"),
    Case(aten.where.self, lambda c, x, y: torch.where(c, x, y), lambda: (rb(2, 3), rb(2, 3), rb(3)), id="bool"),
    Case(aten.masked_fill.Scalar, lambda x: x.masked_fill(x > 0, -1.0), lambda: (r(2, 3),)),
    Case(aten.masked_fill.Scalar, lambda m, x: x.masked_fill(m, True), lambda: (rb(2, 3), rb(2, 3)), id="bool"),
    Case(aten.masked_fill.Scalar, lambda x, m: x.masked_fill(m, 7), lambda: (ri(2, 3), rb(3)), id="int-broadcast"),
    Case(aten.masked_fill.Tensor, lambda x, v: x.masked_fill(x < 0, v), lambda: (r(2, 3), r(()))),
    # -- clamping -----------------------------------------------------------------------------
    Case(aten.clamp.default, lambda x: x.clamp(-0.5, 0.5), lambda: (r(6),)),
    Case(aten.clamp.default, lambda x: x.clamp(max=3), lambda: (ri(6),), id="int-max-only"),
    Case(aten.clamp.Tensor, lambda x, lo, hi: x.clamp(lo, hi), lambda: (r(2, 3), r(3) - 1, r(3) + 1)),
    Case(aten.clamp.Tensor, lambda x, lo: x.clamp(min=lo), lambda: (ri(6), ri(6)), id="int-min-only"),
    Case(aten.clamp_min.default, lambda x: aten.clamp_min.default(x, 0.2), lambda: (r(6),)),
    Case(aten.clamp_max.default, lambda x: aten.clamp_max.default(x, -1), lambda: (ri(6),), id="int"),
    # -- activations and softmax ---------------------------------------------------------------
    Case(aten.relu.default, torch.relu, lambda: (r(2, 8),)),
    Case(aten.relu.default, torch.relu, lambda: (ri(8),), id="int"),
    Case(aten.sigmoid.default, torch.sigmoid, lambda: (r(6),)),
    Case(aten.tanh.default, torch.tanh, lambda: (r(6),)),
    Case(aten.gelu.default, F.gelu, lambda: (r(8),)),
    Case(aten.gelu.default, lambda x: F.gelu(x, approximate="tanh"), lambda: (r(8),), id="tanh"),
    Case(aten.silu.default, F.silu, lambda: (r(8),)),
    Case(aten.hardsigmoid.default, F.hardsigmoid, lambda: (r(8) * 4,)),
    Case(aten.hardswish.default, F.hardswish, lambda: (r(8) * 4,)),
    Case(aten.hardtanh.default, lambda x: F.hardtanh(x, -0.5, 2.0), lambda: (r(8) * 2,)),
    Case(aten.leaky_relu.default, lambda x: F.leaky_relu(x, 0.2), lambda: (r(8),)),
    Case(aten.elu.default, F.selu, lambda: (r(8),), id="selu"),
    Case(aten.elu.default, lambda x: aten.elu.default(x, 1.5, 2.0, 0.5), lambda: (r(8),), id="input-scale"),
    Case(aten._softmax.default, lambda x: torch.softmax(x, -1), lambda: (r(2, 5),)),
    Case(aten._softmax.default, lambda x: torch.softmax(x, 0), lambda: (r(3, 4),), id="dim0"),
    Case(aten._log_softmax.default, lambda x: torch.log_softmax(x, 1), lambda: (r(2, 3, 4),)),
    # -- convolution ---------------------------------------------------------------------------
    Case(aten.convolution.default, torch.nn.Conv1d(2, 4, 3, padding=1), lambda: (r(1, 2, 8),), id="1d"),
    Case(aten.convolution.default, torch.nn.Conv2d(3, 4, 3, stride=2, padding=1), lambda: (r(2, 3, 7, 7),), id="2d"),
    Case(
        aten.convolution.default,
        torch.nn.Conv2d(4, 6, (3, 2), groups=2, dilation=2, bias=False),
        lambda: (r(1, 4, 8, 8),),
        id="grouped-dilated-nobias",
    ),
    Case(
        aten.convolution.default,
        lambda x, w: F.conv2d(x, w, padding="same"),
        lambda: (r(1, 2, 6, 6), r(3, 2, 3, 3)),
        id="weight-input-same",
    ),
    Case(aten.convolution.default, torch.nn.Conv3d(2, 2, 2), lambda: (r(1, 2, 4, 4, 4),), id="3d"),
    Case(
        aten.convolution.default,
        torch.nn.ConvTranspose2d(2, 4, 3, stride=2, padding=1, output_padding=1),
        lambda: (r(1, 2, 4, 4),),
        id="transposed-output-padding",
    ),
    Case(
        aten.convolution.default,
        torch.nn.ConvTranspose1d(4, 2, 3, groups=2, dilation=2),
        lambda: (r(1, 4, 5),),
        id="transposed-grouped-dilated",
    ),
    # -- pooling -------------------------------------------------------------------------------
    Case(aten.max_pool2d_with_indices.default, lambda x: F.max_pool2d(x, 2), lambda: (r(1, 2, 4, 4),)),
    # ceil_mode where torch drops the last window (it would start in the padding).
    Case(
        aten.max_pool2d_with_indices.default,
        lambda x: F.max_pool2d(x, 2, 2, 1, ceil_mode=True),
        lambda: (r(1, 2, 5, 5),),
        id="ceil-window-in-padding",
    ),
    Case(aten.max_pool2d_with_indices.default, lambda x: F.max_pool1d(x, 2), lambda: (r(1, 2, 6),), id="1d"),
    Case(aten.max_pool2d_with_indices.default, lambda x: F.max_pool2d(x, 2), lambda: (r(2, 4, 4),), id="unbatched"),
    Case(aten.avg_pool2d.default, lambda x: F.avg_pool2d(x, 2), lambda: (r(1, 2, 4, 4),)),
    Case(
        aten.avg_pool2d.default,
        lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
        lambda: (r(1, 2, 6, 6),),
        id="pad-not-counted",
    ),
    Case(
        aten.avg_pool2d.default, lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), lambda: (r(1, 2, 6, 6),), id="ceil"
    ),
    Case(
        aten.avg_pool2d.default,
        lambda x: F.avg_pool2d(x, 2, 2, 1, ceil_mode=True, count_include_pad=False),
        lambda: (r(1, 2, 5, 5),),
        id="ceil-window-in-padding",
    ),
    Case(
        aten._adaptive_avg_pool2d.default,
        lambda x: aten._adaptive_avg_pool2d.default(x, [1, 1]),
        lambda: (r(1, 2, 5, 3),),
        id="1x1",
    ),
    Case(
        aten._adaptive_avg_pool2d.default,
        lambda x: F.adaptive_avg_pool2d(x, (1, 3)),
        lambda: (r(1, 2, 4, 6),),
        id="even-windows",
    ),
    Case(
        aten._adaptive_avg_pool2d.default, lambda x: F.adaptive_avg_pool2d(x, 2), lambda: (r(2, 4, 6),), id="unbatched"
    ),
    # Uneven windows (the output size does not divide the input): overlapping windows of two lengths.
    Case(
        aten._adaptive_avg_pool2d.default,
        lambda x: F.adaptive_avg_pool2d(x, (3, 4)),
        lambda: (r(2, 3, 7, 5),),
        id="uneven-windows",
    ),
    Case(
        aten.adaptive_avg_pool1d.default,
        lambda x: F.adaptive_avg_pool1d(x, 3),
        lambda: (r(1, 2, 7),),
        id="uneven-windows",
    ),
    Case(
        aten._adaptive_avg_pool3d.default,
        lambda x: F.adaptive_avg_pool3d(x, (2, 3, 3)),
        lambda: (r(1, 2, 3, 4, 6),),
        id="uneven-windows",
    ),
    Case(
        aten.adaptive_max_pool2d.default,
        lambda x: F.adaptive_max_pool2d(x, (3, 2)),
        lambda: (r(2, 3, 5, 5),),
        id="uneven-windows",
    ),
    Case(
        aten.adaptive_max_pool1d.default,
        lambda x: F.adaptive_max_pool1d(x, 4),
        lambda: (r(2, 6),),
        id="uneven-windows-unbatched",
    ),
    # An inf (avg) or NaN (max) reaches only the windows that hold it.
    Case(
        aten._adaptive_avg_pool2d.default,
        lambda x: F.adaptive_avg_pool2d(x, (2, 3)),
        lambda: (r(1, 2, 5, 5).index_fill(3, torch.tensor([0]), float("inf")),),
        id="uneven-windows-inf",
    ),
    Case(
        aten.adaptive_max_pool2d.default,
        lambda x: torch.nan_to_num(F.adaptive_max_pool2d(x, (2, 3)), nan=7.0),
        lambda: (r(1, 2, 5, 5).index_fill(3, torch.tensor([4]), float("nan")),),
        id="uneven-windows-nan",
    ),
    # -- normalization -------------------------------------------------------------------------
    Case(aten._native_batch_norm_legit_no_training.default, torch.nn.BatchNorm2d(3), lambda: (r(2, 3, 4, 4),)),
    Case(
        aten._native_batch_norm_legit_no_training.default,
        torch.nn.BatchNorm1d(4, affine=False),
        lambda: (r(3, 4),),
        id="1d-no-affine",
    ),
    # Statistics and affine parameters as graph inputs: the formula, not BatchNormalization.
    Case(
        aten._native_batch_norm_legit_no_training.default,
        lambda x, m, v, w, c: F.batch_norm(x, m, v, w, c, training=False, eps=1e-3),
        lambda: (r(2, 3, 4, 4), r(3), rp(3), r(3), r(3)),
        id="input-statistics",
    ),
    Case(
        aten._native_batch_norm_legit_no_training.default,
        lambda x, m, v: F.batch_norm(x, m * 2, v + 1),
        lambda: (r(3, 4), r(4), rp(4)),
        id="computed-statistics-no-affine",
    ),
    Case(aten.native_layer_norm.default, torch.nn.LayerNorm([3, 4]), lambda: (r(2, 3, 4),)),
    Case(aten.native_layer_norm.default, lambda x: F.layer_norm(x, (4,)), lambda: (r(2, 4),), id="no-weight"),
    Case(aten.native_layer_norm.default, torch.nn.LayerNorm(4, bias=False), lambda: (r(2, 4),), id="no-bias"),
    # -- matrix products -----------------------------------------------------------------------
    Case(aten.addmm.default, torch.nn.Linear(4, 3), lambda: (r(2, 4),)),
    Case(
        aten.addmm.default,
        lambda b, x, y: torch.addmm(b, x, y, beta=0.5, alpha=2),
        lambda: (r(3, 1), r(3, 4), r(4, 5)),
        id="alpha-beta",
    ),
    Case(aten.mm.default, lambda x, y: aten.mm.default(x, y), lambda: (r(3, 4), r(4, 5))),
    Case(aten.bmm.default, lambda x, y: aten.bmm.default(x, y), lambda: (r(2, 3, 4), r(2, 4, 5))),
    Case(aten.matmul.default, torch.matmul, lambda: (r(2, 3, 4), r(4, 5))),
    # -- views and layout (no compute of their own: each case adds one) ------------------------
    Case(aten.view.default, lambda x: x.view(3, -1) * 2, lambda: (r(2, 6),)),
    Case(aten._unsafe_view.default, lambda x: x.t().reshape(-1) * 2, lambda: (r(2, 3),)),
    Case(aten.permute.default, lambda x: x.permute(2, 0, -2) * 2, lambda: (r(2, 3, 4),)),
    Case(aten.transpose.int, lambda x: x.transpose(-1, 0) * 2, lambda: (r(2, 3, 4),)),
    Case(aten.t.default, lambda x: x.t() * 2, lambda: (r(2, 3),)),
    Case(aten.expand.default, lambda x: x.expand(2, -1, 4) * 2, lambda: (r(3, 1),)),
    Case(aten.unsqueeze.default, lambda x: x.unsqueeze(-1) * 2, lambda: (r(2, 3),)),
    Case(aten.squeeze.default, lambda x: x.squeeze() * 2, lambda: (r(1, 3, 1),)),
    Case(aten.squeeze.dim, lambda x: x.squeeze(-1) * 2, lambda: (r(3, 1),)),
    Case(aten.squeeze.dim, lambda x: x.squeeze(0) * 2, lambda: (r(3, 2),), id="not-1"),
    Case(aten.squeeze.dim, lambda x: x.sum().squeeze(0) * 2, lambda: (r(3),), id="0d"),
    Case(aten.squeeze.dims, lambda x: x.squeeze((0, 1, -1)) * 2, lambda: (r(1, 3, 1),), id="with-not-1"),
    Case(aten.slice.Tensor, lambda x: x[1:, ::2] * 2, lambda: (r(4, 6),)),
    Case(
        aten.slice.Tensor,
        lambda x: aten.slice.Tensor(x, -1, -100, 100, 3) * 2,
        lambda: (r(2, 7),),
        id="negative-out-of-range-step",
    ),
    Case(aten.select.int, lambda x: x[:, -1] * 2, lambda: (r(4, 6),), id="negative"),
    Case(aten.split.Tensor, lambda x: [p * 2 for p in x.split(2, -1)], lambda: (r(2, 5),)),
    Case(aten.split.Tensor, lambda x: x.split(5, -1)[0] * 2, lambda: (r(2, 5),), id="one-piece"),
    Case(aten.split_with_sizes.default, lambda x: [p * 2 for p in x.split([1, 3])], lambda: (r(4, 2),)),
    Case(aten.cat.default, lambda x, y: torch.cat([x, y], -1), lambda: (r(2, 3), r(2, 2))),
    Case(aten.cat.default, lambda x, y: torch.cat([x, y]), lambda: (ri(2, 3), r(1, 3)), id="promote"),
    Case(aten.clone.default, lambda x: x.clone() * 2, lambda: (r(3),)),
    Case(aten.alias.default, lambda x: aten.alias.default(x) * 2, lambda: (r(3),)),
    Case(aten.detach.default, lambda x: x.detach() * 2, lambda: (r(3),)),
    # -- casts ---------------------------------------------------------------------------------
    Case(
        aten._to_copy.default,
        lambda x: aten._to_copy.default(x, dtype=torch.int32),
        lambda: (r(6) * 5,),
        id="float-to-int",
    ),
    Case(
        aten._to_copy.default,
        lambda x: aten._to_copy.default(x, dtype=torch.float32) / 3,
        lambda: (ri(6),),
        id="int-to-float",
    ),
    Case(
        aten._to_copy.default,
        lambda x: aten._to_copy.default(x, dtype=torch.bool),
        lambda: (ri(6, high=2),),
        id="to-bool",
    ),
    # -- reductions: dims, keepdim, all dims ---------------------------------------------------
    Case(aten.mean.dim, lambda x: x.mean(-1, keepdim=True), lambda: (r(2, 3, 4),)),
    Case(aten.mean.dim, lambda x: aten.mean.dim(x, None), lambda: (r(2, 3),), id="none"),
    Case(aten.mean.default, torch.mean, lambda: (r(2, 3),)),
    Case(aten.sum.dim_IntList, lambda x: x.sum(1), lambda: (r(2, 3, 4),)),
    Case(aten.sum.dim_IntList, lambda x: x.sum((0, -1), keepdim=True), lambda: (ri(2, 3, 4),), id="int-keepdim"),
    Case(aten.sum.dim_IntList, lambda x: (x > 0).sum(0), lambda: (r(3, 4),), id="bool-count"),
    Case(aten.sum.default, torch.sum, lambda: (ri(2, 3),), id="int"),
    Case(aten.amax.default, lambda x: x.amax(1), lambda: (r(2, 3, 4),)),
    Case(aten.amax.default, lambda x: x.amax((), keepdim=True), lambda: (ri(2, 3),), id="int-all-keepdim"),
    Case(aten.amax.default, lambda x: x.amax(0), lambda: (rb(3, 4),), id="bool"),
    Case(aten.amin.default, lambda x: x.amin((0, -1)), lambda: (r(2, 3, 4),)),
    Case(aten.any.default, torch.any, lambda: (torch.tensor([0.0, 0.0, 2.0]),)),
    Case(aten.any.dim, lambda x: x.any(1), lambda: (rb(3, 4),)),
    Case(aten.any.dims, lambda x: x.any((0, -1), keepdim=True), lambda: (ri(2, 3, 4, high=1),), id="int-keepdim"),
    Case(aten.all.default, torch.all, lambda: (rb(3, 4),)),
    Case(aten.all.dim, lambda x: x.all(-1, keepdim=True), lambda: (ri(3, 2, high=2),)),
    Case(aten.all.dims, lambda x: x.all((0, 1)), lambda: (r(2, 3),), id="float"),
    # -- gathers -------------------------------------------------------------------------------
    Case(aten.embedding.default, torch.nn.Embedding(10, 4), lambda: (torch.tensor([[1, 9], [0, 1]]),)),
    Case(
        aten.embedding.default,
        lambda w, i: F.embedding(i, w),
        lambda: (r(5, 3), torch.tensor([4, 0])),
        id="weight-input",
    ),
    Case(aten.index_select.default, lambda x, i: x.index_select(-1, i), lambda: (r(3, 5), torch.tensor([4, 0, 4]))),
    Case(
        aten.gather.default,
        lambda x, i: x.gather(1, i),
        lambda: (r(3, 5), torch.tensor([[0, 4, 4], [2, 1, 0]])),
        id="smaller-index",
    ),
    # -- creation: constant arguments, or shaped like an input ---------------------------------
    Case(aten.arange.default, lambda x: x + torch.arange(4), lambda: (r(4),)),
    Case(aten.arange.start, lambda x: x + torch.arange(-2, 2), lambda: (ri(4),)),
    Case(aten.arange.start_step, lambda x: x + torch.arange(1.0, -1.0, -0.5), lambda: (r(4),)),
    Case(aten.scalar_tensor.default, lambda x: x * torch.scalar_tensor(3.0), lambda: (r(4),)),
    Case(aten.full.default, lambda x: x + torch.full((2, 1), 7, dtype=torch.int32), lambda: (ri(3),)),
    Case(aten.zeros.default, lambda x: torch.maximum(x, torch.zeros(3)), lambda: (r(3),)),
    Case(aten.ones.default, lambda x: x + torch.ones(2, 3, dtype=torch.int64), lambda: (ri(3),)),
    # empty's contents are unspecified: fill it, so the case checks it lowers with the right shape.
    Case(aten.empty.memory_format, lambda x: x + torch.empty(2, 3).fill_(1.5), lambda: (r(3),)),
    Case(aten.empty_like.default, lambda x: x + torch.empty_like(x).fill_(1.5), lambda: (r(3),)),
    Case(aten.full_like.default, lambda x: x * torch.full_like(x, 2.5), lambda: (r(2, 3),)),
    Case(aten.zeros_like.default, lambda x: torch.maximum(x, torch.zeros_like(x)), lambda: (ri(3),)),
    Case(aten.ones_like.default, lambda x: x + torch.ones_like(x, dtype=torch.bool), lambda: (r(3),), id="dtype"),
    # -- more elementwise math (math_functions.py) ----------------------------------------------
    Case(aten.log2.default, torch.log2, lambda: (rp(4),)),
    Case(aten.log2.default, torch.log2, lambda: (torch.tensor([1, 2, 8]),), id="int"),
    Case(aten.log10.default, torch.log10, lambda: (rp(4),)),
    Case(aten.log1p.default, torch.log1p, lambda: (rp(4) - 0.1,)),
    Case(aten.expm1.default, torch.expm1, lambda: (r(4),)),
    Case(aten.exp2.default, torch.exp2, lambda: (r(4),)),
    Case(aten.erfc.default, torch.erfc, lambda: (r(4),)),
    Case(aten.square.default, torch.square, lambda: (r(4),)),
    Case(aten.square.default, torch.square, lambda: (ri(4),), id="int"),
    Case(aten.frac.default, torch.frac, lambda: (r(6) * 3,)),
    Case(aten.deg2rad.default, torch.deg2rad, lambda: (r(4) * 90,)),
    Case(aten.rad2deg.default, torch.rad2deg, lambda: (r(4),)),
    Case(aten.sinc.default, torch.sinc, lambda: (torch.tensor([0.0, 0.5, -1.5, 2.25]),)),
    Case(aten.signbit.default, torch.signbit, lambda: (torch.tensor([-1.0, -0.0, 0.0, 2.0]),)),
    Case(aten.signbit.default, torch.signbit, lambda: (ri(4),), id="int"),
    Case(aten.isnan.default, torch.isnan, lambda: (torch.tensor([1.0, float("nan"), float("inf")]),)),
    Case(aten.isnan.default, lambda x: torch.isnan(x) | (x > 0), lambda: (ri(4),), id="int"),
    Case(aten.isinf.default, torch.isinf, lambda: (torch.tensor([1.0, float("nan"), float("inf"), -float("inf")]),)),
    Case(aten.isposinf.default, torch.isposinf, lambda: (torch.tensor([1.0, float("inf"), -float("inf")]),)),
    Case(aten.isneginf.default, torch.isneginf, lambda: (torch.tensor([1.0, float("inf"), -float("inf")]),)),
    Case(aten.isfinite.default, torch.isfinite, lambda: (torch.tensor([1.0, float("nan"), float("inf")]),)),
    Case(
        aten.nan_to_num.default,
        torch.nan_to_num,
        lambda: (torch.tensor([1.0, float("nan"), float("inf"), -float("inf")]),),
    ),
    Case(
        aten.nan_to_num.default,
        lambda x: torch.nan_to_num(x, 1.0, 2.0, -3.0),
        lambda: (torch.tensor([1.0, float("nan"), float("inf"), -float("inf")]),),
        id="values",
    ),
    Case(
        aten.atan2.default,
        torch.atan2,
        lambda: (
            torch.tensor([1.0, -1.0, 1.0, -1.0, 0.0, 2.0, -2.0, 0.0]),
            torch.tensor([2.0, 2.0, -2.0, -2.0, -1.0, 0.0, -0.0, 0.0]),
        ),
    ),
    Case(aten.hypot.default, torch.hypot, lambda: (r(2, 3), r(3))),
    Case(aten.copysign.Tensor, torch.copysign, lambda: (r(4), torch.tensor([1.0, -1.0, -0.0, 0.0]))),
    Case(aten.copysign.Scalar, lambda x: torch.copysign(x, -0.0), lambda: (r(4),)),
    Case(
        aten.logaddexp.default,
        torch.logaddexp,
        lambda: (
            torch.tensor([1.0, -3.0, float("inf"), -float("inf"), 0.5]),
            torch.tensor([2.0, 50.0, float("inf"), -float("inf"), 0.5]),
        ),
    ),
    Case(aten.logaddexp2.default, torch.logaddexp2, lambda: (r(4), r(4))),
    # assert_close fails on NaN == NaN: map NaN to a number (y NaN makes the result NaN, also for x = 0).
    Case(
        aten.xlogy.Tensor,
        lambda x, y: torch.nan_to_num(torch.xlogy(x, y), nan=7.0),
        lambda: (torch.tensor([0.0, 1.0, 2.0, 0.0]), torch.tensor([0.0, 2.0, float("nan"), float("nan")])),
    ),
    Case(aten.xlogy.Scalar_Other, lambda x: torch.xlogy(x, 3.0), lambda: (torch.tensor([0.0, 1.5]),)),
    Case(
        aten.heaviside.default,
        torch.heaviside,
        lambda: (torch.tensor([-1.0, 0.0, 2.0, float("nan")]), torch.tensor([0.5])),
    ),
    Case(aten.lerp.Scalar, lambda x, y: torch.lerp(x, y, 0.3), lambda: (r(4), r(4))),
    Case(aten.lerp.Scalar, lambda x, y: torch.lerp(x, y, 0.8), lambda: (r(4), r(4)), id="far"),
    Case(aten.lerp.Tensor, torch.lerp, lambda: (r(2, 3), r(3), torch.tensor([0.0, 0.4, 1.0]))),
    Case(aten.addcmul.default, lambda x, a, c: torch.addcmul(x, a, c, value=0.5), lambda: (r(2, 3), r(3), r(2, 3))),
    Case(aten.addcmul.default, torch.addcmul, lambda: (ri(4), ri(4), ri(4)), id="int"),
    Case(aten.addcdiv.default, lambda x, a, c: torch.addcdiv(x, a, c, value=2), lambda: (r(2, 3), r(3), rp(2, 3))),
    Case(
        aten.fmax.default,
        torch.fmax,
        lambda: (torch.tensor([1.0, float("nan"), 2.0]), torch.tensor([float("nan"), 3.0, 1.0])),
    ),
    Case(
        aten.fmin.default,
        torch.fmin,
        lambda: (torch.tensor([1.0, float("nan"), 2.0]), torch.tensor([float("nan"), 3.0, 1.0])),
    ),
    Case(aten.fmin.default, torch.fmin, lambda: (ri(4), ri(4)), id="int"),
    Case(aten.where.ScalarOther, lambda x: torch.where(x > 0, x, 0.5), lambda: (r(2, 3),)),
    Case(aten.where.ScalarSelf, lambda x: torch.where(x > 0, -1, x), lambda: (ri(6),), id="int"),
    Case(aten.where.Scalar, lambda x: torch.where(x > 0, 1.0, 0.0), lambda: (r(2, 3),)),
    Case(aten.clamp_min.Tensor, torch.clamp_min, lambda: (r(2, 3), r(3))),
    Case(aten.clamp_max.Tensor, torch.clamp_max, lambda: (ri(6), ri(6)), id="int"),
    # -- more activations (activation.py) ------------------------------------------------------
    Case(aten.softplus.default, F.softplus, lambda: (r(8) * 30,)),
    Case(aten.softplus.default, lambda x: F.softplus(x, 2.0, 5.0), lambda: (r(8) * 5,), id="beta-threshold"),
    Case(aten.mish.default, F.mish, lambda: (r(8) * 5,)),
    Case(aten.log_sigmoid.default, F.logsigmoid, lambda: (r(8) * 50,)),
    Case(aten.log_sigmoid_forward.default, lambda x: aten.log_sigmoid_forward.default(x)[0], lambda: (r(8) * 50,)),
    Case(aten.celu.default, lambda x: F.celu(x, 0.5), lambda: (r(8),)),
    Case(aten.relu6.default, F.relu6, lambda: (r(8) * 8,)),
    Case(aten.prelu.default, torch.nn.PReLU(3), lambda: (r(2, 3, 4),)),
    Case(aten.prelu.default, lambda x, w: F.prelu(x, w), lambda: (r(2, 3), torch.tensor([0.2])), id="one-slope"),
    Case(aten._prelu_kernel.default, lambda x, w: aten._prelu_kernel.default(x, w), lambda: (r(2, 3), r(3))),
    Case(aten.rrelu.default, F.rrelu, lambda: (r(8),)),
    Case(aten.glu.default, F.glu, lambda: (r(2, 6),)),
    Case(aten.glu.default, lambda x: F.glu(x, 0), lambda: (r(4, 3),), id="dim0"),
    Case(aten.logit.default, torch.logit, lambda: (torch.rand(6) * 0.9 + 0.05,)),
    Case(aten.logit.default, lambda x: torch.logit(x, 0.1), lambda: (torch.rand(6),), id="eps"),
    Case(aten.threshold.default, lambda x: F.threshold(x, 0.1, -2.0), lambda: (r(8),)),
    # -- bitwise on bools, shifts by constants (bitwise.py) -------------------------------------
    Case(aten.bitwise_and.Tensor, lambda x, y: (x > 0) & (y > 0), lambda: (r(6), r(6))),
    Case(aten.bitwise_and.Scalar, lambda x: aten.bitwise_and.Scalar(x > 0, True), lambda: (r(6),)),
    Case(aten.bitwise_or.Tensor, lambda x, y: (x > 0) | (y > 0), lambda: (r(6), r(6))),
    Case(aten.bitwise_or.Scalar, lambda x: aten.bitwise_or.Scalar(x > 0, False), lambda: (r(6),)),
    Case(aten.bitwise_xor.Tensor, lambda x, y: (x > 0) ^ (y > 0), lambda: (r(6), r(6))),
    Case(aten.bitwise_xor.Scalar, lambda x: aten.bitwise_xor.Scalar(x > 0, True), lambda: (r(6),)),
    Case(aten.bitwise_not.default, lambda x: ~(x > 0), lambda: (r(6),)),
    Case(aten.__lshift__.Scalar, lambda x: x << 3, lambda: (ri(6),)),
    Case(aten.__lshift__.Scalar, lambda x: x << 31, lambda: (ri(6).int(),), id="int32-sign-bit"),
    Case(aten.__rshift__.Scalar, lambda x: x >> 2, lambda: (ri(8, high=20),)),
    Case(aten.__rshift__.Scalar, lambda x: x >> 63, lambda: (ri(8),), id="sign"),
    Case(aten.bitwise_left_shift.Tensor_Scalar, lambda x: torch.bitwise_left_shift(x, 1), lambda: (ri(6),)),
    Case(aten.bitwise_right_shift.Tensor_Scalar, lambda x: torch.bitwise_right_shift(x, 1), lambda: (ri(6),)),
    # -- more reductions (reduce.py) -----------------------------------------------------------
    Case(aten.prod.default, torch.prod, lambda: (rp(2, 3) + 0.5,)),
    Case(aten.prod.default, torch.prod, lambda: (rb(4),), id="bool"),
    Case(aten.prod.dim_int, lambda x: x.prod(-1, keepdim=True), lambda: (ri(2, 3, high=3),), id="int-keepdim"),
    Case(aten.var.correction, lambda x: torch.var(x, (0, 2), correction=0, keepdim=True), lambda: (r(2, 3, 4),)),
    Case(aten.var.correction, torch.var, lambda: (r(3, 4),), id="all"),
    Case(aten.var.dim, lambda x: x.var(1), lambda: (r(2, 5),)),
    Case(aten.std.correction, torch.std, lambda: (r(3, 4),)),
    Case(aten.std.correction, lambda x: torch.std(x, -1, correction=2), lambda: (r(3, 4),), id="correction-2"),
    Case(aten.std.dim, lambda x: x.std(0, unbiased=False, keepdim=True), lambda: (r(4, 3),)),
    Case(aten.var_mean.correction, lambda x: torch.var_mean(x, 1), lambda: (r(3, 4),)),
    Case(aten.std_mean.correction, lambda x: torch.std_mean(x, (0, 1), keepdim=True), lambda: (r(3, 4, 2),)),
    Case(aten.argmax.default, lambda x: x.argmax(1), lambda: (r(3, 4),)),
    Case(aten.argmax.default, lambda x: x.argmax(keepdim=True), lambda: (r(3, 4),), id="flat-keepdim"),
    Case(aten.argmin.default, lambda x: x.argmin(-1, keepdim=True), lambda: (r(3, 4),)),
    Case(aten.argmin.default, torch.argmin, lambda: (r(3, 4),), id="flat"),
    Case(aten.max.dim, lambda x: x.max(1), lambda: (r(3, 4),)),
    Case(aten.max.dim, lambda x: x.max(0, keepdim=True)[0], lambda: (r(3, 4),), id="values-keepdim"),
    Case(aten.min.dim, lambda x: x.min(-1), lambda: (r(2, 3, 4),)),
    Case(aten.max.default, torch.max, lambda: (r(3, 4),)),
    Case(aten.max.default, torch.max, lambda: (rb(3, 4),), id="bool"),
    Case(aten.min.default, torch.min, lambda: (ri(3, 4),), id="int"),
    Case(aten.aminmax.default, torch.aminmax, lambda: (r(3, 4),)),
    Case(aten.aminmax.default, lambda x: torch.aminmax(x, dim=1, keepdim=True), lambda: (ri(3, 4),), id="int-dim"),
    Case(aten.logsumexp.default, lambda x: torch.logsumexp(x, 1), lambda: (r(3, 4) * 50,)),
    Case(
        aten.logsumexp.default,
        lambda x: torch.logsumexp(x, (0, 1), keepdim=True),
        lambda: (torch.tensor([[-float("inf"), 1.0], [2.0, 3.0]]),),
        id="inf-keepdim",
    ),
    Case(aten.logsumexp.default, lambda x: torch.logsumexp(x, -1), lambda: (ri(2, 3),), id="int"),
    Case(aten.cumsum.default, lambda x: x.cumsum(1), lambda: (r(3, 4),)),
    Case(aten.cumsum.default, lambda x: x.cumsum(0, dtype=torch.float32), lambda: (ri(5),), id="int-to-float"),
    # RoBERTa's position ids: an int cumsum of a 0/1 mask, exact in float32.
    Case(aten.cumsum.default, lambda x: x.ne(1).int().cumsum(1), lambda: (ri(2, 40, high=3),), id="int-mask"),
    Case(aten.cumsum.default, lambda x: x.cumsum(-1), lambda: (rb(3, 50),), id="bool"),
    # transformers' expert offsets: histc counts, summed as int32 (bounded by the count of ids).
    Case(
        aten.cumsum.default,
        lambda x: torch.histc(x.float(), 4, 0, 3).cumsum(0, dtype=torch.int32),
        lambda: (torch.randint(0, 4, (12,)),),
        id="histc-counts",
    ),
    # -- histograms, grouped matmuls (histogram.py, grouped_mm.py) -----------------------------
    Case(aten.histc.default, lambda x: torch.histc(x, bins=5, min=-1, max=1), lambda: (r(3, 20),)),
    Case(
        aten.histc.default,
        lambda x: torch.histc(x, bins=4, min=0, max=3),
        lambda: (torch.tensor([0.0, 3.0, 3.0, 1.0, 2.0, -1.0, 4.0, float("nan")]),),
        id="edges-outside-nan",
    ),
    # Rows 5 and 6 are past the last offset (0); group 1 is empty.
    Case(
        torch.ops.transformers.grouped_mm_fallback.default,
        torch.ops.transformers.grouped_mm_fallback,
        lambda: (r(7, 4), r(3, 4, 5), torch.tensor([2, 2, 5], dtype=torch.int32)),
    ),
    # More groups than grouped_mm.ROWS_UP_TO_GROUPS: each row's weight gathered.
    Case(
        torch.ops.transformers.grouped_mm_fallback.default,
        torch.ops.transformers.grouped_mm_fallback,
        lambda: (r(30, 4), r(20, 4, 3), torch.randint(0, 31, (20,)).sort().values),
        id="many-groups",
    ),
    # bfloat16: what torch.export takes it in on CPU. No row past the last offset: torch leaves
    # those uninitialized.
    Case(
        aten._grouped_mm.default,
        lambda x, w, o: torch._grouped_mm(x, w, offs=o),
        lambda: (
            r(6, 8, dtype=torch.bfloat16),
            r(3, 8, 8, dtype=torch.bfloat16),
            torch.tensor([1, 4, 6], dtype=torch.int32),
        ),
        trt_version="latest",
        rtol=2e-2,
        atol=2e-2,
    ),
    Case(aten.linalg_vector_norm.default, lambda x: x.norm(dim=-1), lambda: (r(3, 4),)),
    Case(
        aten.linalg_vector_norm.default,
        lambda x: torch.linalg.vector_norm(x, 1, (0, 1), keepdim=True),
        lambda: (r(3, 4),),
        id="l1",
    ),
    Case(
        aten.linalg_vector_norm.default,
        lambda x: torch.linalg.vector_norm(x, float("inf")),
        lambda: (r(3, 4),),
        id="inf",
    ),
    Case(
        aten.linalg_vector_norm.default,
        lambda x: torch.linalg.vector_norm(x, -float("inf"), 0),
        lambda: (r(3, 4),),
        id="-inf",
    ),
    Case(
        aten.linalg_vector_norm.default,
        lambda x: torch.linalg.vector_norm(x, 0, 1),
        lambda: (torch.tensor([[0.0, 1.0], [2.0, 3.0]]),),
        id="0",
    ),
    Case(aten.linalg_vector_norm.default, lambda x: torch.linalg.vector_norm(x, 3, 1), lambda: (r(3, 4),), id="3"),
    Case(aten.nansum.default, torch.nansum, lambda: (torch.tensor([1.0, float("nan"), 2.0]),)),
    Case(aten.nansum.default, lambda x: torch.nansum(x, 1), lambda: (ri(2, 3),), id="int-dim"),
    # -- sorting (sort.py) ---------------------------------------------------------------------
    Case(aten.topk.default, lambda x: x.topk(2), lambda: (r(3, 5),)),
    Case(aten.topk.default, lambda x: x.topk(3, 0, largest=False), lambda: (r(4, 2),), id="smallest-dim0"),
    Case(aten.sort.default, lambda x: aten.sort.default(x, 0, True), lambda: (r(4, 3),)),
    Case(aten.sort.stable, lambda x: torch.sort(x, stable=False), lambda: (r(3, 5),)),
    Case(aten.argsort.default, lambda x: torch.argsort(x, 0, descending=True), lambda: (r(4, 3),)),
    Case(aten.argsort.stable, lambda x: torch.argsort(x, stable=False), lambda: (r(3, 5),)),
    # -- layout: flip, roll, stack, unbind, repeat, shuffles, triangles (layout.py) -------------
    Case(aten.flip.default, lambda x: x.flip(0, -1), lambda: (r(2, 3, 4),)),
    Case(aten.flip.default, lambda x: x.flip(0), lambda: (rb(3),), id="bool"),
    Case(aten.roll.default, lambda x: x.roll(1, -1), lambda: (r(2, 5),)),
    Case(aten.roll.default, lambda x: x.roll((-2, 7), (0, 1)), lambda: (ri(3, 4),), id="two-dims-wrap"),
    Case(aten.roll.default, lambda x: x.roll(4), lambda: (r(2, 3),), id="flat"),
    Case(aten.roll.default, lambda x: x.roll(2), lambda: (r(0, 0, 0),), id="flat-empty"),
    Case(aten.stack.default, lambda x, y: torch.stack([x, y], 1), lambda: (r(2, 3), r(2, 3))),
    Case(aten.stack.default, lambda x, y: torch.stack([x, y], -1), lambda: (ri(2), ri(2)), id="int-last"),
    Case(aten.unbind.int, lambda x: [t * 2 for t in x.unbind(1)], lambda: (r(2, 3, 4),)),
    Case(aten.unbind.int, lambda x: x.unbind(0)[0] * 2, lambda: (r(1, 3),), id="one"),
    Case(aten.repeat.default, lambda x: x.repeat(2, 1, 3), lambda: (r(2, 3),)),
    Case(aten.repeat.default, lambda x: x.repeat(2), lambda: (rb(3),), id="bool"),
    Case(aten.tile.default, lambda x: x.tile(2), lambda: (r(2, 3),)),
    Case(aten.tile.default, lambda x: x.tile((2, 1, 2)), lambda: (ri(3),), id="more-dims"),
    Case(aten.pixel_shuffle.default, lambda x: F.pixel_shuffle(x, 2), lambda: (r(1, 8, 2, 3),)),
    Case(aten.pixel_unshuffle.default, lambda x: F.pixel_unshuffle(x, 2), lambda: (r(2, 3, 4, 6),)),
    Case(aten.channel_shuffle.default, lambda x: F.channel_shuffle(x, 2), lambda: (r(2, 6, 3, 2),)),
    Case(
        aten.native_channel_shuffle.default, lambda x: aten.native_channel_shuffle.default(x, 3), lambda: (r(1, 6, 4),)
    ),
    Case(aten.triu.default, lambda x: x.triu(1), lambda: (r(3, 4),)),
    Case(aten.triu.default, lambda x: x.triu(-1), lambda: (ri(2, 3, 3),), id="int-batched"),
    Case(aten.tril.default, torch.tril, lambda: (r(4, 3),)),
    Case(aten.tril.default, lambda x: x.tril(1), lambda: (rb(3, 3),), id="bool"),
    Case(aten.hstack.default, lambda x, y: torch.hstack([x, y]), lambda: (r(2, 3), r(2, 1))),
    Case(aten.hstack.default, lambda x, y: torch.hstack([x, y]), lambda: (r(2), ri(3)), id="1d-promote"),
    Case(aten.vstack.default, lambda x, y: torch.vstack([x, y]), lambda: (r(3), r(2, 3))),
    # -- more creation (creation.py) -----------------------------------------------------------
    Case(aten.new_zeros.default, lambda x: x + x.new_zeros(2, 3), lambda: (r(3),)),
    Case(aten.new_ones.default, lambda x: x + x.new_ones((2, 1), dtype=torch.int32), lambda: (ri(3),)),
    Case(aten.new_full.default, lambda x: x * x.new_full((3,), 2.5), lambda: (r(2, 3),)),
    Case(aten.new_empty.default, lambda x: x + x.new_empty((2, 3)).fill_(1.0), lambda: (r(3),)),
    Case(aten.empty_strided.default, lambda x: x + torch.empty_strided((2, 3), (3, 1)).fill_(1.0), lambda: (r(3),)),
    Case(aten.fill.Scalar, lambda x: x.clone().fill_(2.0) * x, lambda: (r(2, 3),)),
    Case(aten.fill.Tensor, lambda x, v: x.clone().fill_(v), lambda: (ri(2, 3), r(())), id="cast"),
    Case(aten.linspace.default, lambda x: x + torch.linspace(0, 1, 6), lambda: (r(6),)),
    Case(
        aten.linspace.Tensor_Tensor,
        lambda s, e: torch.linspace(s, e, 51),
        lambda: (torch.tensor(-83.0), torch.tensor(22.0)),
    ),
    Case(aten.linspace.Tensor_Scalar, lambda s: torch.linspace(s, 3, 9), lambda: (torch.tensor(-4.7),)),
    Case(aten.linspace.Scalar_Tensor, lambda e: torch.linspace(-2.5, e, 7), lambda: (torch.tensor(4),)),
    Case(aten.eye.default, lambda x: x + torch.eye(3), lambda: (r(3, 3),)),
    Case(aten.eye.m, lambda x: x * torch.eye(2, 3, dtype=torch.int64), lambda: (ri(2, 3),)),
    Case(aten.one_hot.default, lambda i: F.one_hot(i, 5), lambda: (torch.tensor([[0, 3], [4, 1]]),)),
    Case(aten.copy.default, lambda x, y: aten.copy.default(x, y), lambda: (r(2, 3), ri(3))),
    Case(aten.type_as.default, lambda x, y: x.type_as(y) + y, lambda: (r(3) * 5, ri(3))),
    # -- pooling in 1d/3d, adaptive max (pooling.py) --------------------------------------------
    Case(aten.max_pool3d_with_indices.default, lambda x: F.max_pool3d(x, 2), lambda: (r(1, 2, 4, 4, 4),)),
    Case(
        aten.max_pool3d_with_indices.default,
        lambda x: F.max_pool3d(x, 3, 2, 1, ceil_mode=True),
        lambda: (r(2, 5, 5, 6),),
        id="unbatched-ceil",
    ),
    Case(aten.avg_pool3d.default, lambda x: F.avg_pool3d(x, 2), lambda: (r(1, 2, 4, 4, 4),)),
    Case(
        aten.avg_pool3d.default,
        lambda x: F.avg_pool3d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
        lambda: (r(1, 1, 5, 6, 5),),
        id="ceil-pad-not-counted",
    ),
    Case(aten.avg_pool1d.default, lambda x: F.avg_pool1d(x, 3, 2, 1), lambda: (r(2, 3, 8),)),
    Case(
        aten.avg_pool1d.default,
        lambda x: F.avg_pool1d(x, 2, 2, 1, ceil_mode=True, count_include_pad=False),
        lambda: (r(3, 5),),
        id="unbatched-ceil",
    ),
    Case(aten.adaptive_avg_pool1d.default, lambda x: F.adaptive_avg_pool1d(x, 2), lambda: (r(2, 3, 8),)),
    Case(aten.adaptive_avg_pool1d.default, lambda x: F.adaptive_avg_pool1d(x, 1), lambda: (r(2, 3, 7),), id="global"),
    Case(aten._adaptive_avg_pool3d.default, lambda x: F.adaptive_avg_pool3d(x, (1, 2, 2)), lambda: (r(1, 2, 3, 4, 4),)),
    Case(
        aten._adaptive_avg_pool3d.default,
        lambda x: aten._adaptive_avg_pool3d.default(x, [1, 1, 1]),
        lambda: (r(1, 2, 3, 5, 4),),
        id="global",
    ),
    Case(aten.adaptive_max_pool2d.default, lambda x: F.adaptive_max_pool2d(x, (2, 3)), lambda: (r(1, 2, 4, 6),)),
    Case(
        aten.adaptive_max_pool2d.default,
        lambda x: F.adaptive_max_pool2d(x, 1),
        lambda: (r(2, 3, 5),),
        id="unbatched-global",
    ),
    Case(aten.adaptive_max_pool1d.default, lambda x: F.adaptive_max_pool1d(x, 3), lambda: (r(2, 3, 9),)),
    # -- group/instance/RMS norm, batch statistics (normalization.py) ---------------------------
    Case(aten.group_norm.default, torch.nn.GroupNorm(2, 4), lambda: (r(2, 4, 3, 3),)),
    Case(aten.group_norm.default, lambda x: F.group_norm(x, 3), lambda: (r(2, 6, 5),), id="no-affine"),
    Case(
        aten.group_norm.default,
        lambda x, w, b: F.group_norm(x, 1, w, b),
        lambda: (r(0, 2), r(2), r(2)),
        id="empty-batch",
    ),
    Case(
        aten.native_group_norm.default,
        lambda x, w, b: aten.native_group_norm.default(x, w, b, 2, 4, 9, 2, 1e-5)[0],
        lambda: (r(2, 4, 3, 3), r(4), r(4)),
    ),
    Case(aten.instance_norm.default, torch.nn.InstanceNorm2d(3, affine=True), lambda: (r(2, 3, 4, 4),)),
    Case(aten.instance_norm.default, torch.nn.InstanceNorm1d(2), lambda: (r(2, 2, 6),), id="1d-no-affine"),
    Case(
        aten._native_batch_norm_legit.no_stats,
        lambda x: F.batch_norm(x, None, None, training=True),
        lambda: (r(4, 3, 2, 2),),
    ),
    Case(
        aten._native_batch_norm_legit.no_stats,
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        lambda: (r(5, 3), r(3), r(3)),
        id="2d-affine",
    ),
    Case(aten.rms_norm.default, lambda x, w: F.rms_norm(x, (4,), w), lambda: (r(2, 3, 4), r(4))),
    Case(aten.rms_norm.default, lambda x: F.rms_norm(x, (3, 4), eps=1e-3), lambda: (r(2, 3, 4),), id="2-dims-eps"),
    # -- upsampling as Resize (resize.py) ------------------------------------------------------
    Case(aten.upsample_nearest2d.vec, lambda x: F.interpolate(x, scale_factor=2), lambda: (r(1, 2, 3, 4),)),
    Case(aten.upsample_nearest2d.vec, lambda x: F.interpolate(x, size=(5, 7)), lambda: (r(2, 1, 3, 4),), id="size"),
    Case(
        aten.upsample_nearest2d.vec,
        lambda x: F.interpolate(x, scale_factor=1.5),
        lambda: (r(1, 1, 5, 3),),
        id="fractional",
    ),
    Case(aten.upsample_nearest1d.vec, lambda x: F.interpolate(x, scale_factor=3), lambda: (r(1, 2, 4),)),
    Case(aten.upsample_nearest3d.vec, lambda x: F.interpolate(x, size=(3, 4, 6)), lambda: (r(1, 1, 2, 3, 4),)),
    Case(
        aten._upsample_nearest_exact1d.vec,
        lambda x: F.interpolate(x, size=7, mode="nearest-exact"),
        lambda: (r(1, 2, 5),),
    ),
    Case(
        aten._upsample_nearest_exact2d.vec,
        lambda x: F.interpolate(x, scale_factor=1.7, mode="nearest-exact"),
        lambda: (r(1, 2, 3, 5),),
    ),
    Case(
        aten._upsample_nearest_exact3d.vec,
        lambda x: F.interpolate(x, size=(2, 5, 3), mode="nearest-exact"),
        lambda: (r(1, 1, 3, 3, 4),),
        id="down-and-up",
    ),
    Case(aten.upsample_linear1d.vec, lambda x: F.interpolate(x, scale_factor=2, mode="linear"), lambda: (r(1, 2, 5),)),
    Case(
        aten.upsample_bilinear2d.vec,
        lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
        lambda: (r(1, 2, 3, 4),),
    ),
    Case(
        aten.upsample_bilinear2d.vec,
        lambda x: F.interpolate(x, size=(7, 1), mode="bilinear", align_corners=True),
        lambda: (r(1, 2, 3, 4),),
        id="align-corners-size-1",
    ),
    Case(
        aten.upsample_bilinear2d.vec,
        lambda x: F.interpolate(x, size=(2, 1), mode="bilinear"),
        lambda: (r(1, 2, 5, 4),),
        id="down-size-1",
    ),
    Case(
        aten.upsample_trilinear3d.vec,
        lambda x: F.interpolate(x, scale_factor=(1.5, 2, 1), mode="trilinear"),
        lambda: (r(1, 1, 2, 3, 4),),
    ),
    Case(aten.upsample_nearest1d.default, lambda x: aten.upsample_nearest1d.default(x, [8]), lambda: (r(1, 2, 3),)),
    Case(
        aten.upsample_nearest2d.default,
        lambda x: aten.upsample_nearest2d.default(x, [7, 6], 1.5, 2.0),
        lambda: (r(1, 2, 5, 3),),
        id="scales",
    ),
    Case(
        aten.upsample_nearest3d.default,
        lambda x: aten.upsample_nearest3d.default(x, [3, 4, 5]),
        lambda: (r(1, 1, 2, 2, 2),),
    ),
    Case(
        aten._upsample_nearest_exact1d.default,
        lambda x: aten._upsample_nearest_exact1d.default(x, [7]),
        lambda: (r(1, 2, 3),),
    ),
    Case(
        aten._upsample_nearest_exact2d.default,
        lambda x: aten._upsample_nearest_exact2d.default(x, [5, 4]),
        lambda: (r(1, 2, 3, 3),),
    ),
    Case(
        aten._upsample_nearest_exact3d.default,
        lambda x: aten._upsample_nearest_exact3d.default(x, [3, 3, 3]),
        lambda: (r(1, 1, 2, 2, 2),),
    ),
    Case(aten.upsample_linear1d.default, lambda x: aten.upsample_linear1d.default(x, [9], True), lambda: (r(1, 2, 4),)),
    Case(
        aten.upsample_trilinear3d.default,
        lambda x: aten.upsample_trilinear3d.default(x, [4, 4, 6], False, 2.0, 2.0, 1.5),
        lambda: (r(1, 1, 2, 2, 4),),
        id="scales",
    ),
    # -- padding (padding.py) ------------------------------------------------------------------
    Case(aten.constant_pad_nd.default, lambda x: F.pad(x, (1, 2)), lambda: (r(2, 3),)),
    Case(
        aten.constant_pad_nd.default, lambda x: F.pad(x, (1, 0, 0, 2), value=7), lambda: (ri(1, 2, 3),), id="int-value"
    ),
    Case(aten.reflection_pad1d.default, lambda x: F.pad(x, (2, 1), mode="reflect"), lambda: (r(1, 2, 5),)),
    Case(aten.reflection_pad2d.default, lambda x: F.pad(x, (1, 2, 2, 0), mode="reflect"), lambda: (r(1, 2, 4, 4),)),
    Case(
        aten.reflection_pad2d.default,
        lambda x: F.pad(x, (1, 1, 1, 1), mode="reflect"),
        lambda: (r(2, 3, 3),),
        id="unbatched",
    ),
    Case(
        aten.reflection_pad3d.default,
        lambda x: F.pad(x, (1, 1, 0, 1, 1, 0), mode="reflect"),
        lambda: (r(1, 1, 3, 3, 3),),
    ),
    Case(aten.replication_pad1d.default, lambda x: F.pad(x, (3, 1), mode="replicate"), lambda: (r(1, 2, 4),)),
    Case(aten.replication_pad2d.default, lambda x: F.pad(x, (1, 2, 2, 0), mode="replicate"), lambda: (r(1, 2, 3, 3),)),
    Case(
        aten.replication_pad3d.default,
        lambda x: F.pad(x, (1, 0, 1, 1, 0, 2), mode="replicate"),
        lambda: (r(1, 1, 2, 3, 2),),
    ),
    # -- advanced indexing (ops/index.py) -------------------------------------------------
    Case(aten.index.Tensor, lambda x, i: x[i], lambda: (r(5, 3), torch.tensor([[0, 4], [-1, 2]]))),
    Case(
        aten.index.Tensor,
        lambda x, i: x[:, i],
        lambda: (r(2, 5, 3), torch.tensor([0, -2], dtype=torch.int32)),
        id="one-inner-int32",
    ),
    Case(
        aten.index.Tensor,
        lambda x, i, j: x[i, j],
        lambda: (r(4, 5, 2), torch.tensor([[0], [3]]), torch.tensor([1, -1, 4])),
        id="two-broadcast",
    ),
    Case(
        aten.index.Tensor,
        lambda x, i, j: x[:, i, j],
        lambda: (r(2, 4, 5, 3), torch.tensor([0, 3]), torch.tensor([1, 4])),
        id="adjacent-inner",
    ),
    Case(
        aten.index.Tensor,
        lambda x, i, j: x[i, :, j],
        lambda: (r(4, 2, 5), torch.tensor([0, 3]), torch.tensor([1, -1])),
        id="separated",
    ),
    # data-dependent sizes (more in test_data_dependent.py, the TensorRT output allocator there)
    Case(aten.index.Tensor, lambda x, m: x[:, m], lambda: (r(2, 3, 4), rb(3, 4)), id="bool-mask"),
    Case(aten.nonzero.default, torch.nonzero, lambda: (ri(3, 4, high=2),)),
    Case(aten.masked_select.default, torch.masked_select, lambda: (r(3, 4), rb(4))),
    Case(
        aten.index_put.default, lambda x, i, v: x.index_put((i,), v), lambda: (r(5, 3), torch.tensor([0, -1]), r(2, 3))
    ),
    Case(
        aten.index_put.default,
        lambda x, i, v: aten.index_put.default(x, [None, i], v),
        lambda: (r(2, 5, 3), torch.tensor([4, 1]), r(3)),
        id="inner-broadcast-values",
    ),
    Case(
        aten.index_put.default,
        lambda x, i, j, v: x.index_put((i, j), v),
        lambda: (ri(4, 5), torch.tensor([0, 3]), torch.tensor([1, 4]), ri(2)),
        id="two-int",
    ),
    Case(
        aten.index_put.default,
        lambda x, i, j, v: aten.index_put.default(x, [None, i, j], v),
        lambda: (r(2, 4, 5, 3), torch.tensor([0, 3]), torch.tensor([1, 4]), r(2, 2, 1)),
        id="adjacent-inner",
    ),
    Case(
        aten.index_put.default,
        lambda x, i, j, v: aten.index_put.default(x, [i, None, j], v),
        lambda: (r(4, 3, 5), torch.tensor([0, 3]), torch.tensor([1, 4]), r(2, 3)),
        id="separated",
    ),
    Case(
        aten.index_put.default, lambda x: x.index_put((x > 0,), torch.tensor(0.0)), lambda: (r(3, 4),), id="mask-scalar"
    ),
    Case(
        aten.index_put.default,
        lambda x, m: aten.index_put.default(x, [None, m], torch.tensor([2.0])),
        lambda: (r(2, 3, 4), rb(3)),
        id="inner-mask",
    ),
    # accumulate=True: repeated indices add up (ScatterElements with reduction 'add').
    Case(
        aten.index_put.default,
        lambda x, i, v: x.index_put((i,), v, accumulate=True),
        lambda: (r(5, 3), torch.tensor([0, -1, 0, 4, 0]), r(5, 3)),
        id="accumulate-repeats",
    ),
    Case(
        aten.index_put.default,
        lambda x, i, j, v: aten.index_put.default(x, [i, None, j], v, True),
        lambda: (ri(4, 3, 5), torch.tensor([0, 3, 0]), torch.tensor([1, 4, 1]), ri(3)),
        id="accumulate-separated-int",
    ),
    Case(
        aten.index_put.default,
        lambda x, i, v: aten.index_put.default(x, [None, i], v, True),
        lambda: (r(2, 4), torch.tensor([[1, 1], [3, 1]]), r(2, 2, 2)),
        id="accumulate-inner-2d-index",
    ),
    Case(
        aten.index_put.default,
        lambda x: x.index_put((x > 0,), torch.tensor(2.0), accumulate=True),
        lambda: (r(3, 4),),
        id="accumulate-mask-scalar",
    ),
    # -- scatters (scatter.py) -----------------------------------------------------------------
    Case(
        aten.scatter.src,
        lambda x, i, s: x.scatter(1, i, s),
        lambda: (r(3, 5), torch.tensor([[0, 1], [2, 3], [4, 0]]), r(3, 2)),
    ),
    Case(
        aten.scatter.src,
        lambda x, i, s: x.scatter(0, i, s),
        lambda: (ri(3, 4), torch.tensor([[2, 0, 1]]), ri(2, 4)),
        id="larger-src",
    ),
    Case(
        aten.scatter.value,
        lambda x, i: x.scatter(-1, i, 2.5),
        lambda: (r(3, 5), torch.tensor([[0, 4], [2, 3], [1, 0]])),
    ),
    Case(aten.masked_scatter.default, lambda x, m, s: x.masked_scatter(m, s), lambda: (r(3, 4), rb(3, 4), r(13))),
    # A mask broadcast over self (a vision-language model's image-token positions over its width).
    Case(
        aten.masked_scatter.default,
        lambda x, m, s: x.masked_scatter(m.unsqueeze(-1), s),
        lambda: (ri(2, 3, 4), rb(2, 3), ri(30)),
        id="broadcast-mask",
    ),
    Case(aten.slice_scatter.default, lambda x, s: torch.slice_scatter(x, s, 1, 1, 3), lambda: (r(3, 5), r(3, 2))),
    Case(
        aten.slice_scatter.default,
        lambda x, s: torch.slice_scatter(x, s, 0, -2),
        lambda: (rb(4, 2), rb(2, 2)),
        id="bool-tail",
    ),
    Case(
        aten.slice_scatter.default,
        lambda x, s: torch.slice_scatter(x, s, -1, 1, None, 2),
        lambda: (r(2, 6), r(2, 3)),
        id="step",
    ),
    Case(aten.select_scatter.default, lambda x, s: torch.select_scatter(x, s, 1, -1), lambda: (r(3, 4), r(3))),
    Case(
        aten.select_scatter.default,
        lambda x, s: torch.select_scatter(x, s, 0, 0),
        lambda: (ri(2, 3), ri(3)),
        id="first",
    ),
    # -- attention (attention.py) --------------------------------------------------------------
    Case(
        aten.scaled_dot_product_attention.default,
        F.scaled_dot_product_attention,
        lambda: (r(2, 3, 4, 8), r(2, 3, 5, 8), r(2, 3, 5, 6)),
    ),
    Case(
        aten.scaled_dot_product_attention.default,
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        lambda: (r(1, 2, 4, 8), r(1, 2, 6, 8), r(1, 2, 6, 8)),
        id="causal",
    ),
    Case(
        aten.scaled_dot_product_attention.default,
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.3),
        lambda: (
            r(2, 4, 8),
            r(2, 5, 8),
            r(2, 5, 8),
            torch.tensor([[True] * 5, [False] * 5, [True, False] * 2 + [True], [False] * 4 + [True]]),
        ),
        id="bool-mask-blind-row-scale",
    ),
    Case(
        aten.scaled_dot_product_attention.default,
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        lambda: (r(1, 2, 3, 4), r(1, 2, 3, 4), r(1, 2, 3, 4), r(1, 1, 3, 3)),
        id="float-mask",
    ),
    # -- products (linalg.py) ------------------------------------------------------------------
    Case(
        aten.baddbmm.default,
        lambda x, p, q: torch.baddbmm(x, p, q, beta=0.5, alpha=2),
        lambda: (r(2, 3, 5), r(2, 3, 4), r(2, 4, 5)),
    ),
    Case(
        aten.baddbmm.default,
        lambda x, p, q: torch.baddbmm(x, p, q, beta=0),
        lambda: (torch.full((3, 5), float("nan")), r(2, 3, 4), r(2, 4, 5)),
        id="beta-0-ignores-nan",
    ),
    Case(aten.mv.default, torch.mv, lambda: (r(3, 4), r(4))),
    Case(aten.dot.default, torch.dot, lambda: (r(5), r(5))),
    Case(aten.outer.default, torch.outer, lambda: (r(3), ri(4))),
    Case(aten.einsum.default, lambda x, y: torch.einsum("bij,bjk->bik", x, y), lambda: (r(2, 3, 4), r(2, 4, 5))),
    Case(
        aten.einsum.default, lambda x, y: torch.einsum("ij, kj", x, y), lambda: (r(2, 3), r(4, 3)), id="implicit-output"
    ),
    # maxvit's labels: capitals and spaces, renamed to a-z for ONNX.
    Case(
        aten.einsum.default,
        lambda x, y: torch.einsum("B G I D, B G J D -> B G I J", x, y),
        lambda: (r(2, 3, 4, 5), r(2, 3, 6, 5)),
        id="capital-labels",
    ),
    # Implicit output in torch's order (A-Z before a-z: "Jb"), not in the renamed labels' order.
    Case(
        aten.einsum.default,
        lambda x, y: torch.einsum("bi,iJ", x, y),
        lambda: (r(2, 3), r(3, 4)),
        id="implicit-output-capital",
    ),
    Case(aten.cosine_similarity.default, F.cosine_similarity, lambda: (r(3, 4), r(3, 4))),
    Case(
        aten.cosine_similarity.default,
        lambda x, y: F.cosine_similarity(x, y, -1),
        lambda: (r(2, 1, 4), r(3, 4)),
        id="broadcast",
    ),
    # -- sampling (sampling.py) ----------------------------------------------------------------
    Case(
        aten.grid_sampler_2d.default,
        lambda x, g: F.grid_sample(x, g, align_corners=False),
        lambda: (r(1, 2, 4, 5), torch.rand(1, 3, 3, 2) * 2.4 - 1.2),
    ),
    Case(
        aten.grid_sampler_2d.default,
        lambda x, g: F.grid_sample(x, g, "nearest", "border", align_corners=True),
        lambda: (r(2, 1, 4, 4), torch.rand(2, 2, 5, 2) * 2.4 - 1.2),
        id="nearest-border-corners",
    ),
    Case(
        aten.grid_sampler_2d.default,
        lambda x, g: F.grid_sample(x, g, "bilinear", "reflection", align_corners=False),
        lambda: (r(1, 2, 4, 4), torch.rand(1, 3, 3, 2) * 3 - 1.5),
        id="reflection",
    ),
    Case(
        aten.grid_sampler_2d.default,
        lambda x, g: F.grid_sample(x, g, "bicubic", "zeros", align_corners=False),
        lambda: (r(1, 2, 4, 4), torch.rand(1, 3, 3, 2) * 2 - 1),
        id="bicubic",
    ),
    # -- integer and bool ordering (reduce.py, sort.py) ----------------------------------------
    Case(aten.argmax.default, lambda x: x.argmax(0), lambda: (torch.randperm(12).view(3, 4),), id="int"),
    Case(aten.max.dim, lambda x: x.max(1), lambda: (torch.tensor([[True, False], [False, False]]),), id="bool"),
    Case(aten.topk.default, lambda x: x.topk(2), lambda: (torch.randperm(12).view(2, 6).int(),), id="int32"),
    Case(aten.argsort.default, lambda x: torch.argsort(x, descending=True), lambda: (torch.randperm(6),), id="int"),
    # -- bicubic, round to decimals, order statistics, searching, distances, windows, slice fills
    Case(
        aten.upsample_bicubic2d.vec,
        lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"),
        lambda: (r(1, 2, 3, 4),),
    ),
    Case(
        aten.upsample_bicubic2d.vec,
        lambda x: F.interpolate(x, size=(5, 2), mode="bicubic", align_corners=True),
        lambda: (r(1, 2, 3, 4),),
        id="align-corners-size",
    ),
    Case(aten.round.decimals, lambda x: torch.round(x, decimals=2), lambda: (r(6) * 10,)),
    Case(
        aten.round.decimals,
        lambda x: torch.round(x, decimals=-1),
        lambda: (torch.tensor([14.0, 15.0, 25.0, -36.0]),),
        id="negative",
    ),
    Case(aten.kthvalue.default, lambda x: x.kthvalue(2, 0), lambda: (r(4, 3),)),
    Case(aten.kthvalue.default, lambda x: x.kthvalue(3, keepdim=True), lambda: (ri(2, 5),), id="int-keepdim"),
    Case(aten.median.dim, lambda x: x.median(1), lambda: (r(3, 6),)),
    Case(
        aten.median.dim,
        lambda x: (lambda v, i: (v.nan_to_num(7.0), i))(*x.median(1, keepdim=True)),
        lambda: (
            torch.tensor(
                [[1.0, 2.0, 3.0, float("nan")], [float("nan"), 1.0, float("nan"), 0.0], [4.0, -1.0, 2.0, 7.0]]
            ),
        ),
        id="nan-keepdim",
    ),
    Case(aten.median.default, torch.median, lambda: (r(3, 5),)),
    Case(
        aten.median.default,
        lambda x: torch.median(x).nan_to_num(7.0),
        lambda: (r(3, 5).index_fill(1, torch.tensor([3]), float("nan")),),
        id="nan",
    ),
    Case(aten.median.dim, lambda x: x.median(0), lambda: (ri(5, 2),), id="int"),
    Case(
        aten.bucketize.Tensor,
        torch.bucketize,
        lambda: (torch.tensor([[-2.0, 0.0], [0.5, float("nan")]]), torch.tensor([-1.0, 0.0, 1.0])),
    ),
    Case(
        aten.bucketize.Tensor,
        lambda x, bs: torch.bucketize(x, bs, right=True, out_int32=True),
        lambda: (torch.tensor([-1, 0, 3]), torch.tensor([-1.0, 0.0, 1.0])),
        id="right-int32-promote",
    ),
    Case(
        aten.searchsorted.Tensor,
        torch.searchsorted,
        lambda: (torch.tensor([[1.0, 2.0, 3.0], [0.0, 5.0, 6.0]]), r(2, 4) * 3),
    ),
    Case(
        aten.searchsorted.Tensor,
        lambda s, x: torch.searchsorted(s, x, side="right"),
        lambda: (torch.tensor([1, 2, 2, 4]), torch.tensor([[2, 0], [4, 5]])),
        id="1d-right",
    ),
    Case(aten.cdist.default, torch.cdist, lambda: (r(2, 3, 4), r(2, 5, 4))),
    Case(aten.cdist.default, lambda x, y: torch.cdist(x, y, p=1), lambda: (r(3, 4), r(5, 4)), id="p1"),
    Case(aten.cdist.default, lambda x, y: torch.cdist(x, y, p=float("inf")), lambda: (r(3, 4), r(5, 4)), id="inf"),
    Case(aten.cdist.default, lambda x, y: torch.cdist(x, y, p=3), lambda: (r(3, 4), r(5, 4)), id="p3"),
    Case(
        aten._cdist_forward.default,
        lambda x, y: aten._cdist_forward.default(x, y, 2.0, None),
        lambda: (r(3, 4), r(5, 4)),
    ),
    Case(aten.unfold.default, lambda x: x.unfold(1, 3, 2), lambda: (r(2, 7, 3),)),
    Case(aten.unfold.default, lambda x: x.unfold(-1, 2, 1), lambda: (ri(3, 4),), id="last-int"),
    Case(aten.index_fill.int_Scalar, lambda x, i: x.index_fill(1, i, 2.5), lambda: (r(3, 5), torch.tensor([0, -1, 0]))),
    Case(
        aten.index_fill.int_Tensor,
        lambda x, i, v: x.index_fill(0, i, v),
        lambda: (rb(4, 2), torch.tensor([2]), torch.tensor(True)),
        id="bool",
    ),
    Case(
        aten.index_copy.default, lambda x, i, s: x.index_copy(1, i, s), lambda: (r(3, 5), torch.tensor([4, 1]), r(3, 2))
    ),
    # bools through Where (ONNX Runtime has no bool Where kernel)
    Case(aten.where.ScalarOther, lambda x: torch.where(x, x, False), lambda: (rb(2, 3),), id="bool"),
    Case(
        aten.index_put.default,
        lambda x, m: x.index_put((m,), torch.tensor(True)),
        lambda: (rb(3, 4), rb(3, 4)),
        id="bool-mask-bool",
    ),
    Case(aten.celu.default, F.celu, lambda: (r(8),), id="alpha-1"),
    # as_strided as a gather of the input: a re-stride, sliding windows, a transposed input.
    Case(
        aten.as_strided.default,
        lambda x: x.mean((2, 3), keepdim=True).as_strided((1, 4, 1, 1), (4, 1, 4, 4)),
        lambda: (r(1, 4, 3, 3),),
        id="restride",
    ),
    Case(aten.as_strided.default, lambda x: (x + 1).as_strided((3, 4), (2, 1), 1), lambda: (r(10),), id="windows"),
    Case(
        aten.as_strided.default, lambda x: (x + 1).t().as_strided((2, 3), (1, 2)), lambda: (r(2, 3),), id="transposed"
    ),
    # inference dropout: identity and an all-kept mask (train=True with p=0 keeps everything too)
    Case(aten.native_dropout.default, lambda x: aten.native_dropout.default(x + 1, 0.5, False), lambda: (r(2, 3),)),
    Case(
        aten.native_dropout.default,
        lambda x: aten.native_dropout.default(x + 1, 0.0, True),
        lambda: (r(4),),
        id="p0-train",
    ),
    Case(aten.diagonal.default, lambda x: torch.diagonal(x + 1, 1), lambda: (r(3, 4),)),
    Case(
        aten.diagonal.default,
        lambda x: torch.diagonal(x + 1, -1, 2, 0),
        lambda: (ri(3, 2, 4),),
        id="negative-offset-dims",
    ),
    Case(aten.bitwise_and.Scalar_Tensor, lambda x: aten.bitwise_and.Scalar_Tensor(True, x > 0), lambda: (r(6),)),
    Case(aten.bitwise_or.Scalar_Tensor, lambda x: torch.bitwise_or(False, x > 0), lambda: (r(6),)),
    Case(aten.bitwise_xor.Scalar_Tensor, lambda x: aten.bitwise_xor.Scalar_Tensor(True, x > 0), lambda: (r(6),)),
    Case(aten.pixel_shuffle.default, lambda x: F.pixel_shuffle(x, 2), lambda: (r(8, 2, 3),), id="rank3"),
    Case(aten.pixel_shuffle.default, lambda x: F.pixel_shuffle(x, 2), lambda: (ri(4, 2, 3),), id="rank3-int"),
    Case(aten.pixel_unshuffle.default, lambda x: F.pixel_unshuffle(x, 2), lambda: (r(3, 4, 6),), id="rank3"),
    # embedding bags with offsets given at run time: an empty bag, padding, the last offset as an end
    Case(
        aten.embedding_bag.padding_idx,
        lambda w, i, o: F.embedding_bag(i, w, o, mode="sum"),
        lambda: (r(10, 3), torch.tensor([1, 2, 4, 5, 4, 3]), torch.tensor([0, 2, 2])),
    ),
    Case(
        aten.embedding_bag.padding_idx,
        lambda w, i, o: F.embedding_bag(i, w, o, mode="mean", padding_idx=4),
        lambda: (r(10, 3), torch.tensor([1, 2, 4, 4, 4, 3]), torch.tensor([0, 2, 5])),
        id="mean-padding",
    ),
    Case(
        aten.embedding_bag.padding_idx,
        lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
        lambda: (r(10, 3), torch.tensor([1, 2, 4, 5]), torch.tensor([0, 1]), r(4)),
        id="sum-per-sample-weights",
    ),
    Case(
        aten.embedding_bag.padding_idx,
        lambda w, i, o: F.embedding_bag(i, w, o, mode="max", include_last_offset=True),
        lambda: (r(10, 3), torch.tensor([1, 2, 4, 5, 4, 3]), torch.tensor([0, 1, 1, 6])),
        id="max-last-offset",
    ),
    Case(
        aten.embedding_bag.padding_idx,
        lambda w, i, o: F.embedding_bag(i, w, o, mode="sum", padding_idx=-1),
        lambda: (r(10, 3), torch.tensor([1, 9, 9, 5]), torch.tensor([0, 2])),
        id="padding-from-end",
    ),
    Case(
        aten._embedding_bag.default,
        lambda w, i, o: aten._embedding_bag.default(w, i, o, False, 1)[0],
        lambda: (r(10, 3), torch.tensor([1, 2, 4, 5]), torch.tensor([0, 3])),
        id="mean",
    ),
    Case(
        aten._embedding_bag_forward_only.default,
        lambda w, i, o: aten._embedding_bag_forward_only.default(w, i, o, False, 2, padding_idx=2)[0],
        lambda: (r(10, 3), torch.tensor([1, 2, 4, 2]), torch.tensor([0, 3])),
        id="max-padding",
    ),
    Case(aten._pdist_forward.default, F.pdist, lambda: (r(5, 3),)),
    Case(aten._pdist_forward.default, lambda x: F.pdist(x, p=1), lambda: (r(4, 3),), id="p1"),
    Case(aten._pdist_forward.default, lambda x: F.pdist(x, p=3), lambda: (r(4, 3),), id="p3"),
    # -- quantization: int8 Q/DQ (scales are powers of 2: x / s is x * (1 / s), as torch computes it)
    Case(
        qd.quantize_per_tensor.default,
        lambda x: _dq(qd.quantize_per_tensor.default(x, Q_SCALE, 0, *INT8)),
        lambda: (r(2, 8) * 4,),
    ),
    Case(
        qd.quantize_per_tensor.default,
        lambda x: F.linear(x, _dq(qd.quantize_per_tensor.default(W, Q_SCALE, 0, -127, 127, torch.int8))),
        lambda: (r(2, 6),),
        id="weight-folded-narrow",
    ),
    Case(
        qd.quantize_per_tensor.tensor,
        lambda x: _dq(qd.quantize_per_tensor.tensor(x, Q_SCALE_T, Q_ZERO_T, *INT8)),
        lambda: (r(2, 8) * 4,),
    ),
    Case(
        qd.dequantize_per_tensor.default,
        lambda x: _dq(qd.quantize_per_tensor.default(x, Q_SCALE, 0, *INT8)),
        lambda: (r(3, 5) * 10,),
        id="saturating",
    ),
    Case(
        qd.dequantize_per_tensor.default,
        lambda x: qd.dequantize_per_tensor.default(
            qd.quantize_per_tensor.default(x, Q_SCALE, 0, *INT8), Q_SCALE, 0, *INT8, out_dtype=torch.float16
        ),
        lambda: (r(2, 8),),
        id="out-dtype",
    ),
    Case(
        qd.dequantize_per_tensor.tensor,
        lambda x: qd.dequantize_per_tensor.tensor(
            qd.quantize_per_tensor.default(x, Q_SCALE, 0, *INT8), Q_SCALE_T, Q_ZERO_T, *INT8
        ),
        lambda: (r(2, 8),),
    ),
    Case(
        qd.dequantize_per_channel.default,
        lambda x: F.linear(x, qd.dequantize_per_channel.default(W_INT8, W_SCALES, W_ZEROS, 0, *INT8)),
        lambda: (r(2, 6),),
        id="int8-weight",
    ),
    Case(
        qd.dequantize_per_channel.default,
        lambda x: F.conv2d(x, qd.dequantize_per_channel.default(CONV_INT8, W_SCALES, None, 0, *INT8)),
        lambda: (r(1, 2, 5, 5),),
        id="conv",
    ),
    Case(
        qd.quantize_per_channel.default,
        lambda x: F.linear(
            x,
            qd.dequantize_per_channel.default(
                qd.quantize_per_channel.default(W, W_SCALES, W_ZEROS, 0, *INT8), W_SCALES, W_ZEROS, 0, *INT8
            ),
        ),
        lambda: (r(2, 6),),
    ),
    Case(
        aten.fake_quantize_per_tensor_affine_cachemask.default,
        lambda x: torch.fake_quantize_per_tensor_affine(x, Q_SCALE, 0, -128, 127),
        lambda: (r(2, 8) * 4,),
    ),
    Case(
        aten.fake_quantize_per_tensor_affine_cachemask.default,
        lambda x: torch.fake_quantize_per_tensor_affine(x + 0, Q_SCALE, 0, -128, 127).half(),
        lambda: (r(2, 8).half(),),
        id="fp16",
    ),
    Case(
        aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams.default,
        lambda x: aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams.default(
            x, Q_SCALE_T, Q_ZERO_T.int(), ON, -128, 127
        )[0],
        lambda: (r(2, 8) * 4,),
    ),
    Case(
        aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams.default,
        lambda x: (
            aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams.default(
                x, Q_SCALE_T, Q_ZERO_T.int(), ON * 0, -128, 127
            )[0]
            * 2
        ),
        lambda: (r(2, 8) * 4,),
        id="disabled",
    ),
    Case(
        aten.fake_quantize_per_channel_affine_cachemask.default,
        lambda x: F.linear(x, torch.fake_quantize_per_channel_affine(W, W_SCALES, W_ZEROS.int(), 0, -127, 127)),
        lambda: (r(2, 6),),
        id="weight",
    ),
    Case(
        aten.fake_quantize_per_channel_affine_cachemask.default,
        lambda x: F.conv_transpose2d(
            x, torch.fake_quantize_per_channel_affine(CONV_T, W_SCALES, W_ZEROS.int(), 1, -128, 127)
        ),
        lambda: (r(1, 2, 4, 4),),
        id="conv-transpose-axis-1",
    ),
]


# -- prims: what torch._refs and decomposed code call (converters/ops/prims.py) --------------
prims = torch.ops.prims
# Operands inside a prim's domain, where the float default (r) is not.
_PRIM_OPERANDS: dict[str, Callable[[], tuple[torch.Tensor, ...]]] = {
    "bitwise_and": lambda: (rb(2, 3), rb(2, 3)),
    "bitwise_or": lambda: (rb(2, 3), rb(2, 3)),
    "bitwise_xor": lambda: (rb(2, 3), rb(2, 3)),
    "bitwise_not": lambda: (rb(2, 3),),
    "where": lambda: (rb(2, 3), r(2, 3), r(2, 3)),
    "pow": lambda: (rp(2, 3), r(2, 3)),
    "remainder": lambda: (r(2, 3), nz(2, 3).float()),
    "fmod": lambda: (r(2, 3), nz(2, 3).float()),
    "sqrt": lambda: (rp(2, 3),),
    "rsqrt": lambda: (rp(2, 3),),
    "reciprocal": lambda: (rp(2, 3),),
    "log": lambda: (rp(2, 3),),
    "log2": lambda: (rp(2, 3),),
    "log10": lambda: (rp(2, 3),),
    "log1p": lambda: (rp(2, 3),),
    "asin": lambda: (ru(2, 3),),
    "acos": lambda: (ru(2, 3),),
    "atanh": lambda: (ru(2, 3),),
    "acosh": lambda: (rp(2, 3) + 1,),
}
CASES += [
    Case(
        prim,
        prim if name != "cat" else lambda x, y, cat=prim: cat([x, y], 1),
        _PRIM_OPERANDS.get(name, lambda n=len(prim._schema.arguments): tuple(r(2, 3) for _ in range(n))),
    )
    for prim in prim_converters.SAME_AS_ATEN
    for name in [prim._schema.name.removeprefix("prims::")]
]
CASES += [
    Case(prims.sum.default, lambda x: torch._refs.sum(x, 1), lambda: (r(2, 3, 4),), id="refs"),
    Case(prims.sum.default, lambda x: prims.sum(x, [0, 1]), lambda: (ri(2, 3),), id="all-int"),
    Case(prims.div.default, lambda x, y: torch._refs.div(x, y), lambda: (r(2, 3), rp(2, 3)), id="refs"),
    Case(prims.div.default, lambda x, y: prims.div(x, y), lambda: (ri(8), nz(8)), id="int-trunc"),
    Case(prims.prod.default, lambda x: torch._refs.prod(x, 0), lambda: (r(3, 4),), id="refs"),
    Case(prims.amax.default, lambda x: torch._refs.amax(x, (0, 2)), lambda: (r(2, 3, 4),), id="refs"),
    Case(prims.amax.default, lambda x: prims.amax(x, [1]), lambda: (rb(2, 3),), id="bool"),
    Case(prims.amin.default, lambda x: torch._refs.amin(x, -1), lambda: (ri(2, 3),), id="refs-int"),
    Case(prims.var.default, lambda x: torch._refs.var(x, 1), lambda: (r(3, 5),), id="refs"),
    Case(prims.var.default, lambda x: prims.var(x, [0, 1], 0.0), lambda: (r(3, 5),), id="all-population"),
    Case(
        prims.convert_element_type.default,
        lambda x: prims.convert_element_type(x * 3, torch.int32),
        lambda: (r(2, 3),),
        id="float-to-int",
    ),
    Case(
        prims.convert_element_type.default,
        lambda x: prims.convert_element_type(x, torch.float32) / 2,
        lambda: (ri(2, 3),),
        id="int-to-float",
    ),
]
# -- rotary embeddings (rotary.py): only graphs rewritten for opset 23 have the op. Last, so that
# bench/onnx_fingerprint.py's other cases keep their index and target.
CASES += [
    Case(
        torch.ops.trt_lower.rotary_embedding.default,
        lambda x, c, s: torch.ops.trt_lower.rotary_embedding(x, c, s, False),
        lambda: (r(2, 3, 4, 8), r(1, 4, 4), r(1, 4, 4)),
        trt_version="latest",
    ),
    Case(
        torch.ops.trt_lower.rotary_embedding.default,
        lambda x, c, s: torch.ops.trt_lower.rotary_embedding(x, c, s, True),
        lambda: (r(2, 3, 4, 8), r(2, 4, 4), r(2, 4, 4)),
        id="interleaved",
        trt_version="latest",
    ),
]


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[torch.export.ExportedProgram]:
    """The programs lower_to_trt captures (spied on, so a case needs no second export)."""
    programs: list[torch.export.ExportedProgram] = []
    export = capture.export

    def spy(*args: Any, **kwargs: Any) -> torch.export.ExportedProgram:
        programs.append(export(*args, **kwargs))
        return programs[-1]

    monkeypatch.setattr(capture, "export", spy)
    return programs


def _ran_in_engine(lowered: torch.nn.Module, op: Any, program: torch.export.ExportedProgram) -> None:
    if str(op) in engine_ops(lowered):  # type: ignore[arg-type]
        return
    # Views and copies are not compute, so engine reports leave them out: find the op's nodes in
    # the capture and check each left the eager graph for an engine's ONNX (named after it).
    names = {n.name for n in program.graph.nodes if n.target == op}
    assert names, f"{op} is not in the captured graph"
    eager = {n.name for n in lowered.graph.nodes if n.op == "call_function"}
    in_onnx = {
        node.name.split("/")[0]
        for name, engine in lowered.named_children()
        if name.startswith("engine_")
        for node in onnx.load_from_string(engine.onnx_bytes).graph.node
    }
    assert names.isdisjoint(eager) and names <= in_onnx, f"{op} did not run inside an engine"


# Every other case is lowered for "latest", which writes ONNX opset 23 (converters/core/opset_forms.py),
# the others for the default target, at opset 17: both forms of the converters run, at no extra cost.
AT_OPSET_23 = {id(case) for case in CASES[1::2] if case.trt_version is None}


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.op}{'-' + c.id if c.id else ''}")
def test_converter(case: Case, captured: list[torch.export.ExportedProgram]) -> None:
    inputs = case.make_inputs()
    version = "latest" if id(case) in AT_OPSET_23 else case.trt_version
    options = {} if version is None else {"trt_version": version}
    lowered = lower_and_compare(case.fn, inputs, rtol=case.rtol, atol=case.atol, **options)
    _ran_in_engine(lowered, case.op, captured[-1])


# Converters only dynamic shapes reach, proven to run in an engine by that suite.
COVERED_BY_DYNAMIC_SHAPE_TESTS = {aten.sym_size.int}


# Converters of torchao's and PT2E's quantization ops, registered by name (their operands come from
# torchao's quantizers), proven to run in an engine by tests/test_fp8.py and tests/test_int4.py.
COVERED_BY_QUANTIZATION_TESTS = {
    "torchao.quantize_affine_float8_non_decomposed.default",
    "torchao.dequantize_affine_float8_non_decomposed.default",
    "torchao.dequantize_affine.default",
    "quantized_decomposed.dequantize_per_channel_group.default",
}


# torch.distributed's functional collectives (collectives="engine"), proven to run in an engine on
# two gloo ranks by tests/test_collectives_in_engine.py.
COVERED_BY_COLLECTIVE_TESTS = {
    torch.ops._c10d_functional.all_reduce.default,
    torch.ops._c10d_functional.all_gather_into_tensor.default,
    torch.ops._c10d_functional.reduce_scatter_tensor.default,
    torch.ops._c10d_functional.wait_tensor.default,
}


def test_every_converter_has_a_case() -> None:
    covered = {c.op for c in CASES} | COVERED_BY_DYNAMIC_SHAPE_TESTS | COVERED_BY_COLLECTIVE_TESTS
    missing = sorted(
        str(op) for op in converters.supported_ops() - covered if str(op) not in COVERED_BY_QUANTIZATION_TESTS
    )
    assert not missing, f"converters without a test case: {missing}"


def test_integer_linspace_with_runtime_bounds_is_refused() -> None:
    """torch computes it in float64; float32 would truncate 0..7 in 50 steps to 3 at i=28."""
    fn = Fn(lambda s, e: torch.linspace(s, e, 50, dtype=torch.int64))
    inputs = (torch.tensor(0), torch.tensor(7))
    lowered = trt_lower.lower_to_trt(fn, inputs, backend="onnxruntime", min_block_size=1)
    (fallback,) = [f for f in lowered.report.fallbacks if f.op == "aten.linspace.Tensor_Tensor"]
    assert "integer linspace with run-time bounds" in fallback.reason
    torch.testing.assert_close(lowered(*inputs), fn(*inputs))


def test_integer_cumsum_of_unbounded_values_is_refused() -> None:
    """Summed in float32, ints of unknown magnitude could lose digits past 2**24."""
    fn = Fn(lambda x: (x * 2).cumsum(0))
    inputs = (torch.tensor([2**23, 2**23, 3]),)
    lowered = trt_lower.lower_to_trt(fn, inputs, backend="onnxruntime", min_block_size=1)
    (fallback,) = [f for f in lowered.report.fallbacks if f.op == "aten.cumsum.default"]
    assert "2**24" in fallback.reason
    torch.testing.assert_close(lowered(*inputs), fn(*inputs))


def test_integer_pow_is_refused() -> None:
    """TensorRT's Pow is float-only: an integer result stays eager (a float one casts its inputs)."""
    fn = Fn(lambda x, y: (x + 1) ** y)
    inputs = (ri(4, high=4), torch.arange(4))
    lowered = trt_lower.lower_to_trt(fn, inputs, backend="onnxruntime", min_block_size=1)
    (fallback,) = [f for f in lowered.report.fallbacks if f.op == "aten.pow.Tensor_Tensor"]
    assert "floating-point tensors only, got a torch.int64 result" in fallback.reason
    torch.testing.assert_close(lowered(*inputs), fn(*inputs))


def test_training_dropout_is_refused() -> None:
    """Its masks are random; only inference (or p = 0) is an identity."""
    fn = Fn(lambda x: aten.native_dropout.default(x + 1, 0.5, True)[0] * 0)
    inputs = (r(4),)
    lowered = trt_lower.lower_to_trt(fn, inputs, backend="onnxruntime", min_block_size=1)
    (fallback,) = [f for f in lowered.report.fallbacks if f.op == "aten.native_dropout.default"]
    assert "training mode" in fallback.reason
    torch.testing.assert_close(lowered(*inputs), fn(*inputs))


def test_as_strided_of_overlapping_memory_is_refused() -> None:
    """An expanded input has no memory of its own to gather from (stride 0)."""
    fn = Fn(lambda x: (x + 1).expand(3, 4).as_strided((2, 2), (1, 1)))
    inputs = (r(1, 4),)
    lowered = trt_lower.lower_to_trt(fn, inputs, backend="onnxruntime", min_block_size=1)
    (fallback,) = [f for f in lowered.report.fallbacks if f.op == "aten.as_strided.default"]
    assert "gaps or overlaps" in fallback.reason
    torch.testing.assert_close(lowered(*inputs), fn(*inputs))


def test_index_put_accumulate_is_refused_on_tensorrt_8_6() -> None:
    """8.6's ScatterElements has no reduction and its ScatterND none on any version."""
    fn = Fn(lambda x, i, v: x.index_put((i,), v * 2, accumulate=True))
    inputs = (r(5, 3), torch.tensor([0, 0]), r(2, 3))
    lowered = trt_lower.lower_to_trt(fn, inputs, backend="onnxruntime", min_block_size=1, trt_version="8.6")
    (fallback,) = [f for f in lowered.report.fallbacks if f.op == "aten.index_put.default"]
    assert "TensorRT 10.0+" in fallback.reason
    torch.testing.assert_close(lowered(*inputs), fn(*inputs))


def test_a_prims_reduction_over_no_dims_is_refused() -> None:
    """torch's prims.sum over dims=[] keeps the input's shape in its shape rule but sums every
    element in its kernel: no engine can match both, so it stays eager, as eager computes it."""
    fn = Fn(lambda x: torch.ops.prims.sum(x, []) + 1)
    with pytest.raises(trt_lower.UnsupportedOpsError, match=r"prims.sum.default over dims=\[\]: torch's shape rule"):
        trt_lower.lower_to_trt(fn, (r(2, 3),), backend="onnxruntime", min_block_size=1, require_full=True)
