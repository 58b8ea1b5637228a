"""Odd inputs: each gives what eager PyTorch gives, or a clear error naming the input.

NaN and Inf values, non-contiguous and channels-last tensors, zero-size dims inside a range,
inputs that require grad, the three grad modes, and tensors on a device the engine is not on."""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F
from harness import Fn, engine_ops
from trt_double.device import HostDevice

import trt_lower
from trt_lower import EngineInputError
from trt_lower.values import device
from trt_lower.values.signature import InputCheck, TensorSig

NAN, INF = float("nan"), float("inf")
# Every row mixes NaN, +-Inf and ordinary values (rows holding both NaN and +Inf: SPECIAL_PAIRS below).
ODD = torch.tensor([[NAN, 1.0, -2.0, 0.5], [INF, -INF, 3.0, 0.0], [0.1, 0.2, NAN, 7.0], [1.0, -INF, NAN, 4.0]])

NAN_CASES: dict[str, tuple[Callable[..., Any], str]] = {
    "relu": (torch.relu, "aten.relu.default"),
    "clamp": (lambda x: torch.clamp(x, -1, 1), "aten.clamp.default"),
    "maximum": (lambda x: torch.maximum(x, x.flip(0)), "aten.maximum.default"),
    "sigmoid": (torch.sigmoid, "aten.sigmoid.default"),
    "softmax": (lambda x: torch.softmax(x, -1), "aten._softmax.default"),
    "amax": (lambda x: x.amax(-1), "aten.amax.default"),
    "argmax": (lambda x: x.argmax(-1), "aten.argmax.default"),
    "sum": (lambda x: x.sum(-1), "aten.sum.dim_IntList"),
    "max_pool2d": (lambda x: F.max_pool2d(x[None], 2), "aten.max_pool2d_with_indices.default"),  # was inf: fixed
    "adaptive_max_pool2d": (lambda x: F.adaptive_max_pool2d(x[None], 1), "aten.adaptive_max_pool2d.default"),
    "sort": (lambda x: torch.sort(x, -1)[0], "aten.sort.default"),  # NaN was misplaced: fixed
    "topk": (lambda x: torch.topk(x, 2)[0], "aten.topk.default"),  # NaN was dropped: fixed
    "sign": (torch.sign, "aten.sign.default"),  # was NaN, torch gives 0: fixed
    "where": (lambda x: torch.where(x > 0, x, 0.0), "aten.where.ScalarOther"),
    "layer_norm": (lambda x: F.layer_norm(x, (4,)), "aten.native_layer_norm.default"),
    "div": (lambda x: 1 / x, "aten.reciprocal.default"),
    "log": (torch.log, "aten.log.default"),
    "isnan": (torch.isnan, "aten.isnan.default"),
    "nan_to_num": (torch.nan_to_num, "aten.nan_to_num.default"),
    # ReduceL2 gave FLT_MAX for a row holding an inf (found by tests/test_fuzz.py): fixed
    "vector_norm": (lambda x: torch.linalg.vector_norm(x, dim=0), "aten.linalg_vector_norm.default"),
}


@pytest.mark.parametrize("name", NAN_CASES)
def test_nan_and_inf_pass_through_as_eager_computes_them(name: str) -> None:
    fn, op = NAN_CASES[name]
    lowered = trt_lower.lower_to_trt(Fn(fn), (ODD,), backend="onnxruntime", min_block_size=1)
    assert op in engine_ops(lowered), lowered.report
    with torch.no_grad():
        torch.testing.assert_close(lowered(ODD), fn(ODD), equal_nan=True)


