"""Mixture-of-experts models with transformers' default experts implementation (`grouped_mm`:
histc counts, their int32 cumsum, transformers::grouped_mm_fallback) lower to one engine; the
converters they needed, with masked_scatter's, pass every target's support table."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
from harness import check_onnx, lower_and_compare

import trt_lower
from converters.core.target import VERSIONS

transformers = pytest.importorskip("transformers")
pytest.importorskip("transformers.integrations.moe")  # registers transformers::grouped_mm_fallback

_COMMON: dict[str, Any] = dict(
    hidden_size=32,
    num_hidden_layers=1,
    num_attention_heads=4,
    intermediate_size=64,
    vocab_size=100,
    max_position_embeddings=64,
    use_cache=False,
)

MODELS: dict[str, Callable[[], Any]] = {
    # top-2 of 4 experts
    "mixtral": lambda: transformers.MixtralModel(
        transformers.MixtralConfig(num_local_experts=4, num_experts_per_tok=2, num_key_value_heads=2, **_COMMON)
    ),
    # top-2 of 4, normalized
    "qwen3_moe": lambda: transformers.Qwen3MoeModel(
        transformers.Qwen3MoeConfig(
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            head_dim=8,
            num_key_value_heads=2,
            norm_topk_prob=True,
            **_COMMON,
        )
    ),
    # grouped top-k (the best of 2 groups, then top-2 in it), a shared expert, MLA attention
    "deepseek_v3": lambda: transformers.DeepseekV3Model(
        transformers.DeepseekV3Config(
            n_routed_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            n_group=2,
            topk_group=1,
            n_shared_experts=1,
            first_k_dense_replace=0,
            kv_lora_rank=16,
            q_lora_rank=16,
            qk_rope_head_dim=8,
            qk_nope_head_dim=8,
            v_head_dim=8,
            num_key_value_heads=4,
            **_COMMON,
        )
    ),
    # transposed expert weights with biases (gathered per row), a clamped gated activation
    "gpt_oss": lambda: transformers.GptOssModel(
        transformers.GptOssConfig(
            num_local_experts=4,
            num_experts_per_tok=2,
            head_dim=8,
            num_key_value_heads=2,
            layer_types=["full_attention"],
            **dict(_COMMON, intermediate_size=32),
        )
    ),
}
# fp16 engines against eager fp32, relative to the output's largest magnitude.
TOLERANCE = {"fp32": 1e-4, "fp16": 2e-2}


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", MODELS)
def test_default_experts_lower_to_one_engine(name: str, precision: str) -> None:
    model = MODELS[name]().eval()
    assert model.config._experts_implementation == "grouped_mm"
    ids = torch.randint(0, 100, (2, 12))
    lowered = trt_lower.lower_to_trt(model, (ids,), backend="onnxruntime", precision=precision, require_full=True)
    report = lowered.report
    assert len(report.engines) == 1 and report.coverage == 1.0, str(report)
    ops = report.engines[0].ops
    assert {"aten.histc.default", "aten.cumsum.default", "transformers.grouped_mm_fallback.default"} <= set(ops)
    check_onnx(lowered)
    with torch.no_grad():
        expected = model(ids).last_hidden_state
    scale = float(expected.abs().max())
    torch.testing.assert_close(lowered(ids).last_hidden_state, expected, rtol=0, atol=TOLERANCE[precision] * scale)


def _routing_and_merge(
    ids: torch.Tensor,
    rows: torch.Tensor,
    weight: torch.Tensor,
    text: torch.Tensor,
    image_tokens: torch.Tensor,
    image: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ops this family added: expert offsets (histc, int cumsum), the grouped matmul, and a
    vision-language merge (masked_scatter)."""
    offsets = torch.histc(ids.float(), bins=4, min=0, max=3).cumsum(0, dtype=torch.int32)
    return (
        torch.ops.transformers.grouped_mm_fallback(rows, weight, offsets),
        text.masked_scatter(image_tokens.unsqueeze(-1), image),
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_the_new_converters_pass_each_targets_support_table(version: str) -> None:
    ids = torch.tensor([0, 0, 1, 3, 3, 3])
    inputs = (
        ids,
        torch.randn(6, 8),
        torch.randn(4, 8, 5),
        torch.randn(2, 5, 8),
        torch.tensor([[False, True, True, False, False], [True, False, False, False, True]]),
        torch.randn(4, 8),
    )
    lowered = lower_and_compare(
        _routing_and_merge,
        inputs,
        trt_version=version,
        ops=["aten.histc.default", "transformers.grouped_mm_fallback.default", "aten.masked_scatter.default"],
    )
    assert len(lowered.report.engines) == 1
