"""INT4 weight-only, group-wise: torchao's int4 weights and PT2E's per-channel-group dequantize
lowered to opset-21 INT4 DequantizeLinear with block_size (converters/ops/int4.py), on ONNX
Runtime; what TensorRT cannot take refused with the reason."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import onnx
import pytest
import torch
from harness import Fn, check_onnx, lower_and_compare
from onnx import TensorProto, helper, numpy_helper

import trt_lower
from converters.passes import trt_support

pytest.importorskip("torchao")
from torchao.quantization import IntxWeightOnlyConfig, MappingType, quantize_  # noqa: E402
from torchao.quantization.granularity import PerGroup  # noqa: E402

from trt_lower.quantization import quantize  # noqa: E402

qd = torch.ops.quantized_decomposed
AFFINE = "torchao.dequantize_affine.default"
GROUP = "quantized_decomposed.dequantize_per_channel_group.default"
BELOW_OPSET_21 = ("8.6", "10.4", "10.12")


def _mlp(k: int = 256) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(k, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32)).eval()


class GroupDequantized(torch.nn.Module):
    """x @ W.T with W dequantized by PT2E's per-channel-group op from int8-held codes."""

    def __init__(
        self,
        codes: torch.Tensor,
        scales: torch.Tensor,
        group: int,
        low: int = -8,
        high: int = 7,
        zeros: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        self.register_buffer("codes", codes)
        self.register_buffer("scales", scales)
        self.register_buffer("zeros", zeros)
        self.group, self.low, self.high = group, low, high

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = qd.dequantize_per_channel_group(
            self.codes, self.scales, self.zeros, self.low, self.high, torch.int8, self.group, torch.float32
        )
        return x @ w.t()


def _group_dequantized(k: int = 256, group: int = 128, **kwargs: Any) -> GroupDequantized:
    torch.manual_seed(0)
    return GroupDequantized(
        torch.randint(-8, 8, (48, k), dtype=torch.int8), torch.rand(48, k // group) / 8 + 0.01, group, **kwargs
    )


def _int4_initializers(lowered: trt_lower.LoweredModule) -> list[onnx.TensorProto]:
    found = []
    for name, module in lowered.named_children():
        if name.startswith("engine_"):
            found += [
                t for t in onnx.load_from_string(module.onnx_bytes).graph.initializer if t.data_type == TensorProto.INT4
            ]
    return found


@pytest.mark.parametrize(
    "make, op",
    [
        (lambda: quantize(_mlp(), dtype="int4_weight_only", group_size=64), AFFINE),
        (lambda: _group_dequantized(), GROUP),
    ],
    ids=["torchao", "pt2e"],
)
def test_int4_weights_dequantize_in_the_engine_as_eager(make: Callable[[], torch.nn.Module], op: str) -> None:
    model = make()
    lowered = lower_and_compare(model, (torch.randn(3, 256),), ops=[op], trt_version="latest", rtol=1e-5, atol=1e-5)
    weights = _int4_initializers(lowered)
    assert weights, "no INT4 initializer in the engine"
    for w in weights:  # two codes a byte
        assert len(w.raw_data) == (int(np.prod(w.dims)) + 1) // 2, (w.name, w.dims, len(w.raw_data))
    (engine,) = lowered.report.engines
    assert sum(engine.int4_ops.values()) == (2 if op == AFFINE else 1), engine.int4_ops
    assert "int4 weights:" in str(lowered.report)


def test_fp16_engines_dequantize_int4_weights_with_float32_scales() -> None:
    """The fp16 rewrite leaves the INT4 weights and their float32 scales alone (DequantizeLinear's
    output type is its scale's); the dequantized weight is cast to fp16 for the layer."""
    model = quantize(_mlp(), dtype="int4_weight_only", group_size=64)
    lowered = lower_and_compare(
        model, (torch.randn(3, 256),), ops=[AFFINE], trt_version="latest", precision="fp16", rtol=1e-2, atol=1e-2
    )
    (engine,) = [m for n, m in lowered.named_children() if n.startswith("engine_")]
    graph = onnx.load_from_string(engine.onnx_bytes).graph
    types = {t.name: t.data_type for t in graph.initializer}
    for node in (n for n in graph.node if n.op_type == "DequantizeLinear"):
        assert (types[node.input[0]], types[node.input[1]]) == (TensorProto.INT4, TensorProto.FLOAT), node.name


def _reason(model: torch.nn.Module, op: str, version: str = "latest") -> str:
    x = torch.randn(3, 256)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", min_block_size=1, trt_version=version)
    with torch.no_grad():
        torch.testing.assert_close(lowered(x), model(x))
    reasons = [f.reason for f in lowered.report.fallbacks if f.op == op]
    assert reasons, f"{op} ran in an engine: {lowered.report}"
    return reasons[0]


@pytest.mark.parametrize("version", BELOW_OPSET_21)
def test_int4_is_refused_below_opset_21(version: str) -> None:
    model = quantize(_mlp(), dtype="int4_weight_only", group_size=64)
    assert "need ONNX opset 21" in _reason(model, AFFINE, version)


def _torchao(
    group: int, mapping: MappingType = MappingType.SYMMETRIC, dtype: torch.dtype = torch.int4
) -> torch.nn.Module:
    model = _mlp()
    quantize_(model, IntxWeightOnlyConfig(weight_dtype=dtype, granularity=PerGroup(group), mapping_type=mapping))
    return model


@pytest.mark.parametrize(
    "make, op, reason",
    [
        (lambda: _torchao(64, MappingType.ASYMMETRIC), AFFINE, "asymmetric quantization (zero point"),
        (lambda: _group_dequantized(zeros=torch.ones(48, 2, dtype=torch.int8)), GROUP, "asymmetric quantization"),
        (lambda: _torchao(32), AFFINE, "group of 1x32 elements"),
        (lambda: _group_dequantized(group=256 // 8), GROUP, "group of 1x32 elements"),
        (lambda: _torchao(64, dtype=torch.int8), AFFINE, "block quantization is INT4"),
    ],
    ids=["torchao-asymmetric", "pt2e-asymmetric", "torchao-group-32", "pt2e-group-32", "int8-groups"],
)
def test_what_tensorrt_cannot_take_is_refused(make: Callable[[], torch.nn.Module], op: str, reason: str) -> None:
    assert reason in _reason(make(), op)


def test_an_activation_dequantized_group_wise_is_refused() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        codes = torch.clamp(torch.round(x), -8, 7).to(torch.int8)
        return qd.dequantize_per_channel_group(codes, torch.ones(4, 2), None, -8, 7, torch.int8, 64, torch.float32)

    x = torch.randn(4, 128) * 4
    lowered = trt_lower.lower_to_trt(Fn(fn), (x,), backend="onnxruntime", min_block_size=1, trt_version="latest")
    torch.testing.assert_close(lowered(x), fn(x))
    assert "a constant 2-D weight only" in next(f.reason for f in lowered.report.fallbacks if f.op == GROUP)


@pytest.mark.parametrize(
    "version, reason",
    [
        ("latest", "ONNX Runtime has no FLOAT4E2M1 DequantizeLinear kernel"),
        ("10.4", "needs FLOAT4E2M1 DequantizeLinear (ONNX opset 23)"),
    ],
)
def test_nvfp4_weights_are_refused_with_the_reason(version: str, reason: str) -> None:
    class Fp4Weight(torch.nn.Module):  # FP4 E2M1 codes two a byte, unpacked (scales left out)
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("w", torch.randint(0, 255, (32, 32), dtype=torch.uint8).view(torch.float4_e2m1fn_x2))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b = self.w.view(torch.uint8)
            return x @ torch.stack([(b & 15).float(), (b >> 4).float()], -1).reshape(32, 64).t()

    model, x = Fp4Weight(), torch.randn(2, 64)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", min_block_size=1, trt_version=version)
    torch.testing.assert_close(lowered(x), model(x))
    (view,) = [f for f in lowered.report.fallbacks if f.op == "aten.view.dtype"]
    assert reason in view.reason


def _int4_dq(block: int = 64, zero: int | None = None, opset: int = 21, k: int = 128) -> onnx.ModelProto:
    codes = numpy_helper.from_array(np.zeros((8, k), np.int8).astype("int4"), "w")
    scale = numpy_helper.from_array(np.full((8, k // block), 0.1, np.float32), "s")
    inits = [codes, scale]
    inputs = ["w", "s"]
    if zero is not None:
        inits.append(numpy_helper.from_array(np.full((8, k // block), zero, np.int8).astype("int4"), "z"))
        inputs.append("z")
    node = helper.make_node("DequantizeLinear", inputs, ["y"], name="dq", axis=1, block_size=block)
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, k])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    return model


def test_support_table_takes_int4_dequantize_on_latest_only() -> None:
    assert trt_support.violations(_int4_dq(), "latest") == []
    assert trt_support.violations(_int4_dq(zero=0), "latest") == []
    for model, rule in (
        (_int4_dq(block=32), "blocks of 32"),
        (_int4_dq(zero=1), "zero point must be 0"),
        (_int4_dq(block=128, k=192), "dividing it"),
    ):
        assert any(rule in v.rule for v in trt_support.violations(model, "latest")), rule
    for version in BELOW_OPSET_21:
        assert any("needs opset 21" in v.rule for v in trt_support.violations(_int4_dq(), version))


def test_quantize_refuses_group_sizes_tensorrt_cannot_take_naming_the_layer() -> None:
    with pytest.raises(ValueError, match="group_size=32: TensorRT dequantizes INT4 weights in groups of 64 or 128"):
        quantize(_mlp(), dtype="int4_weight_only", group_size=32)
    with pytest.raises(ValueError, match="layer '0' has 192 input channels, which group_size=128 does not divide"):
        quantize(_mlp(192), dtype="int4_weight_only")
    with pytest.raises(ValueError, match="dtype must be one of .*, got 'int3'"):
        quantize(_mlp(), dtype="int3")


def test_quantize_leaves_the_model_float() -> None:
    model = _mlp()
    quantize(model, dtype="int4_weight_only", group_size=64)
    assert type(model[0].weight) is torch.nn.Parameter


def test_quantized_layers_reads_int4_weights_in_codes_and_finds_a_wrong_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from converters.ops import int4
    from trt_lower.debug import quantized_layers

    model = quantize(_mlp(), dtype="int4_weight_only", group_size=64)
    x = torch.randn(3, 256)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", trt_version="latest", require_full=True)
    assert trt_lower.check_accuracy(model, lowered, (x,), rtol=1e-5, atol=1e-5)
    layers = quantized_layers(model, lowered, (x,))
    assert [(r.node, r.flipped, r.total) for r in layers] == [
        ("dequantize_affine", 0, 64 * 256),
        ("dequantize_affine_1", 0, 32 * 64),
    ]
    # A converter that swaps each byte's two codes (the packing's nibble order) is caught.
    packed = int4.GraphBuilder.packed_initializer
    monkeypatch.setattr(
        int4.GraphBuilder,
        "packed_initializer",
        lambda b, name, array, dtype: packed(b, name, array.reshape(-1, 2)[:, ::-1].reshape(array.shape), dtype),
    )
    layers = quantized_layers(model, lowered, (x,))
    assert all(r.flipped > r.total // 2 and r.max_diff >= 1 for r in layers), layers


def test_artifact_keeps_int4_weights_packed_and_loads(tmp_path: Any) -> None:
    model = quantize(_mlp(), dtype="int4_weight_only", group_size=64)
    x = torch.randn(3, 256)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", trt_version="latest", require_full=True)
    trt_lower.save(lowered, tmp_path / "int4.trt")
    loaded = trt_lower.load(tmp_path / "int4.trt", backend="onnxruntime")
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), lowered(x), rtol=0, atol=0)
    check_onnx(loaded)
    (weight, *_) = _int4_initializers(loaded)
    assert len(weight.raw_data) == 64 * 256 // 2


def _llama() -> torch.nn.Module:
    """A Llama whose linear weights dominate its size (a vocabulary of 96, hidden size 256)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            vocab_size=96,
            hidden_size=256,
            intermediate_size=512,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
        )
    ).eval()


def test_an_int4_llama_is_one_engine_generating_the_eager_quantized_tokens(tmp_path: Any) -> None:
    from trt_lower.llm import lower_causal_lm

    model = _llama()
    quantized = quantize(model, dtype="int4_weight_only", group_size=128)
    options = dict(max_batch=1, max_length=40, backend="onnxruntime", trt_version="latest", require_full=True)
    lowered = lower_causal_lm(quantized, **options)
    report = lowered.report
    assert report.coverage == 1.0 and len(report.engines) == 1, report
    assert sum(report.engines[0].int4_ops.values()) == 2 * 7 + 1, report  # each layer's 7 linears, the LM head
    check_onnx(lowered.lowered_module)

    ids = torch.randint(3, 96, (1, 8), generator=torch.Generator().manual_seed(1))
    greedy = dict(max_new_tokens=32, do_sample=False, pad_token_id=0, output_logits=True, return_dict_in_generate=True)
    with torch.no_grad():
        expected = quantized.generate(ids, **greedy)
    got = lowered.generate(ids, **greedy)
    assert torch.equal(got.sequences, expected.sequences)
    for step, (a, e) in enumerate(zip(got.logits, expected.logits)):
        torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4, msg=lambda m: f"step {step}: {m}")

    sizes = {}
    for name, step_module in (
        ("int4", lowered.lowered_module),
        ("fp32", lower_causal_lm(model, **options).lowered_module),
    ):
        trt_lower.save(step_module, tmp_path / f"{name}.trt")
        sizes[name] = (tmp_path / f"{name}.trt").stat().st_size
    assert sizes["int4"] <= 0.25 * sizes["fp32"], sizes


@pytest.mark.parametrize("trt_double", ["10.15.1"], indirect=True)
def test_tensorrt_builds_int4_engines_strongly_typed(trt_double: Any) -> None:
    model = quantize(_mlp(), dtype="int4_weight_only", group_size=64)
    x = torch.randn(3, 256)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="tensorrt", require_full=True)
    assert lowered.report.trt_version == "latest"
    with torch.no_grad():
        torch.testing.assert_close(lowered(x), model(x))
    build = trt_double.state.last_build
    assert build.network_flags == 1 << int(trt_double.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    assert not build.builder_flags & 1 << int(trt_double.BuilderFlag.INT8)