# Every pair of special values as (y, x), and rows holding both NaN and +Inf.
_SPECIAL = [INF, -INF, 0.0, -0.0, 1.0, -1.0, NAN]
PAIR_Y = torch.tensor([y for y in _SPECIAL for _ in _SPECIAL])
PAIR_X = torch.tensor([x for _ in _SPECIAL for x in _SPECIAL])
NAN_AND_INF = torch.tensor([[NAN, INF, 1.0, -INF, INF], [INF, NAN, NAN, 0.0, -2.0], [1.0, INF, NAN, INF, NAN]])
SPECIAL_PAIRS: dict[str, tuple[Callable[..., Any], str, tuple[torch.Tensor, ...]]] = {
    # All three were found by tests/test_fuzz.py and fixed.
    "atan2": (torch.atan2, "aten.atan2.default", (PAIR_Y, PAIR_X)),  # was NaN for two infinities, ignored -0.0
    "normalize": (
        lambda x: F.normalize(x, dim=-1),
        "aten.clamp_min.default",
        (NAN_AND_INF.nan_to_num(0.0, INF, -INF),),
    ),  # was ±Inf/0: Clip made Inf FLT_MAX
    "sort": (lambda x: torch.sort(x, -1).values, "aten.sort.default", (NAN_AND_INF,)),  # NaN was below +Inf
    "sort_descending": (lambda x: torch.sort(x, 0, descending=True).values, "aten.sort.default", (NAN_AND_INF,)),
    "topk": (lambda x: torch.topk(x, 2).values, "aten.topk.default", (NAN_AND_INF,)),
    "topk_smallest": (lambda x: torch.topk(x, 4, largest=False).values, "aten.topk.default", (NAN_AND_INF,)),
    "sort_indices": (
        lambda x: x.gather(-1, torch.sort(x, -1, descending=True).indices),
        "aten.sort.default",
        (NAN_AND_INF,),
    ),
}


@pytest.mark.parametrize("name", SPECIAL_PAIRS)
def test_special_value_pairs_give_eager_results_with_the_sign_of_zero(name: str) -> None:
    fn, op, inputs = SPECIAL_PAIRS[name]
    lowered = trt_lower.lower_to_trt(Fn(fn), inputs, backend="onnxruntime", min_block_size=1)
    assert op in engine_ops(lowered), lowered.report
    with torch.no_grad():
        actual, expected = lowered(*inputs), fn(*inputs)
    torch.testing.assert_close(actual, expected, equal_nan=True)
    assert torch.equal(actual.signbit() & ~actual.isnan(), expected.signbit() & ~expected.isnan())


