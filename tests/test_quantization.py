"""Quantized models (int8 Q/DQ): what TensorRT cannot take is refused with its reason (and runs
eagerly, still right), the TensorRT double refuses it as TensorRT does, and the engines a
quantized model lowers to are audited and built as explicit quantization."""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any, Callable

import onnx
import pytest
import torch
import torch.nn.functional as F
from harness import Fn, check_onnx
from onnx import TensorProto, helper

import converters.ops.quantize  # noqa: F401  (quantized_decomposed)
import trt_lower
from converters.passes import trt_support
from trt_lower.deploy import artifact
from trt_lower.deploy.container import open_file

qd = torch.ops.quantized_decomposed
aten = torch.ops.aten
S = 2.0**-4
W = torch.randn(4, 2, 3, 3)
W_SCALES, W_ZEROS = torch.full((4,), 2.0**-5), torch.zeros(4, dtype=torch.int32)


def _qdq(
    x: torch.Tensor, zero_point: int = 0, low: int = -128, high: int = 127, dtype: torch.dtype = torch.int8
) -> torch.Tensor:
    q = qd.quantize_per_tensor.default(x, S, zero_point, low, high, dtype)
    return qd.dequantize_per_tensor.default(q, S, zero_point, low, high, dtype)


def _eager_reason(fn: Callable[..., Any], inputs: tuple[torch.Tensor, ...], op: str, **kwargs: Any) -> str:
    """Lower `fn`, check it still matches eager, and return why `op` stayed eager."""
    lowered = trt_lower.lower_to_trt(Fn(fn), inputs, backend="onnxruntime", min_block_size=1, **kwargs)
    torch.testing.assert_close(lowered(*inputs), fn(*inputs))
    reasons = [f.reason for f in lowered.report.fallbacks if f.op == op]
    assert reasons, f"{op} ran in an engine: {lowered.report}"
    return reasons[0]


@pytest.mark.parametrize(
    "fn, op, reason",
    [
        (
            lambda x: _qdq(x + 1, zero_point=3),
            "quantized_decomposed.quantize_per_tensor.default",
            "asymmetric quantization (zero point 3",
        ),
        (
            lambda x: _qdq(x + 1, zero_point=128, low=0, high=255, dtype=torch.uint8),
            "quantized_decomposed.quantize_per_tensor.default",
            "uint8 quantization",
        ),
        (
            lambda x: torch.fake_quantize_per_tensor_affine(x + 1, S, 5, -128, 127),
            "aten.fake_quantize_per_tensor_affine_cachemask.default",
            "asymmetric quantization (zero point 5",
        ),
        (
            lambda x: torch.fake_quantize_per_tensor_affine(x + 1, S, 128, 0, 255),
            "aten.fake_quantize_per_tensor_affine_cachemask.default",
            "uint8 quantization",
        ),
        (
            lambda x: torch.fake_quantize_per_tensor_affine(x + 1, S, 0, -127, 127),
            "aten.fake_quantize_per_tensor_affine_cachemask.default",
            "range [-127, 127] on an activation",
        ),
        (
            lambda x: F.conv2d(
                x,
                torch.fake_quantize_per_channel_affine(
                    W, torch.full((3,), S), torch.zeros(3, dtype=torch.int32), 2, -128, 127
                ),
            ),
            "aten.fake_quantize_per_channel_affine_cachemask.default",
            "per-channel axis 2",
        ),
        (
            lambda x: torch.fake_quantize_per_channel_affine(
                x + 1, torch.full((2,), S), torch.zeros(2, dtype=torch.int32), 1, -128, 127
            ),
            "aten.fake_quantize_per_channel_affine_cachemask.default",
            "per-channel quantization of an activation",
        ),
    ],
    ids=["asymmetric", "uint8", "fake-asymmetric", "fake-uint8", "fake-narrow-activation", "axis", "activation"],
)
def test_what_tensorrt_cannot_quantize_is_refused(fn: Callable[..., Any], op: str, reason: str) -> None:
    assert reason in _eager_reason(fn, (torch.randn(1, 2, 5, 5),), op)


