"""Triton serving a causal LM lowered for generation: one request = a prompt plus options ->
generate()'s tokens, served by a real tritonserver (from nvidia-pytriton) on 127.0.0.1 and queried
with tritonclient. One server for the module."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
import torch

import trt_lower
from trt_lower.triton import TritonServer, export_model_repository

transformers = pytest.importorskip("transformers")
pytest.importorskip("tritonclient.http")
pytest.importorskip("tritonclient.grpc")
from google.protobuf import text_format  # noqa: E402
from triton_serving import INVALID, client, infer, serving  # noqa: E402
from tritonclient.grpc import model_config_pb2  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

from trt_lower.llm import LoweredCausalLM, lower_causal_lm  # noqa: E402

pytestmark = pytest.mark.serving

VOCAB = 96
MAX_BATCH, MAX_LENGTH = 2, 32
NAME = "llama"


class Served:
    """The eager Llama, its lowering and the server that serves the lowering as NAME."""

    def __init__(self, model: Any, gen: LoweredCausalLM, server: TritonServer) -> None:
        self.model, self.gen, self.server = model, gen, server


@pytest.fixture(scope="module")
def llama() -> tuple[Any, LoweredCausalLM]:
    """A tiny Llama (random weights) and its lowering for generation."""
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            vocab_size=VOCAB,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
        )
    ).eval()
    # The server here has no GPU: a TensorRT engine (the double's too) would make a KIND_GPU model.
    return model, lower_causal_lm(model, max_batch=MAX_BATCH, max_length=MAX_LENGTH, backend="onnxruntime")


@pytest.fixture(scope="module")
def served(llama: tuple[Any, LoweredCausalLM], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    model, gen = llama
    root = tmp_path_factory.mktemp("triton_generate")
    # The LoweredCausalLM itself: from its artifact, export would load it on TensorRT where
    # TensorRT is importable (the double too), a KIND_GPU model this GPU-less server refuses.
    exported = export_model_repository(gen, root / "repo", NAME)
    assert exported.platform == "python"
    with serving(root / "repo", root / "tritonserver.log") as server:
        yield Served(model, gen, server)


def generate(
    server: TritonServer, protocol: str, ids: torch.Tensor, mask: torch.Tensor | None = None, **options: Any
) -> torch.Tensor:
    """The served model's output_ids for the prompt `ids` (and `mask`), each option a [1] input of
    its OPTIONS dtype."""
    dtypes = {
        "max_new_tokens": np.int32,
        "top_k": np.int32,
        "do_sample": np.bool_,
        "temperature": np.float32,
        "top_p": np.float32,
    }
    arrays = {
        "input_ids": ids.numpy(),
        **({} if mask is None else {"attention_mask": mask.numpy()}),
        **{k: np.array([v], dtypes.get(k, np.int64)) for k, v in options.items()},
    }
    with client(server, protocol) as c:
        reply = infer(c, protocol, NAME, arrays)
    return torch.tensor(reply.as_numpy("output_ids"))


def left_padded() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    ids = torch.randint(3, VOCAB, (2, 8))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0  # the second prompt is 5 tokens, padded on the left with tokens that are not pad_token_id
    return ids, mask


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_greedy_batch_with_left_padding_is_eager_generate(served: Served, protocol: str) -> None:
    ids, mask = left_padded()
    with torch.no_grad():
        expected = served.model.generate(ids, attention_mask=mask, max_new_tokens=16, do_sample=False, pad_token_id=0)
    got = generate(served.server, protocol, ids, mask, max_new_tokens=16, do_sample=False, pad_token_id=0)
    assert got.shape == (2, 8 + 16)
    assert torch.equal(got, expected)


def test_a_seeded_sampling_request_is_reproducible(served: Served) -> None:
    """The same tokens as LoweredCausalLM.generate after torch.manual_seed in this process, on
    every request (options exactly representable in float32, as they travel)."""
    ids, mask = left_padded()
    options = dict(max_new_tokens=20, do_sample=True, temperature=0.75, top_k=40, top_p=0.875, pad_token_id=0)
    torch.manual_seed(7)
    expected = served.gen.generate(ids, attention_mask=mask, **options)
    for protocol in ("http", "grpc"):
        assert torch.equal(generate(served.server, protocol, ids, mask, seed=7, **options), expected)
    other = generate(served.server, "http", ids, mask, seed=8, **options)
    assert not torch.equal(other, expected)  # the seed picked the tokens


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_requests_beyond_the_limits_get_an_error_and_the_server_keeps_serving(served: Served, protocol: str) -> None:
    ids, mask = left_padded()
    with torch.no_grad():
        expected = served.model.generate(ids, attention_mask=mask, max_new_tokens=4, do_sample=False, pad_token_id=0)
    bad: list[tuple[str, torch.Tensor, torch.Tensor | None, dict[str, Any]]] = [
        (
            f"GenerationLimitError: the prompt's 40 tokens exceed max_length={MAX_LENGTH}",
            torch.ones(1, 40, dtype=torch.int64),
            None,
            {},
        ),
        (f"GenerationLimitError: batch 3 exceeds max_batch={MAX_BATCH}", torch.ones(3, 4, dtype=torch.int64), None, {}),
        (
            f"GenerationLimitError: the prompt's 20 tokens and 16 new ones exceed max_length={MAX_LENGTH}",
            torch.ones(1, 20, dtype=torch.int64),
            None,
            {"max_new_tokens": 16},
        ),
        ("ValueError: attention_mask has shape (2, 5), input_ids (2, 8)", ids, mask[:, 3:], {}),
    ]
    for message, prompt, prompt_mask, options in bad:
        with pytest.raises(InferenceServerException) as error:
            generate(served.server, protocol, prompt, prompt_mask, pad_token_id=0, **options)
        assert message in str(error.value)
        assert error.value.status() == INVALID[protocol]
        got = generate(served.server, protocol, ids, mask, max_new_tokens=4, do_sample=False, pad_token_id=0)
        assert torch.equal(got, expected)


def test_a_causal_lm_is_a_python_model_without_triton_batching(
    llama: tuple[Any, LoweredCausalLM], tmp_path: Path
) -> None:
    _, gen = llama
    exported = export_model_repository(gen, tmp_path, NAME)
    config = text_format.Parse((exported.path / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
    assert config.backend == "python" and config.max_batch_size == 0
    assert config.parameters["kind"].string_value == "causal_lm"
    assert [(t.name, list(t.dims), t.optional) for t in config.input][:3] == [
        ("input_ids", [-1, -1], False),
        ("attention_mask", [-1, -1], True),
        ("max_new_tokens", [1], True),
    ]
    assert [(t.name, list(t.dims)) for t in config.output] == [("output_ids", [-1, -1])]
    # Its artifact, as `trt-lower triton FILE` exports it, and its step alone are the same model.
    trt_lower.save(gen, tmp_path / "llama.trtl")
    from_file = export_model_repository(tmp_path / "llama.trtl", tmp_path / "file", NAME)
    assert from_file.platform == "python" and (from_file.path / "1" / "model.trtl").is_file()
    assert (
        text_format.Parse((from_file.path / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
        .parameters["kind"]
        .string_value
        == "causal_lm"
    )
    step = export_model_repository(gen.step, tmp_path / "step", NAME)
    assert (step.path / "config.pbtxt").read_text() == (exported.path / "config.pbtxt").read_text()
    with pytest.raises(ValueError, match="max_batch_size=2: a causal LM is served with max_batch_size=0"):
        export_model_repository(gen, tmp_path, "batched", max_batch_size=2)
    with pytest.raises(ValueError, match="platform='onnxruntime_onnx' cannot serve a causal LM"):
        export_model_repository(gen, tmp_path, "onnx", platform="onnxruntime_onnx")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([NAME, "file", "llama.trtl", "step"])
