"""update_weights derives again every tensor lowering froze, not only the state dict: non-persistent
buffers (a transformers Llama's rotary `inv_freq`), batch-norm statistics, tensor attributes; a
model without one of them is refused by name, and the check after an update is verification's."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from test_refit import ConvBn, finetuned

import trt_lower
import trt_lower.refit.state
from trt_lower.refit.errors import WeightUpdateError

transformers = pytest.importorskip("transformers")


def _llama() -> torch.nn.Module:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=64,
        vocab_size=100,
        max_position_embeddings=32,
        use_cache=False,
    )
    return transformers.LlamaForCausalLM(config).eval()


def _logits(module: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        out = module(ids)
    logits = out if isinstance(out, torch.Tensor) else out[0] if isinstance(out, (tuple, list)) else out.logits
    assert isinstance(logits, torch.Tensor)
    return logits


def _rotary_changed(model: torch.nn.Module, factor: float) -> torch.nn.Module:
    """`model` with its rotary frequencies scaled (a RoPE rescaling), weights as they were."""
    new = copy.deepcopy(model)
    new.model.rotary_emb.inv_freq.mul_(factor)
    return new


@pytest.fixture(scope="module")
def llama() -> tuple[torch.nn.Module, torch.Tensor, trt_lower.LoweredModule]:
    # 32 tokens: the conversion's own constants include a large one (a 32 x 32 triangle, held apart).
    model, ids = _llama(), torch.randint(0, 100, (1, 32))
    return model, ids, trt_lower.lower_to_trt(model, (ids,), backend="onnxruntime")


def test_a_changed_rotary_buffer_is_derived_again(
    llama: tuple[torch.nn.Module, torch.Tensor, trt_lower.LoweredModule],
) -> None:
    model, ids, lowered = llama
    new = _rotary_changed(model, 1.05)
    assert "model.rotary_emb.inv_freq" not in new.state_dict()  # non-persistent: a state dict has none
    lowered.update_weights(new)
    torch.testing.assert_close(_logits(lowered, ids), _logits(new, ids))  # fp32 tightness
    # A state dict leaves a non-persistent buffer as it is (as load_state_dict does), or sets it by name.
    lowered.update_weights(model.state_dict())
    torch.testing.assert_close(_logits(lowered, ids), _logits(new, ids))
    lowered.update_weights({**model.state_dict(), "model.rotary_emb.inv_freq": model.model.rotary_emb.inv_freq})
    torch.testing.assert_close(_logits(lowered, ids), _logits(model, ids))


def test_a_model_without_the_buffer_is_refused_by_name(
    llama: tuple[torch.nn.Module, torch.Tensor, trt_lower.LoweredModule],
) -> None:
    model, ids, lowered = llama
    new = copy.deepcopy(model)
    del new.model.rotary_emb.inv_freq
    with pytest.raises(WeightUpdateError, match=r"buffer 'model\.rotary_emb\.inv_freq'"):
        lowered.update_weights(new)
    wrong = {**model.state_dict(), "model.rotary_emb.inv_freq": torch.ones(3)}
    with pytest.raises(WeightUpdateError, match=r"'model\.rotary_emb\.inv_freq' is torch\.float32 \(3,\)"):
        lowered.update_weights(wrong)
    torch.testing.assert_close(_logits(lowered, ids), _logits(model, ids))


def test_conv_batch_norm_takes_new_parameters_statistics_and_buffers() -> None:
    torch.manual_seed(0)
    model, x = ConvBn().eval(), torch.randn(2, 3, 8, 8)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime")
    new = finetuned(model, scale=0.1)
    new[1].running_var.abs_()
    assert not torch.equal(new[1].running_mean, model[1].running_mean)
    lowered.update_weights(new)
    with torch.no_grad():
        torch.testing.assert_close(lowered(x), new(x))


def test_a_stale_constant_fails_the_check_after_the_update(monkeypatch: pytest.MonkeyPatch) -> None:
    """The planted fault: constants kept from lowering, as before (the state dict alone taken)."""
    torch.manual_seed(0)
    model, x = ConvBn().eval(), torch.randn(2, 3, 8, 8)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime")
    new = copy.deepcopy(model)
    new.offset.add_(1.0)
    monkeypatch.setattr(trt_lower.refit.state, "_taken", lambda program, source: dict(source.state_dict()))
    with pytest.raises(WeightUpdateError, match=r"does not match eager PyTorch .*fp32"):
        lowered.update_weights(new)
    with torch.no_grad():
        torch.testing.assert_close(lowered(x), model(x))


def test_a_stripped_llama_takes_the_models_names(
    llama: tuple[torch.nn.Module, torch.Tensor, trt_lower.LoweredModule], tmp_path: Path
) -> None:
    """The weight file's engine weights, rotary table included, from the model's own names."""
    model, ids, lowered = llama
    trt_lower.save(lowered, tmp_path / "m.trtl", weights="separate")
    new = _rotary_changed(finetuned(model, scale=0.05), 1.05)
    weights = {**new.state_dict(), "model.rotary_emb.inv_freq": new.model.rotary_emb.inv_freq}
    module = trt_lower.load(tmp_path / "m.trtl", backend="onnxruntime", weights=weights)
    torch.testing.assert_close(_logits(module, ids), _logits(new, ids))


class Scaled(torch.nn.Module):
    """A linear layer whose output a plain tensor attribute scales (no parameter, no buffer: a
    constant of the program), plus a tensor the forward makes."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.scale = torch.rand(4) + 0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * self.scale + torch.tensor([1.0, 2.0, 3.0, 4.0])


def test_a_tensor_attribute_is_taken_from_the_model() -> None:
    torch.manual_seed(0)
    model, x = Scaled().eval(), torch.randn(2, 4)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", min_block_size=1)
    assert "scale" in lowered.lowering.captured.program.constants
    new = copy.deepcopy(model)
    new.scale = torch.rand(4) + 2.0
    lowered.update_weights(new)
    with torch.no_grad():
        torch.testing.assert_close(lowered(x), new(x))
