"""Inputs as pytrees, positional and keyword: tuples, lists, dicts and transformers' caches, with
TensorSpec leaves where a size varies; the lowered module takes (and checks) the same structure,
and an artifact records it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import trt_lower
from trt_lower import TensorSpec
from trt_lower.runtime.inputs import InputStructureError
from trt_lower.values.signature import EngineInputError


class Nested(torch.nn.Module):
    def forward(
        self,
        x: torch.Tensor,
        pair: tuple[torch.Tensor, dict[str, torch.Tensor]],
        *,
        scale: torch.Tensor,
        extra: list[torch.Tensor] | None = None,
    ) -> dict[str, torch.Tensor]:
        out = x * pair[0] + pair[1]["b"]
        if extra is not None:
            out = out - extra[0]
        return {"a": torch.relu(out), "s": scale * 2 + x.sum()}


def _rows(n: int) -> TensorSpec:
    return TensorSpec((1, 3), (2, 3), (n, 3))


def _call(b: int) -> tuple[tuple[object, ...], dict[str, object]]:
    return (
        (torch.randn(b, 3), (torch.randn(b, 3), {"b": torch.randn(b, 3)})),
        {"scale": torch.randn(1), "extra": [torch.randn(b, 3)]},
    )


@pytest.fixture(scope="module")
def nested() -> trt_lower.LoweredModule:
    # kwargs in another order than forward's: the lowered module reads them by name.
    return trt_lower.lower_to_trt(
        Nested(),
        (_rows(4), (_rows(4), {"b": _rows(4)})),
        kwargs={"extra": [_rows(4)], "scale": torch.randn(1)},
        min_block_size=1,
    )


def test_nested_inputs_with_specs_lower_whole_and_match_eager(nested: trt_lower.LoweredModule) -> None:
    assert nested.report.coverage == 1.0
    for b in (1, 3, 4):
        args, kwargs = _call(b)
        torch.testing.assert_close(nested(*args, **kwargs), Nested()(*args, **kwargs))


def test_a_call_of_another_structure_is_refused_naming_where(nested: trt_lower.LoweredModule) -> None:
    (x, (p, d)), kwargs = _call(2)
    with pytest.raises(
        InputStructureError, match=r"inputs\[1\]\[1\]: the model was lowered for a dict with keys \['b'\]"
    ):
        nested(x, (p, {"c": d["b"]}), **kwargs)
    with pytest.raises(
        InputStructureError, match=r"kwargs\['extra'\]: the model was lowered for a list of 1, got a list of 2"
    ):
        nested(x, (p, d), scale=kwargs["scale"], extra=[p, p])


def test_a_leaf_out_of_its_range_is_refused_by_name(nested: trt_lower.LoweredModule) -> None:
    (x, (p, d)), kwargs = _call(2)
    with pytest.raises(EngineInputError, match=r"input 'pair_1_b' was lowered for the range \(1..4, 3\) float32"):
        nested(x, (p, {"b": torch.randn(5, 3)}), **kwargs)


def test_a_leaf_that_is_no_tensor_is_refused_at_lowering_by_its_path() -> None:
    x = torch.randn(2, 3)
    with pytest.raises(
        ValueError, match=r"inputs\[1\]\[1\]\['b'\] must be a torch.Tensor or trt_lower.TensorSpec, got int"
    ):
        trt_lower.lower_to_trt(Nested(), (x, (x, {"b": 3})), kwargs={"scale": x})
    with pytest.raises(ValueError, match=r"kwargs\['extra'\]\[0\] must be .* got NoneType \(leave it out\)"):
        trt_lower.lower_to_trt(Nested(), (x, (x, {"b": x})), kwargs={"scale": x, "extra": [None]})
    with pytest.raises(ValueError, match="Nested.forward does not accept"):
        trt_lower.lower_to_trt(Nested(), (x, (x, {"b": x})), kwargs={"scales": x})


def test_artifact_records_the_structure(nested: trt_lower.LoweredModule, tmp_path: Path) -> None:
    trt_lower.save(nested, tmp_path / "nested.trtl")
    loaded = trt_lower.load(tmp_path / "nested.trtl")
    args, kwargs = _call(3)
    torch.testing.assert_close(loaded(*args, **kwargs), Nested()(*args, **kwargs))
    with pytest.raises(InputStructureError, match=r"inputs\[1\]"):
        loaded(args[0], [args[1][0], args[1][1]], **kwargs)


def test_a_transformers_decode_step_with_its_cache_lowers(tmp_path: Path) -> None:
    """The issue's case: `lower_to_trt(model, (next_ids,), kwargs={"past_key_values": cache})`."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    prompt, next_ids = torch.randint(0, 64, (1, 5)), torch.randint(0, 64, (1, 1))

    def cache(ids: torch.Tensor = prompt) -> object:
        with torch.no_grad():
            return model(ids, use_cache=True).past_key_values

    lowered = trt_lower.lower_to_trt(model, (next_ids,), kwargs={"past_key_values": cache()})
    assert lowered.report.coverage == 1.0
    with torch.no_grad():
        expected = model(next_ids, past_key_values=cache())
    trt_lower.save(lowered, tmp_path / "step.trtl")
    for module in (lowered, trt_lower.load(tmp_path / "step.trtl")):
        got = module(next_ids, past_key_values=cache())
        torch.testing.assert_close(got.logits, expected.logits)
        for g, e in zip(got.past_key_values.layers, expected.past_key_values.layers):
            torch.testing.assert_close((g.keys, g.values), (e.keys, e.values))
    with pytest.raises(EngineInputError, match=r"was lowered for \(1, 2, 5, 8\) float32, got \(1, 2, 3, 8\)"):
        lowered(next_ids, past_key_values=cache(prompt[:, :3]))
    with pytest.raises(
        InputStructureError, match=r"kwargs\['past_key_values'\]: the model was lowered for a DynamicCache"
    ):
        lowered(next_ids, past_key_values=torch.zeros(1))


def test_lowering_leaves_each_submodule_in_its_own_mode() -> None:
    """A wrapper (train mode, as built) around an eval-mode model: capture runs both in eval, and
    gives each its own mode back; restoring the wrapper's alone put the model into training
    (dropout on in the user's eager model afterwards)."""
    inner = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout(0.5)).eval()
    wrapper = torch.nn.Sequential(inner)
    assert wrapper.training
    trt_lower.lower_to_trt(wrapper, (torch.randn(2, 3),))
    assert wrapper.training and not inner.training and not inner[1].training
