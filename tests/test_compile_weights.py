"""torch.compile(backend="trt_lower") runs each module instance with its own weights.

With Dynamo's default `inline_inbuilt_nn_modules=True`, a graph break inside a block's forward
makes one graph that every block instance calls with its own parameters: engines built with the
first block's weights must not serve the others. Each model here has blocks with different
weights, so a shared engine gives wrong numbers. torch 2.14 always inlines (the flag is deprecated
and `False` ignored); the tests pass both values for a torch that still honours it, and Dynamo's
other way of holding weights, as constants of its graph, is taken by a free tensor."""

from __future__ import annotations

import logging
from typing import Any, Callable, cast

import pytest
import torch
import transformers
from test_capture_paths import CountingRecorder

from trt_lower import dynamo_backend

ORT: dict[str, Any] = {"backend": "onnxruntime", "min_block_size": 1}


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.l1(x))
        torch._dynamo.graph_break()
        return torch.relu(self.l2(x)) + x


class Blocks(torch.nn.Module):
    def __init__(self, n: int = 3) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> CountingRecorder:
    torch._dynamo.reset()
    recorder = CountingRecorder()
    monkeypatch.setattr(dynamo_backend, "lower_to_trt", recorder)
    return recorder


def assert_engines_ran(recorder: CountingRecorder, lowerings: int, calls: int) -> None:
    assert len(recorder.lowered) == lowerings, f"{len(recorder.lowered)} lowerings, expected one per block and graph"
    for lowered in recorder.lowered:
        assert lowered.report.coverage == 1.0, str(lowered.report)
    assert recorder.calls == calls, f"{calls - recorder.calls} graph calls ran eagerly"


# torch 2.14 warns that it ignores the flag.
IGNORED_FLAG = pytest.mark.filterwarnings("ignore:torch._dynamo.config.inline_inbuilt_nn_modules")
INLINE = pytest.mark.parametrize(
    "inline",
    [
        pytest.param(True, id="inline_modules", marks=IGNORED_FLAG),
        pytest.param(False, id="modules_not_inlined", marks=IGNORED_FLAG),
    ],
)


@INLINE
def test_repeated_blocks_with_a_graph_break_run_their_own_weights(recorder: CountingRecorder, inline: bool) -> None:
    model = Blocks().eval()
    x = torch.randn(4, 16)
    with torch._dynamo.config.patch(inline_inbuilt_nn_modules=inline), torch.no_grad():
        compiled = torch.compile(model, backend="trt_lower", options=ORT)
        for _ in range(2):
            torch.testing.assert_close(compiled(x), model(x))
    assert_engines_ran(recorder, lowerings=6, calls=12)


def test_dynamic_shapes_keep_one_lowering_per_block(recorder: CountingRecorder) -> None:
    model = Blocks().eval()
    compiled = torch.compile(model, backend="trt_lower", dynamic=True, options=ORT)
    with torch.no_grad():
        for n in (2, 3, 5):
            x = torch.randn(n, 16)
            torch.testing.assert_close(compiled(x), model(x))
    assert_engines_ran(recorder, lowerings=6, calls=18)
    assert all(recorder.inputs[k][0].min_shape[0] != recorder.inputs[k][0].max_shape[0] for k in range(6))


def _copy_into_one_weight(model: Blocks) -> None:
    with torch.no_grad():
        cast(Block, model.blocks[1]).l2.weight.copy_(torch.randn(16, 16))


def _replace_one_weight_tensor(model: Blocks) -> None:
    cast(Block, model.blocks[2]).l1.weight.data = torch.randn(16, 16)


def _optimizer_step(model: Blocks) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model(torch.randn(4, 16)).square().sum().backward()
    optimizer.step()


