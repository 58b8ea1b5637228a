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

import converters
from harness import engine_ops, lower_and_compare
from trt_lower import capture

aten = torch.ops.aten


@dataclass(frozen=True)
class Case:
    op: Any
    fn: Callable[..., Any]
    make_inputs: Callable[[], tuple[torch.Tensor, ...]]
    id: str = ""
    rtol: float | None = None
    atol: float | None = None


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
    Case(aten.div.Tensor_mode, lambda x, y: torch.div(x, y, rounding_mode="trunc"), lambda: (ri(8), nz(8)),
         id="int-trunc"),
    Case(aten.div.Tensor_mode, lambda x, y: torch.div(x, y, rounding_mode="floor"), lambda: (ri(8), nz(8)),
         id="int-floor"),
    Case(aten.div.Tensor_mode, lambda x, y: torch.div(x, y, rounding_mode="trunc"), lambda: (r(8) * 5, r(8)),
         id="float-trunc"),
    Case(aten.div.Tensor_mode, lambda x, y: torch.div(x, y, rounding_mode="floor"), lambda: (r(8) * 5, r(8)),
         id="float-floor"),
    Case(aten.div.Scalar_mode, lambda x: aten.div.Scalar_mode(x, -3, rounding_mode="floor"), lambda: (ri(8),),
         id="int-floor"),
    Case(aten.floor_divide.default, torch.floor_divide, lambda: (ri(8), nz(8)), id="int"),
    Case(aten.floor_divide.Scalar, lambda x: aten.floor_divide.Scalar(x, -3), lambda: (ri(8),)),
    Case(aten.pow.Tensor_Scalar, lambda x: x**2, lambda: (r(4),), id="square"),
    Case(aten.pow.Tensor_Scalar, lambda x: x**1.5, lambda: (rp(4),)),
    Case(aten.pow.Tensor_Tensor, torch.pow, lambda: (rp(2, 3), r(3))),
    Case(aten.pow.Scalar, lambda x: 2**x, lambda: (r(4),)),
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
    Case(aten.masked_fill.Scalar, lambda x: x.masked_fill(x > 0, -1.0), lambda: (r(2, 3),)),
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
    Case(aten.convolution.default, torch.nn.Conv2d(4, 6, (3, 2), groups=2, dilation=2, bias=False),
         lambda: (r(1, 4, 8, 8),), id="grouped-dilated-nobias"),
    Case(aten.convolution.default, lambda x, w: F.conv2d(x, w, padding="same"), lambda: (r(1, 2, 6, 6), r(3, 2, 3, 3)),
         id="weight-input-same"),
    Case(aten.convolution.default, torch.nn.Conv3d(2, 2, 2), lambda: (r(1, 2, 4, 4, 4),), id="3d"),
    Case(aten.convolution.default, torch.nn.ConvTranspose2d(2, 4, 3, stride=2, padding=1, output_padding=1),
         lambda: (r(1, 2, 4, 4),), id="transposed-output-padding"),
    Case(aten.convolution.default, torch.nn.ConvTranspose1d(4, 2, 3, groups=2, dilation=2), lambda: (r(1, 4, 5),),
         id="transposed-grouped-dilated"),
    # -- pooling -------------------------------------------------------------------------------
    Case(aten.max_pool2d_with_indices.default, lambda x: F.max_pool2d(x, 2), lambda: (r(1, 2, 4, 4),)),
    # ceil_mode where torch drops the last window (it would start in the padding).
    Case(aten.max_pool2d_with_indices.default, lambda x: F.max_pool2d(x, 2, 2, 1, ceil_mode=True),
         lambda: (r(1, 2, 5, 5),), id="ceil-window-in-padding"),
    Case(aten.max_pool2d_with_indices.default, lambda x: F.max_pool1d(x, 2), lambda: (r(1, 2, 6),), id="1d"),
    Case(aten.max_pool2d_with_indices.default, lambda x: F.max_pool2d(x, 2), lambda: (r(2, 4, 4),), id="unbatched"),
    Case(aten.avg_pool2d.default, lambda x: F.avg_pool2d(x, 2), lambda: (r(1, 2, 4, 4),)),
    Case(aten.avg_pool2d.default, lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), lambda: (r(1, 2, 6, 6),),
         id="pad-not-counted"),
    Case(aten.avg_pool2d.default, lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), lambda: (r(1, 2, 6, 6),),
         id="ceil"),
    Case(aten.avg_pool2d.default, lambda x: F.avg_pool2d(x, 2, 2, 1, ceil_mode=True, count_include_pad=False),
         lambda: (r(1, 2, 5, 5),), id="ceil-window-in-padding"),
    Case(aten._adaptive_avg_pool2d.default, lambda x: aten._adaptive_avg_pool2d.default(x, [1, 1]),
         lambda: (r(1, 2, 5, 3),), id="1x1"),
    Case(aten._adaptive_avg_pool2d.default, lambda x: F.adaptive_avg_pool2d(x, (1, 3)), lambda: (r(1, 2, 4, 6),),
         id="even-windows"),
    Case(aten._adaptive_avg_pool2d.default, lambda x: F.adaptive_avg_pool2d(x, 2), lambda: (r(2, 4, 6),),
         id="unbatched"),
    # -- normalization -------------------------------------------------------------------------
    Case(aten._native_batch_norm_legit_no_training.default, torch.nn.BatchNorm2d(3), lambda: (r(2, 3, 4, 4),)),
    Case(aten._native_batch_norm_legit_no_training.default, torch.nn.BatchNorm1d(4, affine=False),
         lambda: (r(3, 4),), id="1d-no-affine"),
    Case(aten.native_layer_norm.default, torch.nn.LayerNorm([3, 4]), lambda: (r(2, 3, 4),)),
    Case(aten.native_layer_norm.default, lambda x: F.layer_norm(x, (4,)), lambda: (r(2, 4),), id="no-weight"),
    Case(aten.native_layer_norm.default, torch.nn.LayerNorm(4, bias=False), lambda: (r(2, 4),), id="no-bias"),
    # -- matrix products -----------------------------------------------------------------------
    Case(aten.addmm.default, torch.nn.Linear(4, 3), lambda: (r(2, 4),)),
    Case(aten.addmm.default, lambda b, x, y: torch.addmm(b, x, y, beta=0.5, alpha=2),
         lambda: (r(3, 1), r(3, 4), r(4, 5)), id="alpha-beta"),
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
    Case(aten.slice.Tensor, lambda x: aten.slice.Tensor(x, -1, -100, 100, 3) * 2, lambda: (r(2, 7),),
         id="negative-out-of-range-step"),
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
    Case(aten._to_copy.default, lambda x: aten._to_copy.default(x, dtype=torch.int32), lambda: (r(6) * 5,),
         id="float-to-int"),
    Case(aten._to_copy.default, lambda x: aten._to_copy.default(x, dtype=torch.float32) / 3, lambda: (ri(6),),
         id="int-to-float"),
    Case(aten._to_copy.default, lambda x: aten._to_copy.default(x, dtype=torch.bool), lambda: (ri(6, high=2),),
         id="to-bool"),
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
    Case(aten.embedding.default, lambda w, i: F.embedding(i, w), lambda: (r(5, 3), torch.tensor([4, 0])),
         id="weight-input"),
    Case(aten.index_select.default, lambda x, i: x.index_select(-1, i), lambda: (r(3, 5), torch.tensor([4, 0, 4]))),
    Case(aten.gather.default, lambda x, i: x.gather(1, i), lambda: (r(3, 5), torch.tensor([[0, 4, 4], [2, 1, 0]])),
         id="smaller-index"),
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


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.op}{'-' + c.id if c.id else ''}")
def test_converter(case: Case, captured: list[torch.export.ExportedProgram]) -> None:
    inputs = case.make_inputs()
    lowered = lower_and_compare(case.fn, inputs, rtol=case.rtol, atol=case.atol)
    _ran_in_engine(lowered, case.op, captured[-1])


def test_every_converter_has_a_case() -> None:
    covered = {c.op for c in CASES}
    missing = sorted(str(op) for op in converters.supported_ops() - covered)
    assert not missing, f"converters without a test case: {missing}"
