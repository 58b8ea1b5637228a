"""Real architectures through lower_to_trt: engines, eager fallbacks, coverage, error against eager.

    python bench/model_zoo.py [--models vit,llama,...] [--backend onnxruntime] [--trt-version 8.6|10.4|10.12|latest]
                              [--precision fp32|fp16] [--artifact] [--dynamic [spatial]] [--json out.json]

Each model is a real torchvision, timm or transformers architecture in a small configuration
with random weights (nothing is downloaded), lowered as a user would (`lower_to_trt(model,
inputs)`, defaults; `--trt-version` picks the TensorRT whose parser limits the converters
respect, `--precision` the engines' precision), then called on its example inputs. With `--dynamic`
each input is a `TensorSpec` whose batch dim ranges over 1..4 (token ids: their sequence dim over
4..32 too; `--dynamic spatial`: an image's height and width over its size -32..+32 too), and the
module is called at the ends of the ranges it was lowered for and in between. Printed per model: engines, coverage
(the share of the graph's compute nodes inside engines), the ops left eager with their counts,
the largest error over all output tensors (and calls) relative to that output's largest magnitude, and the
lowering time; with `--artifact`, whether `trt_lower.save` then `trt_lower.load` gives a module
whose outputs are bit-identical to the lowered module's. A failure prints the exception's type and
first line and the sweep goes on.
Untimed but for the lowering; see bench/README.md.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import sys
import tempfile
import time
import traceback
import warnings
from typing import Any, Callable

import torch
import torch.utils._pytree as pytree

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import trt_lower  # noqa: E402
from trt_lower.runtime.guard import InputGuard  # noqa: E402

Example = tuple[torch.nn.Module, tuple[torch.Tensor, ...]]


def _image(size: int = 64) -> tuple[torch.Tensor, ...]:
    return (torch.randn(1, 3, size, size),)


def _torchvision(name: str, size: int = 64, **kwargs: Any) -> Callable[[], Example]:
    def build() -> Example:
        import torchvision

        model = getattr(torchvision.models, name)(weights=None, **kwargs)
        with torch.no_grad():  # BatchNorm statistics from a few train-mode passes
            model.train()
            for _ in range(2):
                model(torch.randn(2, 3, size, size))
        return model.eval(), _image(size)

    return build


def _timm(name: str, size: int = 64, **kwargs: Any) -> Callable[[], Example]:
    def build() -> Example:
        import timm

        model = timm.create_model(name, pretrained=False, num_classes=10, **kwargs)
        return model.eval(), _image(size)

    return build


def _text(config_name: str, model_name: str, ids: tuple[int, int] = (1, 16), **config: Any) -> Callable[[], Example]:
    def build() -> Example:
        import transformers

        made = getattr(transformers, config_name)(**config)
        model = getattr(transformers, model_name)(made)
        vocab = getattr(made, "vocab_size", 1000)
        return model.eval(), (torch.randint(0, vocab, ids),)

    return build


def _hf_vision(config_name: str, model_name: str, size: int = 32, **config: Any) -> Callable[[], Example]:
    def build() -> Example:
        import transformers

        model = getattr(transformers, model_name)(getattr(transformers, config_name)(**config))
        return model.eval(), _image(size)

    return build


def _whisper_encoder() -> Example:
    import transformers

    config = transformers.WhisperConfig(
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        num_mel_bins=16,
        max_source_positions=32,
        vocab_size=1000,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
    )
    return transformers.WhisperModel(config).get_encoder().eval(), (torch.randn(1, 16, 64),)


def _wav2vec2() -> Example:
    import transformers

    config = transformers.Wav2Vec2Config(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        conv_dim=(32, 32),
        conv_stride=(5, 2),
        conv_kernel=(10, 3),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4,
        vocab_size=32,
    )
    model: torch.nn.Module = transformers.Wav2Vec2Model(config)
    return model.eval(), (torch.randn(1, 1600),)


class _Keywords(torch.nn.Module):
    """`model` called with its positional inputs as these keywords; its first output."""

    def __init__(self, model: torch.nn.Module, *names: str) -> None:
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *inputs: torch.Tensor) -> Any:
        return self.model(**dict(zip(self.names, inputs)), return_dict=False)[0]


def _seq2seq() -> Example:
    """An encoder-decoder (T5) given the source ids and the decoder's ids."""
    import transformers

    config = transformers.T5Config(
        d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4, vocab_size=1000
    )
    model = _Keywords(transformers.T5Model(config), "input_ids", "decoder_input_ids")
    return model.eval(), (torch.randint(0, 1000, (1, 16)), torch.randint(0, 1000, (1, 8)))