# Floor division and remainder of floats where x / y rounds (1 // 0.1 is 9, not 10) or an operand is
# infinite (inf // 3 is NaN, -1 // inf is -1, -1 % inf is inf): torch computes both from fmod. Were
# Floor(x / y) and x - y * Floor(x / y); the fuzzer's inputs, multiples of 1/8, divide exactly.
DIVIDEND = torch.tensor([1.0, 1.0, -1.0, 5.3, -5.3, 7.0, INF, -INF, 1.0, -1.0, 0.0, 1.0, NAN, 3.0, 0.7, 2.9, -4.0])
DIVISOR = torch.tensor([0.1, 0.3, 0.3, 0.1, 0.7, -0.7, 3.0, 3.0, INF, INF, -INF, 0.0, 1.0, -INF, 0.1, 0.1, 2.0])
FLOORED: dict[str, tuple[Callable[..., Any], str]] = {
    "floor_divide": (lambda x, y: x // y, "aten.floor_divide.default"),
    "div_floor": (lambda x, y: torch.div(x, y, rounding_mode="floor"), "aten.div.Tensor_mode"),
    "remainder": (torch.remainder, "aten.remainder.Tensor"),
    "remainder_scalar": (lambda x, y: torch.remainder(x, 0.1), "aten.remainder.Scalar"),
}


@pytest.mark.parametrize("name", FLOORED)
def test_floored_division_of_floats_starts_from_fmod_as_torch_does(name: str) -> None:
    fn, op = FLOORED[name]
    lowered = trt_lower.lower_to_trt(Fn(fn), (DIVIDEND, DIVISOR), backend="onnxruntime", min_block_size=1)
    assert op in engine_ops(lowered), lowered.report
    # Compared exactly (up to the sign of a zero): a rounded quotient is off by a whole divisor.
    torch.testing.assert_close(lowered(DIVIDEND, DIVISOR), fn(DIVIDEND, DIVISOR), rtol=0, atol=0, equal_nan=True)


# Found by a sweep of special values, each fixed: a NaN `threshold` gave its value, a NaN clamp
# bound was ignored, x ** 0.5 / x ** -0.5 followed C's pow (inf at -inf, +inf at -0.0) where torch
# takes sqrt / rsqrt, and log1p / expm1 lost all precision near 0 (19 % off at 1e-7, 0 below 6e-8).
SWEPT = torch.tensor(
    [0.0, -0.0, 1e-7, -1e-7, 1e-10, -1e-30, 0.25, -0.5, 1.0, -1.0, 4.0, 88.0, 89.0, 1e30, -2.0, INF, -INF, NAN]
)
SWEPT_CASES: dict[str, tuple[Callable[..., Any], str]] = {
    "threshold": (lambda x: F.threshold(x, 0.5, -9.0), "aten.threshold.default"),
    "clamp_nan_min": (lambda x: torch.clamp(x, min=NAN), "aten.clamp.default"),
    "clamp_nan_max": (lambda x: torch.clamp(x, max=NAN), "aten.clamp.default"),
    "sqrt_pow": (lambda x: x**0.5, "aten.pow.Tensor_Scalar"),
    "rsqrt_pow": (lambda x: x**-0.5, "aten.pow.Tensor_Scalar"),
    "log1p": (torch.log1p, "aten.log1p.default"),
    "expm1": (torch.expm1, "aten.expm1.default"),
}


@pytest.mark.parametrize("name", SWEPT_CASES)
def test_special_and_tiny_values_give_eager_results(name: str) -> None:
    fn, op = SWEPT_CASES[name]
    lowered = trt_lower.lower_to_trt(Fn(fn), (SWEPT,), backend="onnxruntime", min_block_size=1)
    assert op in engine_ops(lowered), lowered.report
    actual, expected = lowered(SWEPT), fn(SWEPT)
    torch.testing.assert_close(actual, expected, rtol=3e-7, atol=0, equal_nan=True)
    if name.endswith("pow"):  # (log1p/expm1 of -0.0 pass through ONNX Runtime's Where: +0.0)
        assert torch.equal(actual.signbit() & ~actual.isnan(), expected.signbit() & ~expected.isnan())


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_the_smallest_integer_divided_by_minus_one_does_not_kill_the_process(dtype: torch.dtype) -> None:
    """The CPU's integer division traps on it (the process died with SIGFPE); torch's floor
    division gives the smallest integer back, as negation does, and a remainder of 0."""
    low = torch.iinfo(dtype).min
    x, y = torch.tensor([low, low, 7, -7], dtype=dtype), torch.tensor([-1, 2, -1, 2], dtype=dtype)
    fn = Fn(lambda a, b: (a // b, torch.remainder(a, b), torch.div(a, b, rounding_mode="trunc")))
    example = (x.abs(), y.abs())  # eager's own truncating division traps on the pair: lowered on others
    lowered = trt_lower.lower_to_trt(fn, example, backend="onnxruntime", min_block_size=1)
    assert not lowered.report.fallbacks, lowered.report
    floor, rest, trunc = lowered(x, y)
    torch.testing.assert_close((floor, rest), (x // y, torch.remainder(x, y)), rtol=0, atol=0)
    assert trunc.tolist() == [low, low // 2, -7, -3]  # eager's own division traps here


# var_mean's and std_mean's mean is torch's running (Welford) mean: an infinity before a slice's
# last element makes it NaN, one at the end keeps it (found by tests/test_fuzz.py: was ±Inf). Rows
# along the last dim: Inf first, -Inf last, Inf last, two Infs; columns and planes mix them.
RUNNING = torch.arange(60.0).reshape(3, 4, 5) / 8
RUNNING[0, 0, 0] = RUNNING[1, 2, 4] = RUNNING[2, 1, 1] = RUNNING[2, 1, 4] = INF
RUNNING[0, 3, 4] = -INF


@pytest.mark.parametrize("dim, keepdim", [(-1, False), (1, False), ((1, 2), True), (None, False), ((0, 2), False)])
@pytest.mark.parametrize("op", [torch.var_mean, torch.std_mean])
def test_var_mean_and_std_mean_keep_torchs_running_mean_of_infinities(op: Any, dim: Any, keepdim: bool) -> None:
    fn = Fn(lambda x: op(x, dim, keepdim=keepdim))
    lowered = trt_lower.lower_to_trt(fn, (RUNNING,), backend="onnxruntime", min_block_size=1)
    assert f"aten.{op.__name__}.correction" in engine_ops(lowered), lowered.report
    with torch.no_grad():
        actual, expected = lowered(RUNNING), fn(RUNNING)
    if dim == -1:  # rows with an infinity last keep it, the others are NaN
        assert expected[1].isinf().sum() == 2 and expected[1].isnan().sum() == 2
    torch.testing.assert_close(actual, expected, equal_nan=True)


class Convnet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.lin = torch.nn.Linear(4 * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(F.max_pool2d(torch.relu(self.conv(x)), 2).flatten(1))


@pytest.fixture(scope="module")
def convnet() -> tuple[torch.nn.Module, trt_lower.LoweredModule]:
    torch.manual_seed(0)
    model = Convnet().eval()
    return model, trt_lower.lower_to_trt(model, (torch.randn(2, 3, 8, 8),), backend="onnxruntime", min_block_size=1)


@pytest.mark.parametrize("layout", ["channels_last", "permuted", "strided", "expanded"])
def test_non_contiguous_inputs_give_eager_results(
    convnet: tuple[torch.nn.Module, trt_lower.LoweredModule], layout: str
) -> None:
    model, lowered = convnet
    x = {
        "channels_last": lambda: torch.randn(2, 3, 8, 8).to(memory_format=torch.channels_last),
        "permuted": lambda: torch.randn(8, 8, 3, 2).permute(3, 2, 0, 1),
        "strided": lambda: torch.randn(2, 3, 8, 16)[..., ::2],
        "expanded": lambda: torch.randn(1, 3, 8, 8).expand(2, 3, 8, 8),
    }[layout]()
    assert not x.is_contiguous()
    with torch.no_grad():
        torch.testing.assert_close(lowered(x), model(x))


@pytest.mark.parametrize("view", ["imaginary part of a conjugate", "contiguous"])
def test_a_lazily_negated_input_gives_eager_results(
    convnet: tuple[torch.nn.Module, trt_lower.LoweredModule], view: str
) -> None:
    model, lowered = convnet
    # torch negates these views lazily: their memory holds the values' negatives.
    x = (
        torch.randn(2, 3, 8, 8, dtype=torch.complex64).conj().imag
        if view != "contiguous"
        else torch._neg_view(torch.randn(2, 3, 8, 8))
    )
    assert x.is_neg() and x.is_contiguous() == (view == "contiguous")
    with torch.no_grad():
        torch.testing.assert_close(lowered(x), model(x))


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode", "neither"])
def test_every_grad_mode_gives_eager_results(
    convnet: tuple[torch.nn.Module, trt_lower.LoweredModule], mode: str
) -> None:
    model, lowered = convnet
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        expected = model(x)
    context = {"no_grad": torch.no_grad, "inference_mode": torch.inference_mode, "neither": torch.enable_grad}[mode]
    with context():
        for given in (x, x.clone().requires_grad_()):
            actual = lowered(given)
            torch.testing.assert_close(actual, expected)
            assert not actual.requires_grad  # engines are inference only


def test_zero_size_dims_inside_a_range_give_eager_results() -> None:
    spec = trt_lower.TensorSpec((0, 8), (4, 8), (16, 8))
    fn = Fn(lambda a: torch.softmax(torch.relu(a @ torch.linspace(-1, 1, 24).reshape(8, 3)) * 2, -1))
    lowered = trt_lower.lower_to_trt(fn, (spec,), backend="onnxruntime", min_block_size=1)
    assert len(lowered.report.engines) == 1 and not lowered.report.fallbacks
    for batch in (0, 1, 5, 16):
        x = torch.randn(batch, 8)
        torch.testing.assert_close(lowered(x), fn(x))
    with pytest.raises(EngineInputError, match=r"range \(0\.\.16, 8\) float32, got \(17, 8\)"):
        lowered(torch.randn(17, 8))


def test_a_mean_over_a_dim_that_may_be_empty_is_nan_where_it_is() -> None:
    """torch's mean of no elements is 0 / 0; ONNX Runtime's ReduceMean gave 0 where a dim declared
    from 0 was 0 at run time (torch.export starts its range at 2, which the converter trusted)."""
    spec = trt_lower.TensorSpec((0, 4, 0), (3, 4, 5), (6, 4, 8))
    fn = Fn(lambda x: (x.mean((0, 2)), torch.var_mean(x, (0, 2))[1], x.mean()))
    lowered = trt_lower.lower_to_trt(fn, (spec,), backend="onnxruntime", min_block_size=1)
    assert len(lowered.report.engines) == 1 and not lowered.report.fallbacks
    for shape in ((0, 4, 5), (3, 4, 0), (3, 4, 5), (1, 4, 1)):
        x = torch.randn(shape)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's: var_mean with no degrees of freedom
            torch.testing.assert_close(lowered(x), fn(x), equal_nan=True)


def test_input_requiring_grad_runs_and_its_result_carries_no_graph(
    convnet: tuple[torch.nn.Module, trt_lower.LoweredModule],
) -> None:
    model, lowered = convnet
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    actual = lowered(x)
    torch.testing.assert_close(actual, model(x).detach())
    assert not actual.requires_grad


def test_eager_weights_before_an_engine_outside_no_grad() -> None:
    # The eager convolution's weights require grad, so its output, the engine's input, does too.
    torch.manual_seed(0)
    model, x = Convnet().eval(), torch.randn(2, 3, 8, 8)
    lowered = trt_lower.lower_to_trt(
        model, (x,), backend="onnxruntime", min_block_size=1, fallback_ops=["aten.convolution.default"]
    )
    torch.testing.assert_close(lowered(x), model(x).detach())


def test_a_tensor_on_another_device_is_refused_naming_both_devices(
    convnet: tuple[torch.nn.Module, trt_lower.LoweredModule],
) -> None:
    # A CUDA tensor where there is one; 'meta' stands in for any non-CPU device elsewhere.
    other = "cuda" if torch.cuda.is_available() else "meta"
    with pytest.raises(EngineInputError, match=rf"input '\w+' is on {other}(:0)?, the engine runs on cpu"):
        convnet[1](torch.randn(2, 3, 8, 8, device=other))


class _OnIndexZero(torch.Tensor):
    """A tensor of another GPU kind (XPU, MPS): get_device() is 0, as a cuda:0 tensor's is."""

    def get_device(self) -> int:
        return 0


def test_a_tensor_of_another_gpu_kind_with_the_engines_index_is_refused() -> None:
    sig = TensorSig("x", "x", torch.float32, (2,), (2,), (2,))
    check = InputCheck("", (sig,), torch.device("cuda", 0))
    other = torch.Tensor._make_subclass(_OnIndexZero, torch.randn(2))
    with pytest.raises(EngineInputError, match=r"input 'x' is on cpu, the engine runs on cuda:0"):
        check((other,))


def test_requires_grad_and_grad_modes_on_tensorrt(trt_double: ModuleType) -> None:
    torch.manual_seed(0)
    model, x = Convnet().eval(), torch.randn(2, 3, 8, 8)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="tensorrt", min_block_size=1)
    with torch.no_grad():
        expected = model(x)
    for context in (torch.no_grad, torch.inference_mode, torch.enable_grad):
        with context():
            torch.testing.assert_close(lowered(x.clone().requires_grad_()), expected)
            torch.testing.assert_close(lowered(x.to(memory_format=torch.channels_last)), expected)


def test_a_cpu_tensor_given_to_a_tensorrt_engine_is_refused_naming_both_devices(trt_double: ModuleType) -> None:
    # The double runs on the host; an engine whose device is 'meta' stands in for one on a GPU.
    with device.using(HostDevice("meta")):
        # verify=False: a 'meta' engine computes nothing to verify.
        lowered = trt_lower.lower_to_trt(
            Convnet().eval(), (torch.randn(2, 3, 8, 8),), backend="tensorrt", min_block_size=1, verify=False
        )
        with pytest.raises(
            EngineInputError,
            match=r"input '\w+' is on cpu, the engine runs on meta; "
            r"move the model and its inputs there \(.to\('meta'\)\)",
        ):
            lowered(torch.randn(2, 3, 8, 8))
