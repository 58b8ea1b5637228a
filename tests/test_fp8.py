"""FP8 (E4M3) quantized models: each form users bring (casts to float8_e4m3fn with scales,
torchao's float8 quantize/dequantize, trt_lower.quantization.quantize(dtype="fp8")) runs as
opset-19 QuantizeLinear/DequantizeLinear inside an engine on target "latest" and matches eager;
targets, formats and places TensorRT has no FP8 for are refused with the reason."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import onnx
import pytest
import torch
import torch.nn.functional as F
import torchao.quantization.quant_primitives  # noqa: F401  (defines torchao's float8 ops)
from harness import Fn, check_onnx, lower_and_compare
from onnx import TensorProto
from test_quantization import Encoder, ResidualNet

import trt_lower

FP8 = torch.float8_e4m3fn
QUANTIZE = torch.ops.torchao.quantize_affine_float8_non_decomposed.default
DEQUANTIZE = torch.ops.torchao.dequantize_affine_float8_non_decomposed.default
qd = torch.ops.quantized_decomposed


def _fake(x: torch.Tensor, s: float | torch.Tensor) -> torch.Tensor:
    """ModelOpt's FP8 fake quantization."""
    return (x / s).clamp(-448, 448).to(FP8).to(x.dtype) * s


class CastLinear(torch.nn.Module):
    """ModelOpt style: fake-quantized activations (casts with scales around them) and an FP8
    weight kept as float8_e4m3fn, cast back and scaled per output channel."""

    def __init__(self) -> None:
        super().__init__()
        w = torch.randn(8, 16)
        self.register_buffer("w_scale", w.abs().amax(1, keepdim=True) / 448)
        self.register_buffer("w8", (w / self.w_scale).to(FP8))
        self.s = 2.0**-6

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(_fake(x, self.s), self.w8.to(torch.float32) * self.w_scale)