def _llava() -> Example:
    """LLaVA: a CLIP vision tower's features merged into the text at the image tokens (masked_scatter)."""
    import transformers

    vision = transformers.CLIPVisionConfig(
        image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128
    )
    config = transformers.LlavaConfig(
        vision_config=vision,
        text_config=transformers.LlamaConfig(**_DECODER),
        image_token_index=999,
        vision_feature_select_strategy="default",
        image_seq_length=16,
    )
    ids = torch.randint(0, 990, (1, 24))
    ids[0, 4:20] = 999  # 16 patches of a 32x32 image
    model = _Keywords(transformers.LlavaModel(config), "input_ids", "pixel_values")
    return model.eval(), (ids, torch.randn(1, 3, 32, 32))


def _sd3_transformer() -> Example:
    """A diffusion transformer (Stable Diffusion 3's MMDiT) on latents, text states, a pooled
    projection and a timestep."""
    import diffusers

    model: torch.nn.Module = diffusers.SD3Transformer2DModel(  # type: ignore[no-untyped-call, assignment]
        sample_size=8,
        patch_size=2,
        in_channels=4,
        num_layers=2,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=32,
        caption_projection_dim=32,
        pooled_projection_dim=16,
        out_channels=4,
        pos_embed_max_size=16,
    )
    wrapped = _Keywords(model, "hidden_states", "encoder_hidden_states", "pooled_projections", "timestep")
    return wrapped.eval(), (torch.randn(1, 4, 8, 8), torch.randn(1, 6, 32), torch.randn(1, 16), torch.tensor([500.0]))


_LM: dict[str, Any] = dict(
    hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000
)
_DECODER: dict[str, Any] = dict(_LM, num_key_value_heads=2, max_position_embeddings=64, use_cache=False)

