"""A LLaVA-style model (image features merged into the text sequence by masked_scatter) lowers to
one engine and matches eager."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from harness import check_onnx

import trt_lower

transformers = pytest.importorskip("transformers")

IMAGE_TOKEN = 99


def _llava() -> Any:
    vision = transformers.CLIPVisionConfig(
        image_size=32,
        patch_size=8,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        projection_dim=32,
    )
    text = transformers.LlamaConfig(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        vocab_size=100,
        max_position_embeddings=64,
    )
    config = transformers.LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=IMAGE_TOKEN,
        vision_feature_select_strategy="default",
        image_seq_length=16,
    )
    return transformers.LlavaModel(config).eval()


def test_llava_merges_image_features_inside_one_engine() -> None:
    model = _llava()
    ids = torch.randint(0, 90, (1, 24))
    ids[0, 3:19] = IMAGE_TOKEN  # 16 patches of a 32x32 image
    pixels = torch.randn(1, 3, 32, 32)
    lowered = trt_lower.lower_to_trt(model, (ids, pixels), backend="onnxruntime", require_full=True)
    report = lowered.report
    assert len(report.engines) == 1 and report.coverage == 1.0, str(report)
    assert "aten.masked_scatter.default" in report.engines[0].ops
    check_onnx(lowered)
    other = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        for image in (pixels, other):  # the image's features reach the output through the merge
            expected = model(input_ids=ids, pixel_values=image).last_hidden_state
            torch.testing.assert_close(
                lowered(ids, image).last_hidden_state, expected, rtol=1e-4, atol=1e-4 * float(expected.abs().max())
            )
        assert not torch.allclose(lowered(ids, pixels).last_hidden_state, lowered(ids, other).last_hidden_state)
