"""Real architectures (small inputs/configs) lower to one engine and match eager."""

from __future__ import annotations

import pytest
import torch
import torchvision
from harness import check_onnx
from trt_models import llama_config

import trt_lower


def _assert_matches(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Close relative to the output's own scale: an absolute tolerance alone passes anything,
    zeros included, when the outputs are tiny."""
    torch.testing.assert_close(actual, expected, rtol=1e-3, atol=1e-3 * float(expected.abs().max()))


def _lower_whole(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> trt_lower.LoweredModule:
    lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime")
    report = lowered.report
    assert len(report.engines) == 1, str(report)
    assert report.coverage >= 0.95, str(report)
    check_onnx(lowered)
    return lowered


def _calibrated(name: str) -> torch.nn.Module:
    """Random weights, with BatchNorm statistics from a few train-mode passes: with the default
    ones, MobileNetV3's outputs shrink to about 1e-9."""
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None)
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn(4, 3, 64, 64))
    return model.eval()


@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v3_small"])
def test_torchvision_cnn(name: str) -> None:
    model, inputs = _calibrated(name), (torch.randn(1, 3, 64, 64),)
    lowered = _lower_whole(model, inputs)
    assert "aten.convolution.default" in lowered.report.engines[0].ops
    with torch.no_grad():
        expected = model(*inputs)
        _assert_matches(lowered(*inputs), expected)
    assert float(expected.std()) > 1e-6  # calibrated: far from the uncalibrated ~1e-9
    with pytest.raises(AssertionError):  # a lowering that returned zeros, or lost a layer, fails
        _assert_matches(torch.zeros_like(expected), expected)
    with pytest.raises(AssertionError):
        _assert_matches(expected * 1.01, expected)


def test_bert() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=500
    )
    model = transformers.BertModel(config).eval()
    ids = torch.randint(0, config.vocab_size, (2, 16))
    lowered = _lower_whole(model, (ids,))
    out = lowered(ids)
    with torch.no_grad():
        expected = model(ids)
    for key in ("last_hidden_state", "pooler_output"):
        _assert_matches(out[key], expected[key])
    # The model's output structure survives lowering.
    assert type(out).__name__ == "BaseModelOutputWithPoolingAndCrossAttentions"
    assert set(out.keys()) == {"last_hidden_state", "pooler_output"}


def _coverage_one_engine(model: torch.nn.Module, ids: torch.Tensor) -> None:
    """All of the model in one engine, and every output as eager's."""
    lowered = _lower_whole(model, (ids,))
    assert lowered.report.coverage == 1.0 and not lowered.report.fallbacks, str(lowered.report)
    _matches_eager(lowered, model, (ids,))


def _matches_eager(lowered: torch.nn.Module, model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
    out = lowered(*inputs)
    with torch.no_grad():
        expected = model(*inputs)
    if isinstance(expected, dict):  # transformers' ModelOutput
        assert out.keys() == expected.keys()
        for key in expected:
            _assert_matches(out[key], expected[key])
    else:
        _assert_matches(out, expected)


def test_gpt2() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=500, n_positions=64, use_cache=False)
    _coverage_one_engine(transformers.GPT2Model(config).eval(), torch.randint(0, 500, (2, 16)))


def test_causal_lm_with_its_key_value_cache() -> None:
    """LlamaForCausalLM returns logits and a DynamicCache (use_cache defaults to True), which
    torch.export flattens once transformers' cache types are registered as pytree nodes."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = llama_config()
    model = transformers.LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 500, (1, 8))
    lowered = _lower_whole(model, (ids,))
    out = lowered(ids)
    with torch.no_grad():
        expected = model(ids)
    assert type(out.past_key_values) is type(expected.past_key_values)
    _assert_matches(out.logits, expected.logits)
    for got, want in zip(out.past_key_values.layers, expected.past_key_values.layers, strict=True):
        _assert_matches(got.keys, want.keys)
        _assert_matches(got.values, want.values)


def test_roberta() -> None:
    """Its position ids are an integer cumsum over a padding mask (with ne.Scalar and _to_copy)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.RobertaConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=500
    )
    ids = torch.randint(2, 500, (2, 16))
    ids[1, 12:] = config.pad_token_id  # padded positions keep the padding position id
    _coverage_one_engine(transformers.RobertaModel(config).eval(), ids)


@pytest.mark.parametrize(
    "name, config",
    [
        # Slim depths and widths; the blocks (and the as_strided in ConvNeXt's head) are the real ones.
        ("convnext_tiny", dict(depths=(1, 1, 1, 1), dims=(16, 32, 64, 128))),
        (
            "swin_tiny_patch4_window7_224",
            dict(img_size=64, window_size=4, embed_dim=16, depths=(1, 1, 2, 1), num_heads=(1, 2, 4, 8)),
        ),
    ],
)
def test_timm_coverage(name: str, config: dict[str, object]) -> None:
    timm = pytest.importorskip("timm")
    model, x = timm.create_model(name, pretrained=False, num_classes=10, **config).eval(), torch.randn(1, 3, 64, 64)
    lowered = _lower_whole(model, (x,))
    assert lowered.report.coverage == 1.0 and not lowered.report.fallbacks, str(lowered.report)
    _matches_eager(lowered, model, (x,))
