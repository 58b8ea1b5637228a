"""update_weights on real architectures: a fine-tuned copy of a CNN with batch norm, BERT and a
small Llama (tied embeddings), and LoRA adapters (peft) swapped in and out, merged and unmerged,
each swap matching its own eager model and no other (no blending)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from test_refit import finetuned
from trt_models import llama_config

import trt_lower
from trt_lower.refit.errors import WeightUpdateError

transformers = pytest.importorskip("transformers")


def _out(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    with torch.no_grad():
        out = module(*inputs)
    first = out[0] if isinstance(out, (tuple, dict)) and not isinstance(out, torch.Tensor) else out
    if isinstance(out, dict):
        first = next(iter(out.values()))
    assert isinstance(first, torch.Tensor)
    return first


def _check_update(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], **kwargs: Any) -> None:
    lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", **kwargs)
    new = finetuned(model, scale=0.02)
    assert not torch.allclose(_out(new, inputs), _out(model, inputs), atol=1e-3)
    lowered.update_weights(new)
    torch.testing.assert_close(_out(lowered, inputs), _out(new, inputs), rtol=1e-3, atol=1e-3)
    # A refused update (one weight reshaped) keeps the fine-tuned weights working.
    state = new.state_dict()
    key = next(k for k, v in state.items() if v.dim() == 2)
    with pytest.raises(WeightUpdateError, match=key.replace(".", r"\.")):
        lowered.update_weights({**state, key: state[key][:, :1]})
    torch.testing.assert_close(_out(lowered, inputs), _out(new, inputs), rtol=1e-3, atol=1e-3)


def test_resnet18() -> None:
    torchvision = pytest.importorskip("torchvision")
    _check_update(torchvision.models.resnet18(num_classes=10).eval(), (torch.randn(1, 3, 32, 32),))


def test_bert() -> None:
    config = transformers.BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=500
    )
    _check_update(transformers.BertModel(config).eval(), (torch.randint(0, 500, (2, 16)),))


def _llama() -> torch.nn.Module:
    config = llama_config(use_cache=False, tie_word_embeddings=True)
    return transformers.LlamaForCausalLM(config).eval()


def test_llama_with_tied_embeddings() -> None:
    _check_update(_llama(), (torch.randint(0, 500, (1, 8)),))


def _adapter(base: torch.nn.Module, seed: int, merged: bool) -> torch.nn.Module:
    """`base` with a LoRA adapter on its attention's q/v projections, of weights drawn from `seed`
    (merged into the base weights, or kept as its own layers)."""
    peft = pytest.importorskip("peft")
    model = peft.get_peft_model(
        copy.deepcopy(base),
        peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    )
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.3)
    model.eval()
    return model.merge_and_unload() if merged else model


@pytest.mark.parametrize("merged", [False, True], ids=["unmerged", "merged"])
def test_three_lora_swaps_each_match_their_own_model(merged: bool) -> None:
    base, ids = _llama(), (torch.randint(0, 500, (1, 8)),)
    adapters = [_adapter(base, seed, merged) for seed in (1, 2, 3)]
    outputs = [_out(a, ids) for a in adapters]
    lowered = trt_lower.lower_to_trt(base if merged else adapters[0], ids, backend="onnxruntime")
    for k in (1, 2, 0):  # three swaps, the last back to the first adapter
        lowered.update_weights(adapters[k])
        got = _out(lowered, ids)
        torch.testing.assert_close(got, outputs[k], rtol=1e-4, atol=1e-4)
        others = [o for j, o in enumerate(outputs) if j != k]
        assert all((got - o).abs().max() > 1e-2 for o in others)  # not another adapter's, nor a blend