@pytest.mark.parametrize(
    "change, rebuilt",
    [(_copy_into_one_weight, 1), (_replace_one_weight_tensor, 1), (_optimizer_step, 6)],
    ids=["copy_", "data", "optimizer"],
)
def test_weights_changed_between_calls_rebuild_the_engines_that_hold_them(
    recorder: CountingRecorder, caplog: pytest.LogCaptureFixture, change: Callable[[Blocks], None], rebuilt: int
) -> None:
    model = Blocks().eval()
    x = torch.randn(4, 16)
    compiled = torch.compile(model, backend="trt_lower", options=ORT)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    change(model)
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="trt_lower"):
        torch.testing.assert_close(compiled(x), model(x))
        torch.testing.assert_close(compiled(x), model(x))
    assert_engines_ran(recorder, lowerings=6 + rebuilt, calls=18)
    warned = [r for r in caplog.records if "changed in place" in r.getMessage()]
    assert len(warned) == rebuilt


def test_a_constant_of_the_graph_changed_in_place_rebuilds(
    recorder: CountingRecorder, caplog: pytest.LogCaptureFixture
) -> None:
    """A free tensor becomes a constant of Dynamo's graph (install_free_tensors), as weights do
    where modules are not inlined: a change in place is followed too."""
    weight = torch.randn(16, 16)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ weight) + 1

    x = torch.randn(4, 16)
    with torch._dynamo.config.patch(install_free_tensors=True):
        compiled = torch.compile(fn, backend="trt_lower", options=ORT)
        torch.testing.assert_close(compiled(x), fn(x))
        weight.copy_(torch.randn(16, 16))
        with caplog.at_level(logging.WARNING, logger="trt_lower"):
            torch.testing.assert_close(compiled(x), fn(x))
    assert [r for r in caplog.records if "changed in place" in r.getMessage()]
    assert_engines_ran(recorder, lowerings=2, calls=2)
    assert not recorder.inputs[0][1:], "the weight was a graph input, not a constant"


def _break_after(cls: type[torch.nn.Module], monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph break after each call of `cls`'s forward: the layer's body becomes one graph that
    Dynamo calls once per layer, with that layer's weights."""
    forward = cls.forward

    def broken(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        out = forward(self, *args, **kwargs)
        torch._dynamo.graph_break()
        return out

    monkeypatch.setattr(cls, "forward", broken)


def _check_layers(
    recorder: CountingRecorder,
    compiled: Callable[..., Any],
    eager: Callable[..., Any],
    inputs: tuple[Any, ...],
    layers: int,
) -> None:
    def result(out: Any) -> torch.Tensor:
        return out.last_hidden_state if hasattr(out, "last_hidden_state") else out.logits

    with torch.no_grad():
        expected = result(eager(*inputs))
        for _ in range(2):
            torch.testing.assert_close(result(compiled(*inputs)), expected, rtol=1e-4, atol=1e-4)
    lowered = len(recorder.lowered)
    assert lowered > layers, "one lowering per layer (and the graphs around them)"
    for each in recorder.lowered:
        assert each.report.engines, str(each.report)
        reasons = [f.reason for f in each.report.fallbacks]
        assert not [r for r in reasons if "could not build" in r or "failed" in r], reasons
    assert recorder.calls == 2 * lowered, "a graph call ran eagerly"


def test_vit_tower_with_a_graph_break_in_each_layer(
    recorder: CountingRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers.models.vit import modeling_vit

    _break_after(modeling_vit.ViTLayer, monkeypatch)
    config: dict[str, Any] = dict(
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=2,
        intermediate_size=64,
        image_size=32,
        patch_size=8,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    model: Any = transformers.ViTModel(transformers.ViTConfig(**config), add_pooling_layer=False)
    model.eval()
    compiled = torch.compile(model, backend="trt_lower", options=ORT)
    _check_layers(recorder, compiled, model, (torch.randn(2, 3, 32, 32),), layers=3)


def test_llama_with_a_graph_break_in_each_layer(recorder: CountingRecorder, monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers.models.llama import modeling_llama

    _break_after(modeling_llama.LlamaDecoderLayer, monkeypatch)
    config: dict[str, Any] = dict(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        attn_implementation="eager",
        use_cache=False,
    )
    torch.manual_seed(0)
    model: Any = transformers.LlamaForCausalLM(transformers.LlamaConfig(**config))
    model.eval()
    compiled = torch.compile(model, backend="trt_lower", options=ORT)
    _check_layers(recorder, compiled, model, (torch.randint(0, 64, (2, 8)),), layers=3)