MODELS: dict[str, Callable[[], Example]] = {
    # torchvision
    "densenet121": _torchvision("densenet121"),
    "googlenet": _torchvision("googlenet", aux_logits=False, init_weights=True),
    "inception_v3": _torchvision("inception_v3", size=96, aux_logits=False, init_weights=True),
    "vgg11_bn": _torchvision("vgg11_bn", size=32),
    "efficientnet_v2_s": _torchvision("efficientnet_v2_s"),
    "convnext_tiny": _torchvision("convnext_tiny"),
    "swin_t": _torchvision("swin_t"),
    "vit_b_16": _torchvision("vit_b_16", size=224),
    "maxvit_t": _torchvision("maxvit_t", size=224),
    "regnet_x_400mf": _torchvision("regnet_x_400mf"),
    "resnext50_32x4d": _torchvision("resnext50_32x4d"),
    "deeplabv3_mobilenet_v3_large": lambda: _segmentation("deeplabv3_mobilenet_v3_large"),
    "lraspp_mobilenet_v3_large": lambda: _segmentation("lraspp_mobilenet_v3_large"),
    "r3d_18": lambda: _video("r3d_18"),
    # timm
    "vit_tiny_patch16_224": _timm("vit_tiny_patch16_224", img_size=64),
    "deit_tiny_distilled_patch16_224": _timm("deit_tiny_distilled_patch16_224", img_size=64),
    "beit_base_patch16_224": _timm("beit_base_patch16_224", img_size=64, depth=2, embed_dim=64, num_heads=2),
    "eva02_tiny_patch14_224": _timm("eva02_tiny_patch14_224", size=56, img_size=56, depth=2),
    "levit_128s": _timm("levit_128s", size=224),
    "mobilevit_xxs": _timm("mobilevit_xxs"),
    "efficientformer_l1": _timm("efficientformer_l1", size=224),
    "poolformer_s12": _timm("poolformer_s12"),
    "convnext_atto": _timm("convnext_atto"),
    "ghostnet_100": _timm("ghostnet_100"),
    "rexnet_100": _timm("rexnet_100"),
    "mixnet_s": _timm("mixnet_s"),
    "dla34": _timm("dla34"),
    "res2net50_26w_4s": _timm("res2net50_26w_4s"),
    "skresnet18": _timm("skresnet18"),
    "hrnet_w18_small": _timm("hrnet_w18_small"),
    "pvt_v2_b0": _timm("pvt_v2_b0"),
    "twins_svt_small": _timm("twins_svt_small", depths=(1, 1, 1, 1)),
    "coat_lite_tiny": _timm("coat_lite_tiny", img_size=64),
    "fastvit_t8": _timm("fastvit_t8"),
    "repvit_m1": _timm("repvit_m1"),
    "edgenext_xx_small": _timm("edgenext_xx_small"),
    "cait_xxs24_224": _timm("cait_xxs24_224", img_size=64, depth=2),
    "xcit_nano_12_p16_224": _timm("xcit_nano_12_p16_224", img_size=64, depth=2),
    "maxvit_nano_rw_256": _timm("maxvit_nano_rw_256", size=256),
    # transformers
    "llama": _text("LlamaConfig", "LlamaModel", **_DECODER),
    "mistral": _text("MistralConfig", "MistralModel", **_DECODER),
    "qwen2": _text("Qwen2Config", "Qwen2Model", **_DECODER),
    "gemma": _text("GemmaConfig", "GemmaModel", head_dim=16, **_DECODER),
    "phi3": _text("Phi3Config", "Phi3Model", pad_token_id=0, **_DECODER),
    "gpt_neox": _text("GPTNeoXConfig", "GPTNeoXModel", max_position_embeddings=64, use_cache=False, **_LM),
    "bloom": _text("BloomConfig", "BloomModel", hidden_size=64, n_layer=2, n_head=4, vocab_size=1000, use_cache=False),
    "opt": _text(
        "OPTConfig",
        "OPTModel",
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        ffn_dim=128,
        vocab_size=1000,
        max_position_embeddings=64,
        word_embed_proj_dim=64,
        use_cache=False,
    ),
    "falcon": _text(
        "FalconConfig",
        "FalconModel",
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        vocab_size=1000,
        use_cache=False,
    ),
    "t5_encoder": _text(
        "T5Config", "T5EncoderModel", d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, vocab_size=1000
    ),
    "albert": _text("AlbertConfig", "AlbertModel", embedding_size=32, **_LM),
    "electra": _text("ElectraConfig", "ElectraModel", embedding_size=32, **_LM),
    "deberta_v2": _text("DebertaV2Config", "DebertaV2Model", **_LM),
    "xlm_roberta": _text("XLMRobertaConfig", "XLMRobertaModel", **_LM),
    "mobilebert": _text(
        "MobileBertConfig",
        "MobileBertModel",
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        embedding_size=32,
        intra_bottleneck_size=32,
        true_hidden_size=32,
        vocab_size=1000,
    ),
    "mpnet": _text("MPNetConfig", "MPNetModel", **_LM),
    "clip_text": _text(
        "CLIPTextConfig",
        "CLIPTextModel",
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        vocab_size=1000,
        max_position_embeddings=32,
    ),
    "vit_hf": _hf_vision("ViTConfig", "ViTModel", image_size=32, patch_size=8, **_LM),
    "clip_vision": _hf_vision(
        "CLIPVisionConfig",
        "CLIPVisionModel",
        image_size=32,
        patch_size=8,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
    ),
    "dinov2": _hf_vision(
        "Dinov2Config",
        "Dinov2Model",
        image_size=32,
        patch_size=8,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        mlp_ratio=2,
    ),
    "segformer": _hf_vision(
        "SegformerConfig",
        "SegformerModel",
        size=64,
        hidden_sizes=[16, 32, 64, 128],
        num_attention_heads=[1, 2, 4, 8],
        depths=[1, 1, 1, 1],
    ),
    "convnext_hf": _hf_vision(
        "ConvNextConfig", "ConvNextModel", size=64, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1]
    ),
    "whisper_encoder": _whisper_encoder,
    "wav2vec2": _wav2vec2,
    # mixture of experts, with transformers' default experts implementation (grouped_mm)
    "mixtral_moe": _text("MixtralConfig", "MixtralModel", num_local_experts=4, num_experts_per_tok=2, **_DECODER),
    "qwen3_moe": _text(
        "Qwen3MoeConfig",
        "Qwen3MoeModel",
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=64,
        head_dim=16,
        **_DECODER,
    ),
    "deepseek_v3_moe": _text(
        "DeepseekV3Config",
        "DeepseekV3Model",
        **dict(
            _DECODER,
            num_key_value_heads=4,
            n_routed_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=64,
            n_group=2,
            topk_group=1,
            n_shared_experts=1,
            first_k_dense_replace=1,
            kv_lora_rank=16,
            q_lora_rank=32,
            qk_rope_head_dim=8,
            qk_nope_head_dim=8,
            v_head_dim=16,
        ),
    ),
    "gpt_oss": _text(
        "GptOssConfig",
        "GptOssModel",
        **dict(_DECODER, num_local_experts=4, num_experts_per_tok=2, head_dim=16, layer_types=["full_attention"] * 2),
    ),
    # hybrids: gated delta-net linear attention (Qwen3-Next), Mamba (Jamba), each with MoE layers
    "qwen3_next": _text(
        "Qwen3NextConfig",
        "Qwen3NextModel",
        **dict(
            _DECODER,
            head_dim=16,
            moe_intermediate_size=64,
            shared_expert_intermediate_size=64,
            num_experts=4,
            num_experts_per_tok=2,
            linear_num_value_heads=2,
            linear_num_key_heads=2,
            linear_key_head_dim=16,
            linear_value_head_dim=16,
        ),
    ),
    "jamba": _text(
        "JambaConfig",
        "JambaModel",
        **dict(
            _DECODER,
            num_experts=4,
            num_experts_per_tok=2,
            mamba_d_state=8,
            mamba_expand=2,
            mamba_dt_rank=8,
            attn_layer_period=2,
            attn_layer_offset=1,
            expert_layer_period=1,
            expert_layer_offset=0,
            use_mamba_kernels=False,
        ),
    ),
    # a vision-language merge, an encoder-decoder with decoder inputs, a diffusion transformer
    "llava": _llava,
    "t5_seq2seq": _seq2seq,
    "sd3_transformer": _sd3_transformer,
}


