"""ONNX opset 23's fused ops for target "latest" (TensorRT 10.15+): attention -> Attention, RMS norm
-> RMSNormalization, rotary embeddings -> RotaryEmbedding, each run on ONNX Runtime inside an
engine and compared with eager PyTorch; the older targets keep the decomposed forms."""

from __future__ import annotations

from collections import Counter
from typing import Any

import onnx
import pytest
import torch
import torch.nn.functional as F
from harness import check_onnx, lower_and_compare

import trt_lower
from converters.ops import rotary  # noqa: F401  (registers trt_lower::rotary_embedding)
from converters.passes import trt_support

transformers = pytest.importorskip("transformers")
from transformers.models.gptj import modeling_gptj  # noqa: E402
from transformers.models.llama import modeling_llama  # noqa: E402

aten = torch.ops.aten
SDPA = aten.scaled_dot_product_attention.default
ROTARY = torch.ops.trt_lower.rotary_embedding.default
FUSED = ("Attention", "RMSNormalization", "RotaryEmbedding")
LLAMA_FUSED = {"Attention": 1, "RMSNormalization": 3, "RotaryEmbedding": 2}  # the one-layer Llama's


def r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def onnx_ops(lowered: trt_lower.LoweredModule) -> Counter[str]:
    """The ONNX op types of every engine."""
    return Counter(
        node.op_type
        for name, engine in lowered.named_children()
        if name.startswith("engine_")
        for node in onnx.load_from_string(engine.onnx_bytes).graph.node
    )


def latest(fn: Any, inputs: tuple[torch.Tensor, ...], **kwargs: Any) -> Counter[str]:
    """Lower `fn` for "latest", every node in an engine, compared with eager; its ONNX ops."""
    return onnx_ops(lower_and_compare(fn, inputs, trt_version="latest", **kwargs))


# -- attention --------------------------------------------------------------------------------
def blind_rows_mask() -> torch.Tensor:
    mask = torch.rand(2, 1, 5, 7) > 0.5
    mask[0, 0, 1] = False  # a query that sees no key
    return mask


@pytest.mark.parametrize(
    "fn, inputs",
    [
        (F.scaled_dot_product_attention, lambda: (r(2, 4, 5, 8), r(2, 4, 7, 8), r(2, 4, 7, 6))),
        (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), lambda: (r(1, 2, 6, 8),) * 3),
        (
            lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.3),
            lambda: (r(2, 4, 5, 8), r(2, 4, 7, 8), r(2, 4, 7, 8), blind_rows_mask()),
        ),
        (
            lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
            lambda: (r(2, 4, 5, 8), r(2, 4, 7, 8), r(2, 4, 7, 8), r(2, 4, 5, 7)),
        ),
        (
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
            lambda: (r(1, 8, 6, 16), r(1, 2, 6, 16), r(1, 2, 6, 16)),
        ),
        (
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
            lambda: (r(2, 4, 5, 8), r(2, 1, 7, 8), r(2, 1, 7, 8)),
        ),
    ],
    ids=["plain", "causal", "bool-mask-blind-row-scale", "float-mask", "gqa-causal", "one-kv-head"],
)
def test_attention(fn: Any, inputs: Any) -> None:
    ops = latest(fn, inputs(), ops=[SDPA])
    assert ops["Attention"] == 1 and ops["Softmax"] == 0


@pytest.mark.parametrize(
    "fn, inputs, why",
    [
        (
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            lambda: (r(1, 2, 4, 8), r(1, 2, 6, 8), r(1, 2, 6, 8)),
            "causal masks of queries and keys of different lengths are aligned otherwise",
        ),
        (F.scaled_dot_product_attention, lambda: (r(3, 5, 8), r(3, 7, 8), r(3, 7, 8)), "Attention takes 4-D only"),
        (
            F.scaled_dot_product_attention,
            lambda: (r(2, 4, 5, 8), r(1, 4, 7, 8), r(1, 4, 7, 8)),
            "torch broadcasts the batch",
        ),
    ],
    ids=["causal-unequal-lengths", "3d", "broadcast-batch"],
)
def test_attention_that_attention_23_does_not_compute_is_decomposed(fn: Any, inputs: Any, why: str) -> None:
    ops = latest(fn, inputs(), ops=[SDPA])
    assert ops["Attention"] == 0 and ops["Softmax"] == 1, why