def test_int8_crosses_no_engine_boundary() -> None:
    """An int8 model input to dequantize, and a quantized result the model returns, stay eager."""

    def fn(q: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return qd.dequantize_per_tensor.default(q, S, 0, -128, 127, torch.int8) + 1, qd.quantize_per_tensor.default(
            x * 2, S, 0, -128, 127, torch.int8
        )

    inputs = (torch.randint(-128, 128, (4,), dtype=torch.int8), torch.randn(4))
    assert "neither a weight nor quantized" in _eager_reason(
        fn, inputs, "quantized_decomposed.dequantize_per_tensor.default"
    )
    assert "not only by dequantizes" in _eager_reason(fn, inputs, "quantized_decomposed.quantize_per_tensor.default")


def _qdq_onnx(zero_point: float, zero_type: int = TensorProto.INT8) -> onnx.ModelProto:
    """A QuantizeLinear and DequantizeLinear of one zero point: int8 at opset 17, FP8 (E4M3) at
    opset 19, which brought its types."""
    opset = 17 if zero_type == TensorProto.INT8 else 19
    graph = helper.make_graph(
        [
            helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q/QuantizeLinear"),
            helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq/DequantizeLinear"),
        ],
        "qdq",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [helper.make_tensor("s", TensorProto.FLOAT, [], [0.1]), helper.make_tensor("z", zero_type, [], [zero_point])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8 if opset == 17 else 9)


@pytest.mark.parametrize("version", ["8.6", "10.4", "latest"])
def test_support_table_takes_symmetric_int8_qdq_only(version: str) -> None:
    assert trt_support.violations(_qdq_onnx(0), version) == []
    rules = {v.rule for v in trt_support.violations(_qdq_onnx(3), version)}
    assert rules == {
        "QuantizeLinear's zero point must be 0 (TensorRT quantizes symmetrically)",
        "DequantizeLinear's zero point must be 0 (TensorRT quantizes symmetrically)",
    }


def test_support_table_takes_symmetric_fp8_qdq_on_latest_only() -> None:
    fp8 = TensorProto.FLOAT8E4M3FN
    assert trt_support.violations(_qdq_onnx(0, fp8), "latest") == []
    rules = {v.rule for v in trt_support.violations(_qdq_onnx(2, fp8), "latest")}
    assert rules == {
        "QuantizeLinear's zero point must be 0 (TensorRT quantizes symmetrically)",
        "DequantizeLinear's zero point must be 0 (TensorRT quantizes symmetrically)",
    }
    for version in ("8.6", "10.4", "10.12"):
        rules = {v.rule for v in trt_support.violations(_qdq_onnx(0, fp8), version)}
        assert any(r.startswith("QuantizeLinear with FP8: ") for r in rules), (version, rules)


@pytest.mark.parametrize(
    "trt_double, zero_type",
    [("10.4.0", TensorProto.INT8), ("10.15.0", TensorProto.FLOAT8E4M3FN)],
    indirect=["trt_double"],
    ids=["int8", "fp8"],
)
def test_tensorrt_double_refuses_a_non_zero_zero_point(trt_double: ModuleType, zero_type: int) -> None:
    from trt_lower.runtime.trt_logger import LOGGER

    builder = trt_double.Builder(LOGGER)
    parser = trt_double.OnnxParser(builder.create_network(0), LOGGER)
    assert parser.parse(_qdq_onnx(0, zero_type).SerializeToString())
    parser = trt_double.OnnxParser(builder.create_network(0), LOGGER)
    assert not parser.parse(_qdq_onnx(3, zero_type).SerializeToString())
    assert "TensorRT only supports symmetric quantization" in parser.get_error(0).desc()
    LOGGER.take_errors()


class QuantizedConv(torch.nn.Module):
    """conv + linear with PT2E-style int8 weights (folded) and per-tensor activations."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("w", qd.quantize_per_channel.default(W, W_SCALES, W_ZEROS, 0, -128, 127, torch.int8))
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = qd.dequantize_per_channel.default(self.w, W_SCALES, W_ZEROS, 0, -128, 127, torch.int8)
        y = torch.relu(F.conv2d(_qdq(x), w, padding=1))
        return self.lin(_qdq(y.mean((2, 3))))


@pytest.mark.parametrize("version", ["8.6", "10.4", "latest"])
def test_a_quantized_model_is_one_engine_whose_qdq_pass_every_table(version: str) -> None:
    model, inputs = QuantizedConv().eval(), (torch.randn(2, 2, 6, 6),)
    lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", require_full=True, trt_version=version)
    check_onnx(lowered)  # every Q/DQ node against `version`'s table
    ops = {n.op_type for n in onnx.load_from_string(lowered.engine_0.onnx_bytes).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    with torch.no_grad():
        torch.testing.assert_close(lowered(*inputs), model(*inputs))


def test_fp16_engines_keep_their_qdq_float32() -> None:
    """Opset 17's QuantizeLinear/DequantizeLinear read and write float32 only."""
    model, inputs = QuantizedConv().eval(), (torch.randn(2, 2, 6, 6),)
    lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", require_full=True, precision="fp16")
    check_onnx(lowered)
    with torch.no_grad():
        torch.testing.assert_close(lowered(*inputs), model(*inputs), rtol=1e-2, atol=S)


@pytest.mark.parametrize("trt_double", ["10.4.0", "8.6.1"], indirect=True)
def test_tensorrt_builds_quantized_engines_with_the_int8_flag(trt_double: ModuleType) -> None:
    model, inputs = QuantizedConv().eval(), (torch.randn(2, 2, 6, 6),)
    lowered = trt_lower.lower_to_trt(model, inputs, backend="tensorrt", require_full=True)
    with torch.no_grad():
        torch.testing.assert_close(lowered(*inputs), model(*inputs))
    assert trt_double.state.last_build.builder_flags & 1 << int(trt_double.BuilderFlag.INT8)


# -- trt_lower.quantization: PT2E for TensorRT -------------------------------------------------
class ResidualNet(torch.nn.Module):
    """conv-bn-relu, a residual conv block, a linear head: every place TensorRT wants Q/DQ."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU())
        self.conv = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        y = torch.relu(self.bn(self.conv(y)) + y)
        return self.head(y.mean((2, 3)))


class Attention(torch.nn.Module):
    """Linear projections and the two matmuls of attention."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.out = torch.nn.Linear(16, 48), torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        weights = torch.softmax(q @ k.transpose(1, 2) / 4, dim=-1)
        return self.out(weights @ v) + x


def _steps(quantized: torch.fx.GraphModule) -> list[float]:
    return [float(n.args[1]) for n in quantized.graph.nodes if n.target == qd.quantize_per_tensor.default]


def _assert_within_one_step(actual: torch.Tensor, expected: torch.Tensor, step: float) -> None:
    """At most one step of the coarsest activation quantization apart: float arithmetic in
    another order may round an activation sitting at a rounding boundary the other way. Holds end
    to end for shallow models only: in a deep one a flipped code moves others in the layers after
    it (bench/bench_quant.py), which _assert_layers_match checks layer by layer."""
    error = (actual - expected).abs()
    assert error.max() <= step, f"max error {error.max()} above one quantization step {step}"


def _assert_layers_match(
    quantized: torch.fx.GraphModule, lowered: torch.nn.Module, inputs: tuple[torch.Tensor, ...]
) -> None:
    """Each quantize node, its layer fed eager inputs: every int8 code eager's or a neighbour (a
    value on a rounding boundary), and few neighbours (BERT-base: 3e-6 of its codes)."""
    from trt_lower.debug import quantized_layers

    layers = quantized_layers(quantized, lowered, inputs)
    assert len(layers) == len(_steps(quantized)), "a quantize node ran outside the engines"
    assert max(r.max_diff for r in layers) <= 1, layers
    assert sum(r.flipped for r in layers) <= 1e-3 * sum(r.total for r in layers), layers


class Encoder(torch.nn.Module):
    """A two-layer BERT encoder (transformers), its hidden states alone."""

    def __init__(self) -> None:
        super().__init__()
        from transformers import BertConfig, BertModel

        self.bert = BertModel(
            BertConfig(
                vocab_size=64,
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=64,
                max_position_embeddings=16,
            )
        )

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        hidden: torch.Tensor = self.bert(ids).last_hidden_state
        return hidden


@pytest.mark.parametrize(
    "make, shape", [(ResidualNet, (2, 3, 8, 8)), (Attention, (2, 6, 16))], ids=["residual-convnet", "attention"]
)
def test_quantize_gives_one_int8_engine_matching_the_quantized_model(
    make: Callable[[], torch.nn.Module], shape: tuple[int, ...]
) -> None:
    from trt_lower.quantization import quantize

    model = make().eval()
    inputs = (torch.randn(shape),)
    quantized = quantize(model, inputs, [(torch.randn(shape),) for _ in range(4)])
    steps = _steps(quantized)
    assert steps, "no activation was quantized"
    lowered = trt_lower.lower_to_trt(quantized, inputs, backend="onnxruntime", require_full=True)
    assert len(lowered.report.engines) == 1 and lowered.report.coverage == 1.0
    check_onnx(lowered)
    ops = [n.op_type for n in onnx.load_from_string(lowered.engine_0.onnx_bytes).graph.node]
    # Every conv/matmul reads dequantized int8 on both sides (weights folded to int8).
    assert ops.count("DequantizeLinear") >= 2 * (ops.count("Conv") + ops.count("MatMul") + ops.count("Gemm"))
    with torch.no_grad():
        _assert_within_one_step(lowered(*inputs), quantized(*inputs), max(steps))
    _assert_layers_match(quantized, lowered, inputs)


def test_calibration_batches_may_be_tensors_tuples_or_lists() -> None:
    """A bare tensor per batch (what a DataLoader of inputs yields), or a list of inputs, gives
    what tuples of inputs give."""
    from trt_lower.quantization import quantize

    torch.manual_seed(0)
    model = Attention().eval()
    batches = [torch.randn(2, 6, 16) for _ in range(3)]
    reference = quantize(model, (batches[0],), [(b,) for b in batches])
    for example, forms in ((batches[0], batches), ([batches[0]], [[b] for b in batches])):
        other = quantize(model, example, forms)
        assert _steps(other) == _steps(reference) and _steps(reference)
        torch.testing.assert_close(other(batches[1]), reference(batches[1]))


def test_calibration_data_quantize_cannot_observe_is_refused_naming_the_batch() -> None:
    from trt_lower.quantization import CalibrationError, quantize

    model = Attention().eval()
    x = torch.randn(2, 6, 16)
    for value in (math.nan, math.inf):
        bad = x.clone()
        bad[1, 2, 3] = value
        with pytest.raises(CalibrationError, match="calibration batch 2: its tensor 0 holds NaN or infinite values"):
            quantize(model, x, [x, (x,), [bad]])
    with pytest.raises(CalibrationError, match="calibration_batches is empty"):
        quantize(model, x, iter([]))
    with pytest.raises(CalibrationError, match="calibration batch 1 holds 2 input.s., the example inputs 1"):
        quantize(model, x, [x, (x, x)])
    with pytest.raises(CalibrationError, match="calibration batch 0 is a dict: a batch is a tensor"):
        quantize(model, x, [{"x": x}])


def test_an_encoders_quantized_layers_match_eager() -> None:
    from trt_lower.quantization import quantize

    torch.manual_seed(0)
    ids = [(torch.randint(0, 64, (2, 16)),) for _ in range(5)]
    quantized = quantize(Encoder().eval(), ids[0], ids[1:])
    lowered = trt_lower.lower_to_trt(quantized, ids[0], backend="onnxruntime", require_full=True)
    assert len(_steps(quantized)) == 8, "4 linear inputs per layer"
    _assert_layers_match(quantized, lowered, ids[0])


class FakeQuantized(torch.nn.Module):
    """Quantized by hand, QAT style: per-channel fake-quantized weights, per-tensor activations."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.head = torch.nn.Conv2d(3, 8, 3), torch.nn.Linear(8, 4)
        for name, layer in (("conv", self.conv), ("head", self.head)):
            amax = layer.weight.detach().abs().flatten(1).amax(1)
            self.register_buffer(f"{name}_scale", amax / 127)
            self.register_buffer(f"{name}_zero", torch.zeros_like(amax, dtype=torch.int32))
        self.act = 2.0**-5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.fake_quantize_per_tensor_affine(x, self.act, 0, -128, 127)
        w = torch.fake_quantize_per_channel_affine(self.conv.weight, self.conv_scale, self.conv_zero, 0, -127, 127)
        y = torch.relu(F.conv2d(x, w, self.conv.bias)).mean((2, 3))
        y = torch.fake_quantize_per_tensor_affine(y, self.act, 0, -128, 127)
        w = torch.fake_quantize_per_channel_affine(self.head.weight, self.head_scale, self.head_zero, 0, -127, 127)
        return F.linear(y, w, self.head.bias)


def test_fake_quantized_model_is_one_engine_with_int8_weights() -> None:
    model, inputs = FakeQuantized().eval(), (torch.rand(2, 3, 8, 8),)
    lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", require_full=True)
    assert len(lowered.report.engines) == 1 and lowered.report.coverage == 1.0
    check_onnx(lowered)
    graph = onnx.load_from_string(lowered.engine_0.onnx_bytes).graph
    int8 = [i.name for i in graph.initializer if i.data_type == TensorProto.INT8 and len(i.dims) > 1]
    assert len(int8) == 2, "the two weights are int8 initializers"
    assert not [i.name for i in graph.initializer if i.data_type == TensorProto.FLOAT and len(i.dims) > 1]
    with torch.no_grad():
        _assert_within_one_step(lowered(*inputs), model(*inputs), model.act)


# -- report, accuracy tools, artifact ----------------------------------------------------------
@pytest.fixture(scope="module")
def quantized_net() -> tuple[torch.fx.GraphModule, tuple[torch.Tensor, ...]]:
    from trt_lower.quantization import quantize

    torch.manual_seed(0)
    inputs = (torch.randn(2, 3, 8, 8),)
    return quantize(ResidualNet().eval(), inputs, [(torch.randn(2, 3, 8, 8),) for _ in range(4)]), inputs


def test_report_names_the_layers_computing_in_int8(
    quantized_net: tuple[torch.fx.GraphModule, tuple[torch.Tensor, ...]],
) -> None:
    quantized, inputs = quantized_net
    lowered = trt_lower.lower_to_trt(quantized, inputs, backend="onnxruntime")
    (engine,) = lowered.report.engines
    # two convolutions, the residual add and the head (an addmm once captured)
    assert engine.int8_ops == {"aten.convolution.default": 2, "aten.add.Tensor": 1, "aten.addmm.default": 1}
    assert "int8: aten.convolution.default×2" in str(lowered.report)
    plain = trt_lower.lower_to_trt(ResidualNet().eval(), inputs, backend="onnxruntime")
    assert plain.report.engines[0].int8_ops == {}


def test_check_accuracy_and_first_divergence_on_a_quantized_graph(
    quantized_net: tuple[torch.fx.GraphModule, tuple[torch.Tensor, ...]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from converters.core import registry
    from trt_lower.debug import first_divergence

    quantized, inputs = quantized_net
    step = max(_steps(quantized))
    lowered = trt_lower.lower_to_trt(quantized, inputs, backend="onnxruntime")
    assert trt_lower.check_accuracy(quantized, lowered, inputs, rtol=0, atol=step).passed
    assert first_divergence(quantized, lowered, inputs, rtol=0, atol=step) is None

    # A dequantize converter that doubles its scale: both tools find it.
    entry = registry._REGISTRY[qd.dequantize_per_tensor.default]

    def doubled(b: Any, x: Any, scale: float, *args: Any, **kwargs: Any) -> Any:
        return entry.fn(b, x, scale * 2, *args, **kwargs)

    monkeypatch.setitem(registry._REGISTRY, entry.target, registry.Converter(entry.target, doubled, entry.capability))
    # verify=False: build-time verification would find the planted bug and keep it eager.
    broken = trt_lower.lower_to_trt(quantized, inputs, backend="onnxruntime", verify=False)
    assert not trt_lower.check_accuracy(quantized, broken, inputs, rtol=0, atol=step).passed
    found = first_divergence(quantized, broken, inputs, rtol=0, atol=step)
    assert found is not None and found.op == "quantized_decomposed.dequantize_per_tensor.default", str(found)


def _plant_dequantize_scale(monkeypatch: pytest.MonkeyPatch, factor: float) -> None:
    """A planted converter bug: dequantize_per_tensor emitted with its scale times `factor`."""
    from converters.core import registry

    entry = registry._REGISTRY[qd.dequantize_per_tensor.default]

    def planted(b: Any, x: Any, scale: float, *args: Any, **kwargs: Any) -> Any:
        return entry.fn(b, x, scale * factor, *args, **kwargs)

    monkeypatch.setitem(registry._REGISTRY, entry.target, registry.Converter(entry.target, planted, entry.capability))


def test_verification_repairs_a_wrong_dequantize(
    quantized_net: tuple[torch.fx.GraphModule, tuple[torch.Tensor, ...]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dequantize converter doubling its scale: verification keeps what it breaks out of the
    engines (never splitting at an int8 value), and the module agrees with eager again."""
    quantized, inputs = quantized_net
    _plant_dequantize_scale(monkeypatch, 2)
    lowered = trt_lower.lower_to_trt(quantized, inputs, backend="onnxruntime")
    assert lowered.report.repairs
    assert trt_lower.check_accuracy(quantized, lowered, inputs, rtol=0, atol=max(_steps(quantized))).passed


def test_quantized_layers_finds_a_dequantize_off_by_a_percent(
    quantized_net: tuple[torch.fx.GraphModule, tuple[torch.Tensor, ...]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from trt_lower.debug import quantized_layers

    quantized, inputs = quantized_net
    _plant_dequantize_scale(monkeypatch, 1.01)
    lowered = trt_lower.lower_to_trt(quantized, inputs, backend="onnxruntime")
    layers = quantized_layers(quantized, lowered, inputs)
    assert sum(r.flipped for r in layers) > 1e-2 * sum(r.total for r in layers), layers


def test_onnx_runtime_runs_quantized_engines_as_float_math(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """The sessions trt_lower creates keep ONNX Runtime's integer kernels out (on attention its QDQ
    fusions make QLinearMatMul and MatMulIntegerToFloat): they would compute in int8 what the Q/DQ
    leave float, and requantize in between."""
    import onnxruntime as ort

    from trt_lower.quantization import quantize

    optimized: list[onnx.ModelProto] = []
    create = ort.InferenceSession

    def session(model: bytes, options: ort.SessionOptions, **kwargs: Any) -> ort.InferenceSession:
        options.optimized_model_filepath = str(tmp_path / f"{len(optimized)}.onnx")
        created = create(model, options, **kwargs)
        optimized.append(onnx.load(options.optimized_model_filepath))
        return created

    torch.manual_seed(0)
    inputs = (torch.randn(2, 6, 16),)
    quantized = quantize(Attention().eval(), inputs, [inputs])
    monkeypatch.setattr(ort, "InferenceSession", session)  # the module trt_lower's sessions come from
    lowered = trt_lower.lower_to_trt(quantized, inputs, backend="onnxruntime")
    monkeypatch.undo()
    ops = {n.op_type for m in optimized for n in m.graph.node}
    assert "QuantizeLinear" in ops and not {
        o for o in ops if "Integer" in o or o.startswith("QLinear") or o.startswith("Dynamic") or o == "QGemm"
    }, ops
    with torch.no_grad():
        torch.testing.assert_close(lowered(*inputs), quantized(*inputs))


@pytest.mark.parametrize("dtype, version", [("int8", "10.4"), ("fp8", "latest")])
def test_artifact_of_a_quantized_model_stores_its_weights_quantized(
    quantized_net: tuple[torch.fx.GraphModule, tuple[torch.Tensor, ...]], tmp_path: Any, dtype: str, version: str
) -> None:
    quantized, inputs = quantized_net
    wide = torch.nn.Sequential(torch.nn.Conv2d(3, 64, 3), torch.nn.ReLU(), torch.nn.Conv2d(64, 64, 3)).eval()
    from trt_lower.quantization import quantize

    small = quantize(wide, inputs, [inputs], dtype=dtype)
    sizes = {}
    for name, model in (("fp32", wide), (dtype, small)):
        lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", trt_version=version)
        trt_lower.save(lowered, tmp_path / f"{name}.trt")
        with open_file(tmp_path / f"{name}.trt") as file:  # the engines' members: the rest is metadata
            members = artifact.read(str(tmp_path / f"{name}.trt"), file).infos.items()
        sizes[name] = sum(info.file_size for member, info in members if member.startswith("engines/"))
        loaded = trt_lower.load(tmp_path / f"{name}.trt", backend="onnxruntime")
        with torch.no_grad():
            torch.testing.assert_close(loaded(*inputs), lowered(*inputs), rtol=0, atol=0)
    # 38k weights: 4 bytes each in fp32, 1 in int8 or FP8 (plus per-channel scales and the graph)
    assert sizes[dtype] < 0.3 * sizes["fp32"], sizes


def test_lowering_leaves_the_quantized_module_in_eval_mode() -> None:
    """lower_to_trt puts the model's mode back after capturing it; a quantized (exported) module
    reporting training=True had its dropouts rewritten to training mode by that."""
    from trt_lower.quantization import quantize

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 4)).eval()
    inputs = (torch.randn(4, 8),)
    quantized = quantize(model, inputs, [inputs])
    with torch.no_grad():
        before = quantized(*inputs)
        lowered = trt_lower.lower_to_trt(quantized, inputs, backend="onnxruntime", require_full=True)
        torch.testing.assert_close(quantized(*inputs), before, rtol=0, atol=0)
        torch.testing.assert_close(lowered(*inputs), before)
    assert not quantized.training