def _segmentation(name: str) -> Example:
    import torchvision

    model = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None, num_classes=5)
    return model.eval(), _image(64)


def _video(name: str) -> Example:
    import torchvision

    model = getattr(torchvision.models.video, name)(weights=None)
    return model.eval(), (torch.randn(1, 3, 4, 32, 32),)


def _scale(expected: torch.Tensor) -> float:
    """An output's largest magnitude (1 for an empty, all-zero or non-float one)."""
    if not expected.is_floating_point() or not expected.numel():
        return 1.0
    return float(expected.abs().max()) or 1.0


def _round_trip(lowered: trt_lower.LoweredModule, inputs: tuple[torch.Tensor, ...], backend: str) -> str:
    """'ok' when the saved and loaded artifact's outputs equal the lowered module's bit for bit."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.trtl")
        trt_lower.save(lowered, path)
        loaded = trt_lower.load(path, backend=backend)
    with torch.no_grad():
        got, want = pytree.tree_leaves(loaded(*inputs)), pytree.tree_leaves(lowered(*inputs))
    same = len(got) == len(want) and all(torch.equal(a, b) for a, b in zip(got, want))
    return "ok" if same else "differs"


# --dynamic: the ranges (min, opt, max) of a batch dim and of token ids' sequence dim; with
# `spatial`, an image's height and width range over its example size -32..+32 too.
_BATCH, _SEQUENCE, _SPATIAL = (1, 2, 4), (4, 16, 32), (-32, 0, 32)


def _spec(example: torch.Tensor, dynamic: str) -> trt_lower.TensorSpec:
    """`example`'s shape with a batch range, a sequence range for token ids, and with `spatial`
    height and width ranges for images."""
    shape = list(example.shape)
    ranges: dict[int, tuple[int, ...]] = {0: _BATCH}
    if example.dtype == torch.int64 and example.dim() == 2:
        ranges[1] = _SEQUENCE
    if dynamic == "spatial" and example.is_floating_point() and example.dim() >= 4:
        ranges.update({d: tuple(max(16, shape[d] + k) for k in _SPATIAL) for d in (-2 % len(shape), -1 % len(shape))})
    low, opt, high = ([ranges[d][k] if d in ranges else n for d, n in enumerate(shape)] for k in range(3))
    return trt_lower.TensorSpec(low, opt, high, dtype=example.dtype)


def _resized(example: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """An input like `example` of `shape`: normal floats, or ids drawn from the example's values."""
    if example.is_floating_point():
        return torch.randn(shape, dtype=example.dtype)
    return torch.randint(0, int(example.max()) + 1, shape, dtype=example.dtype)