class TorchaoLinear(torch.nn.Module):
    """torchao's float8 ops: a per-tensor activation scale, per-channel weight scales."""

    def __init__(self, weight_scale: torch.Tensor | None = None) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 16))
        scale = self.w.detach().abs().amax(1, keepdim=True) / 448 if weight_scale is None else weight_scale
        self.register_buffer("w_scale", scale)
        self.register_buffer("s", torch.tensor(2.0**-6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = DEQUANTIZE(QUANTIZE(x, self.s, FP8), self.s, torch.float32)
        w = DEQUANTIZE(QUANTIZE(self.w, self.w_scale, FP8), self.w_scale, torch.float32)
        return F.linear(x, w)


def _fp8_initializers(lowered: trt_lower.LoweredModule) -> list[str]:
    graph = onnx.load_from_string(lowered.engine_0.onnx_bytes).graph
    return [i.name for i in graph.initializer if i.data_type == TensorProto.FLOAT8E4M3FN]


@pytest.mark.parametrize(
    "make, ops",
    [(CastLinear, ["aten._to_copy.default"]), (TorchaoLinear, [str(QUANTIZE), str(DEQUANTIZE)])],
    ids=["casts", "torchao"],
)
def test_each_fp8_form_runs_in_an_engine_and_matches_eager(make: Callable[[], torch.nn.Module], ops: list[str]) -> None:
    inputs = (torch.randn(4, 16) * 4,)
    lowered = lower_and_compare(make().eval(), inputs, ops=ops, trt_version="latest")
    graph = onnx.load_from_string(lowered.engine_0.onnx_bytes).graph
    assert {"QuantizeLinear", "DequantizeLinear"} <= {n.op_type for n in graph.node}
    assert len(_fp8_initializers(lowered)) >= 2, "the weight is an FP8 initializer, beside the zero points"
    assert lowered.report.engines[0].fp8_ops


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_a_cast_to_fp8_saturates_and_rounds_as_torch_does(dtype: torch.dtype) -> None:
    """Beyond +-448 (and infinities) the cast saturates; in range it rounds to nearest even:
    QuantizeLinear (saturate=1) does both as torch's cast does, from float16 too."""
    x = torch.tensor([[1000.0, -1000.0, float("inf"), 17.0, 19.0, 0.3, -5e-4, 464.0]])
    lower_and_compare(
        lambda t: (t.to(dtype) * 1).to(FP8).to(dtype), (x,), ops=["aten._to_copy.default"], trt_version="latest"
    )


@pytest.mark.parametrize(
    "version, reason",
    [
        ("8.6", "TensorRT 8.6 has no FP8"),
        ("10.4", "V100 (Volta) GPUs, which have no FP8"),
        ("10.12", "FP8 QuantizeLinear/DequantizeLinear need ONNX opset 19, and trt_lower emits opset 17"),
    ],
)
@pytest.mark.parametrize("make", [CastLinear, TorchaoLinear], ids=["casts", "torchao"])
def test_fp8_is_refused_on_targets_without_it(version: str, reason: str, make: Callable[[], torch.nn.Module]) -> None:
    model, inputs = make().eval(), (torch.randn(4, 16),)
    lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", min_block_size=1, trt_version=version)
    reasons = {
        f.reason.split(": ", 1)[-1] for f in lowered.report.fallbacks if "float8" in f.reason or "FP8" in f.reason
    }
    assert reasons and all(reason in r for r in reasons), lowered.report
    with torch.no_grad():
        torch.testing.assert_close(lowered(*inputs), model(*inputs))


# A weight with a scale per block of 8 inputs (two per output channel).
BLOCK_W, BLOCK_S = torch.randn(8, 16), torch.full((8, 2), 0.01)


def _decomposed_fp8(x: torch.Tensor) -> torch.Tensor:
    q = qd.quantize_per_tensor.default(x + 1, 0.05, 0, -448, 448, FP8)
    return qd.dequantize_per_tensor.default(q, 0.05, 0, -448, 448, FP8)


@pytest.mark.parametrize(
    "fn, reason",
    [
        (lambda x: (x * 2).to(torch.float8_e5m2).to(torch.float32), "TensorRT's FP8 is E4M3 (float8_e4m3fn) only"),
        (_decomposed_fp8, "rounds x / scale to an integer before the cast"),
        (lambda x: (x * 2).to(FP8), "its float8_e4m3fn result is read by output, not only by dequantizes"),
        (
            lambda x: DEQUANTIZE(
                QUANTIZE(x + 1, torch.full((1, 16), 0.1), FP8), torch.full((1, 16), 0.1), torch.float32
            ),
            "per-channel quantization of an activation",
        ),
        (
            lambda x: F.linear(x, DEQUANTIZE(QUANTIZE(BLOCK_W, BLOCK_S, FP8), BLOCK_S, torch.float32)),
            "TensorRT takes one scale per tensor or per output channel",
        ),
    ],
    ids=["e5m2", "quantized_decomposed", "fp8-output", "per-channel-activation", "block-scales"],
)
def test_what_tensorrt_cannot_take_of_fp8_is_refused(fn: Callable[..., Any], reason: str) -> None:
    inputs = (torch.randn(4, 16),)
    lowered = trt_lower.lower_to_trt(Fn(fn), inputs, backend="onnxruntime", min_block_size=1, trt_version="latest")
    assert any(reason in f.reason for f in lowered.report.fallbacks), lowered.report
    with torch.no_grad():
        expected, actual = Fn(fn)(*inputs), lowered(*inputs)
    torch.testing.assert_close(actual.float(), expected.float())


@pytest.mark.parametrize("trt_double", ["10.15.0", "11.0.0"], indirect=True)
@pytest.mark.parametrize("make", [CastLinear, TorchaoLinear], ids=["casts", "torchao"])
def test_tensorrt_builds_fp8_engines_strongly_typed(
    trt_double: ModuleType, make: Callable[[], torch.nn.Module]
) -> None:
    """TensorRT takes FP8's types from the Q/DQ in a strongly typed network (10.x's FP8 flag is
    gone in 11)."""
    model, inputs = make().eval(), (torch.randn(4, 16),)
    lowered = trt_lower.lower_to_trt(model, inputs, backend="tensorrt", require_full=True, min_block_size=1)
    assert lowered.report.trt_version == "latest" and lowered.report.engines[0].fp8_ops
    with torch.no_grad():
        torch.testing.assert_close(lowered(*inputs), model(*inputs))
    assert trt_double.state.last_build.network_flags in (0, 1 << 1)  # 11.x: always strongly typed
    if trt_double.__version__.startswith("10."):
        assert trt_double.state.last_build.network_flags == 1 << 1


# -- trt_lower.quantization.quantize(dtype="fp8") ----------------------------------------------
def _quantize_fp8(
    model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], batches: list[tuple[torch.Tensor, ...]]
) -> torch.fx.GraphModule:
    from trt_lower.quantization import quantize

    return quantize(model.eval(), inputs, batches, dtype="fp8")


def _activation_quantizes(quantized: torch.fx.GraphModule) -> int:
    return sum(n.target is QUANTIZE for n in quantized.graph.nodes)


def _assert_fp8_layers_match(
    quantized: torch.fx.GraphModule, lowered: torch.nn.Module, inputs: tuple[torch.Tensor, ...]
) -> None:
    """Each quantize node, its layer fed eager inputs: every FP8 value eager's or its neighbour
    (one FP8 step), and few neighbours."""
    from trt_lower.debug import quantized_layers

    layers = quantized_layers(quantized, lowered, inputs)
    assert len(layers) == _activation_quantizes(quantized), "a quantize node ran outside the engines"
    assert max(r.max_diff for r in layers) <= 1, layers
    assert sum(r.flipped for r in layers) <= 1e-3 * sum(r.total for r in layers), layers


@pytest.fixture(scope="module")
def fp8_net() -> tuple[torch.fx.GraphModule, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    inputs = (torch.randn(2, 3, 8, 8),)
    return _quantize_fp8(ResidualNet(), inputs, [(torch.randn(2, 3, 8, 8),) for _ in range(4)]), inputs


def test_a_conv_net_quantized_to_fp8_is_one_engine_agreeing_per_layer(
    fp8_net: tuple[torch.fx.GraphModule, tuple[torch.Tensor, ...]],
) -> None:
    quantized, inputs = fp8_net
    assert _activation_quantizes(quantized) == 4, "the stem, the conv, the residual add and the head"
    lowered = trt_lower.lower_to_trt(quantized, inputs, backend="onnxruntime", require_full=True, trt_version="latest")
    assert len(lowered.report.engines) == 1 and lowered.report.coverage == 1.0
    check_onnx(lowered)
    # weights stored as FP8 (folded by quantize), one scale per output channel
    graph = onnx.load_from_string(lowered.engine_0.onnx_bytes).graph
    assert len([i for i in graph.initializer if i.data_type == TensorProto.FLOAT8E4M3FN and len(i.dims) > 1]) == 3
    assert not [i.name for i in graph.initializer if i.data_type == TensorProto.FLOAT and len(i.dims) > 1]
    (engine,) = lowered.report.engines
    assert engine.fp8_ops == {"aten.convolution.default": 2, "aten.add.Tensor": 1, "aten.addmm.default": 1}
    assert engine.int8_ops == {} and "fp8: aten.convolution.default×2" in str(lowered.report)
    with torch.no_grad():
        torch.testing.assert_close(lowered(*inputs), quantized(*inputs))
    _assert_fp8_layers_match(quantized, lowered, inputs)
    assert trt_lower.check_accuracy(quantized, lowered, inputs, rtol=0, atol=1e-4).passed


def test_an_encoder_quantized_to_fp8_is_one_engine_agreeing_per_layer() -> None:
    torch.manual_seed(0)
    ids = [(torch.randint(0, 64, (2, 16)),) for _ in range(5)]
    quantized = _quantize_fp8(Encoder(), ids[0], ids[1:])
    assert _activation_quantizes(quantized) == 8, "4 linear inputs per layer"
    lowered = trt_lower.lower_to_trt(quantized, ids[0], backend="onnxruntime", require_full=True, trt_version="latest")
    assert len(lowered.report.engines) == 1 and lowered.report.coverage == 1.0
    check_onnx(lowered)
    _assert_fp8_layers_match(quantized, lowered, ids[0])


def test_quantized_layers_finds_an_fp8_dequantize_off_by_a_percent(
    fp8_net: tuple[torch.fx.GraphModule, tuple[torch.Tensor, ...]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from converters.core import registry
    from trt_lower.debug import quantized_layers

    quantized, inputs = fp8_net
    entry = registry._REGISTRY[str(DEQUANTIZE)]

    def planted(b: Any, x: Any, scale: Any, *args: Any) -> Any:
        return b.op("Mul", entry.fn(b, x, scale, *args), b.const(1.01, torch.float32), dtype=torch.float32)

    monkeypatch.setitem(registry._REGISTRY, entry.target, registry.Converter(entry.target, planted, entry.capability))
    lowered = trt_lower.lower_to_trt(quantized, inputs, backend="onnxruntime", trt_version="latest", verify=False)
    layers = quantized_layers(quantized, lowered, inputs)
    assert sum(r.flipped for r in layers) > 1e-2 * sum(r.total for r in layers), layers
    assert not trt_lower.check_accuracy(quantized, lowered, inputs, rtol=0, atol=1e-4).passed


def test_quantize_refuses_an_unknown_dtype() -> None:
    from trt_lower.quantization import quantize

    x = torch.randn(2, 3, 8, 8)
    with pytest.raises(ValueError, match="dtype must be one of .'int8', 'fp8', 'int4_weight_only'., got 'fp4'"):
        quantize(ResidualNet().eval(), x, [x], dtype="fp4")


def test_an_fp8_model_on_a_target_without_fp8_runs_its_qdq_eagerly(
    fp8_net: tuple[torch.fx.GraphModule, tuple[torch.Tensor, ...]],
) -> None:
    quantized, inputs = fp8_net
    lowered = trt_lower.lower_to_trt(quantized, inputs, backend="onnxruntime", trt_version="10.4")
    refused = {f.op for f in lowered.report.fallbacks if "no FP8" in f.reason}
    assert refused == {str(QUANTIZE), str(DEQUANTIZE)}, lowered.report
    with torch.no_grad():
        torch.testing.assert_close(lowered(*inputs), quantized(*inputs))
