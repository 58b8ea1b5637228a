"""Real architectures (small inputs/configs) lower to one engine and match eager."""
from __future__ import annotations

import pytest
import torch
import torchvision

import trt_lower
from harness import check_onnx


def _lower_whole(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> trt_lower.LoweredModule:
    lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime")
    report = lowered.report
    assert len(report.engines) == 1, str(report)
    assert report.coverage >= 0.95, str(report)
    check_onnx(lowered)
    result = trt_lower.check_accuracy(model, lowered, inputs, rtol=1e-3, atol=1e-3)
    assert result.passed, str(result)
    with torch.no_grad():
        torch.testing.assert_close(lowered(*inputs), model(*inputs), rtol=1e-3, atol=1e-3)
    return lowered


@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v3_small"])
def test_torchvision_cnn(name: str) -> None:
    model = getattr(torchvision.models, name)(weights=None).eval()
    lowered = _lower_whole(model, (torch.randn(1, 3, 64, 64),))
    assert "aten.convolution.default" in lowered.report.engines[0].ops


def test_bert() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=500
    )
    model = transformers.BertModel(config).eval()
    ids = torch.randint(0, config.vocab_size, (2, 16))
    lowered = _lower_whole(model, (ids,))
    out = lowered(ids)
    # The model's output structure survives lowering.
    assert type(out).__name__ == "BaseModelOutputWithPoolingAndCrossAttentions"
    assert set(out.keys()) == {"last_hidden_state", "pooler_output"}