def test_grouped_query_attention_is_refused_below_opset_23() -> None:
    def gqa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    inputs = (r(1, 4, 6, 8), r(1, 2, 6, 8), r(1, 2, 6, 8))
    with pytest.raises(trt_lower.UnsupportedOpsError, match="grouped-query attention"):
        lower_and_compare(gqa, inputs, trt_version="10.12")


# -- RMS norm ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fn",
    [lambda x, w: F.rms_norm(x, (8,), w, 1e-5), lambda x, w: w * F.rms_norm(x, (8,))],
    ids=["weight", "weight-after"],
)
def test_aten_rms_norm(fn: Any) -> None:
    ops = latest(fn, (r(2, 3, 8), r(8)), ops=[aten.rms_norm.default])
    assert ops["RMSNormalization"] == 1 and ops["ReduceMean"] == 0 and ops["Mul"] == 0


def test_llama_rms_norm_pattern_is_one_rms_normalization() -> None:
    norm = modeling_llama.LlamaRMSNorm(16, eps=1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.rand(16) + 0.5)
    ops = latest(norm, (r(2, 5, 16),), ops=[aten.rms_norm.default])
    assert ops["RMSNormalization"] == 1 and ops["ReduceMean"] == 0 and ops["Mul"] == 0  # the weight taken in


def test_rms_norm_over_another_axis_is_not_rewritten() -> None:
    def over_rows(x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + 1e-6)

    ops = latest(over_rows, (r(2, 5, 16),))
    assert ops["RMSNormalization"] == 0 and ops["ReduceMean"] == 1


# -- rotary embeddings --------------------------------------------------------------------------
class LlamaRope(torch.nn.Module):
    """transformers' Llama rotary embedding applied to q and k of (batch, heads, seq, head_dim)."""

    def __init__(self) -> None:
        super().__init__()
        config = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4, max_position_embeddings=32)
        self.rotary = modeling_llama.LlamaRotaryEmbedding(config)

    def forward(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor) -> Any:
        cos, sin = self.rotary(q, positions)
        return modeling_llama.apply_rotary_pos_emb(q, k, cos, sin)