def _calls(
    lowered: trt_lower.LoweredModule, inputs: tuple[torch.Tensor, ...], dynamic: str | None
) -> list[tuple[torch.Tensor, ...]]:
    """The inputs each model is checked on: its example inputs, or with --dynamic inputs at the
    ends of the ranges the module was lowered for (torch may narrow the ranges asked for) and a
    shape in between."""
    if not dynamic:
        return [inputs]
    guard = lowered._input_guard
    assert isinstance(guard, InputGuard)
    sigs = guard.inputs
    shapes = [
        [s.min_shape for s in sigs],
        [s.max_shape for s in sigs],
        [tuple((lo + hi + 1) // 2 for lo, hi in zip(s.min_shape, s.max_shape)) for s in sigs],
    ]
    return [tuple(_resized(x, shape) for x, shape in zip(inputs, call)) for call in shapes]


def _error(model: torch.nn.Module, lowered: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> float | str:
    """check_accuracy's max abs error per output (inf where a shape or dtype differs), each
    relative to that output's largest magnitude; the largest of these. Where eager raises, inf
    unless the lowered module raises too; where the lowered module refuses the shapes
    (EngineInputError: a size condition the model was captured under), its message."""
    shapes = ", ".join(str(tuple(x.shape)) for x in inputs)
    with torch.no_grad():
        try:
            expected = model(*inputs)
        except Exception:  # the model itself does not take these shapes
            try:
                lowered(*inputs)
            except Exception:
                return f"{shapes}: eager and lowered both raise"
            return math.inf
        try:
            lowered(*inputs)
        except trt_lower.EngineInputError as e:
            return f"{shapes}: refused: {str(e)[:200]}"
    accuracy = trt_lower.check_accuracy(model, lowered, inputs)
    scales = [_scale(e) for e in pytree.tree_leaves(expected) if isinstance(e, torch.Tensor)]
    return max((o.max_abs / s for o, s in zip(accuracy.outputs, scales, strict=True)), default=0.0)


def sweep_one(
    name: str, backend: str, trt_version: str | None, precision: str, artifact: bool, dynamic: str | None = None
) -> dict[str, Any]:
    torch.manual_seed(0)
    model, inputs = MODELS[name]()
    specs = [_spec(x, dynamic) for x in inputs] if dynamic else inputs
    start = time.perf_counter()
    lowered = trt_lower.lower_to_trt(model, specs, backend=backend, trt_version=trt_version, precision=precision)
    seconds = time.perf_counter() - start
    calls = _calls(lowered, inputs, dynamic)
    results = [_error(model, lowered, call) for call in calls]
    error = max((r for r in results if isinstance(r, float)), default=0.0)
    skipped = [r for r in results if isinstance(r, str)]
    report = lowered.report
    eager = collections.Counter(f.op for f in report.fallbacks)
    reasons = {f.op: f.reason for f in reversed(report.fallbacks)}  # each op's first reason
    row: dict[str, Any] = {
        "engines": len(report.engines),
        "coverage": report.coverage,
        "eager": dict(eager),
        "reasons": reasons,
        "error": error,
        "lower_s": seconds,
        "calls": len(calls),
        "skipped": skipped,
        "notes": list(report.notes),
    }
    if artifact:
        ran = [call for call, result in zip(calls, results) if isinstance(result, float)]
        row["artifact"] = _round_trip(lowered, ran[-1], backend) if ran else "not called"
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--backend", default="onnxruntime")
    parser.add_argument("--trt-version", default=None)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--artifact", action="store_true")
    parser.add_argument("--dynamic", nargs="?", const="batch", choices=("batch", "spatial"), default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    results: dict[str, Any] = {}
    print(
        f"torch {torch.__version__}, backend {args.backend}, trt_version {args.trt_version or 'default'}, "
        f"precision {args.precision}{f', dynamic {args.dynamic}' if args.dynamic else ''}"
    )
    print(f"{'model':34s} {'engines':>7s} {'coverage':>8s} {'rel. error':>10s} {'lower s':>7s}  eager ops")
    for name in args.models.split(","):
        try:
            row = sweep_one(name, args.backend, args.trt_version, args.precision, args.artifact, args.dynamic)
        except Exception as e:  # the sweep goes on: the failure is the result
            first = (str(e).strip().splitlines() or [""])[0][:160]
            row = {"failed": f"{type(e).__name__}: {first}", "traceback": traceback.format_exc()}
            print(f"{name:34s} FAILED {row['failed']}", flush=True)
        else:
            eager = ", ".join(f"{op} x{k}" for op, k in sorted(row["eager"].items()))
            saved = f"  artifact {row['artifact']}" if "artifact" in row else ""
            saved += f"  {len(row['skipped'])}/{row['calls']} calls skipped" if row["skipped"] else ""
            print(
                f"{name:34s} {row['engines']:7d} {row['coverage']:8.3f} {row['error']:10.2e} "
                f"{row['lower_s']:7.1f}{saved}  {eager}",
                flush=True,
            )
        results[name] = row
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