class GptjRope(torch.nn.Module):
    """transformers' GPT-J rotary embedding (neighbours paired) on x of (batch, seq, heads, head_dim)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("positions", modeling_gptj.create_sinusoidal_positions(32, 16))

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        sin, cos = torch.split(self.positions[ids], 8, dim=-1)
        return modeling_gptj.apply_rotary_pos_emb(x, sin, cos)


def test_llama_rotate_half_is_rotary_embedding() -> None:
    positions = torch.arange(6).unsqueeze(0).expand(2, -1)
    ops = latest(LlamaRope(), (r(2, 4, 6, 16), r(2, 2, 6, 16), positions), ops=[ROTARY])
    assert ops["RotaryEmbedding"] == 2 and ops["Neg"] == 0


def test_gptj_rotate_every_two_is_interleaved_rotary_embedding() -> None:
    ids = torch.tensor([[0, 1, 2, 3, 4], [3, 4, 5, 6, 7]])
    lowered = lower_and_compare(GptjRope(), (r(2, 5, 4, 16), ids), trt_version="latest", ops=[ROTARY])
    (node,) = [
        n
        for name, e in lowered.named_children()
        if name.startswith("engine_")
        for n in onnx.load_from_string(e.onnx_bytes).graph.node
        if n.op_type == "RotaryEmbedding"
    ]
    assert onnx.helper.get_attribute_value(node.attribute[0]) == 1  # interleaved


def test_rotate_half_with_unlike_halves_of_cos_is_not_rewritten() -> None:
    """RotaryEmbedding takes one cosine per pair: caches whose halves may differ (inputs) stay math."""

    def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        return modeling_llama.apply_rotary_pos_emb(x, x, cos, sin)[0]

    ops = latest(rope, (r(1, 2, 6, 16), r(1, 6, 16), r(1, 6, 16)))
    assert ops["RotaryEmbedding"] == 0 and ops["Neg"] == 1


# -- a transformers Llama, per target -----------------------------------------------------------
@pytest.fixture(scope="module")
def llama() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        hidden_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        vocab_size=100,
        max_position_embeddings=64,
        use_cache=False,
    )
    return transformers.LlamaForCausalLM(config).eval(), torch.randint(0, 100, (2, 8))


@pytest.mark.parametrize("version, fused", [("latest", True), ("10.4", False), ("8.6", False)])
def test_llama(llama: tuple[torch.nn.Module, torch.Tensor], version: str, fused: bool) -> None:
    model, ids = llama
    lowered = trt_lower.lower_to_trt(model, (ids,), backend="onnxruntime", trt_version=version, require_full=True)
    check_onnx(lowered)
    with torch.no_grad():
        torch.testing.assert_close(lowered(ids).logits, model(ids).logits)
    ops = onnx_ops(lowered)
    (engine,) = lowered.report.engines
    if fused:
        # The layer's attention, its two RoPEs (q and k) and two norms; the final norm.
        assert {op: ops[op] for op in FUSED} == LLAMA_FUSED == engine.fused_ops
        assert "fused layers: Attention×1, RMSNormalization×3, RotaryEmbedding×2" in str(lowered.report)
    else:
        assert not any(ops[op] for op in FUSED) and engine.fused_ops == {}
        assert "fused layers" not in str(lowered.report)


@pytest.mark.parametrize("trt_double", ["10.15.0"], indirect=True)
def test_llama_on_the_tensorrt_double(trt_double: Any, llama: tuple[torch.nn.Module, torch.Tensor]) -> None:
    """An installed TensorRT 10.15 means target "latest": the fused ops reach TensorRT's build."""
    model, ids = llama
    lowered = trt_lower.lower_to_trt(model, (ids,), backend="tensorrt", require_full=True)
    assert lowered.report.trt_version == "latest"
    assert lowered.report.engines[0].fused_ops == LLAMA_FUSED
    with torch.no_grad():
        torch.testing.assert_close(lowered(ids).logits, model(ids).logits)


def test_fp16_engines_keep_the_fused_ops() -> None:
    def block(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = F.rms_norm(x, (16,), w, 1e-6).unflatten(-1, (2, 8)).transpose(1, 2)
        return F.scaled_dot_product_attention(h, h, h, is_causal=True)

    ops = latest(block, (r(2, 6, 16), r(16)), precision="fp16", rtol=5e-3, atol=5e-3)
    assert ops["Attention"] == ops["RMSNormalization"] == 1


@pytest.mark.parametrize("version", ["8.6", "10.4", "10.12"])
def test_fused_ops_are_refused_by_older_targets_support_tables(version: str) -> None:
    """Attention arrives in TensorRT 10.14, RMSNormalization and RotaryEmbedding in 10.15: only
    "latest" (10.15+) may hold them."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 8])
    scale = onnx.numpy_helper.from_array(torch.ones(8).numpy(), "scale")
    node = onnx.helper.make_node("RMSNormalization", ["x", "scale"], ["y"], name="n/RMSNormalization")
    graph = onnx.helper.make_graph(
        [node], "g", [x], [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 8])], [scale]
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 23)], ir_version=10)
    assert not trt_support.violations(model, "latest")
    assert any("RMSNormalization needs TensorRT latest+" in str(v) for v in trt_support.violations(model, version))
