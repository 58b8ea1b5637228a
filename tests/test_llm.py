"""trt_lower.llm: causal LMs (tiny configs, random weights) generate through one lowered step
with a preallocated key/value cache, as transformers' generate() on the eager model does."""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any, Callable

import pytest
import torch
from artifact_tamper import tamper

import trt_lower

transformers = pytest.importorskip("transformers")
from trt_lower.llm import GenerationLimitError, LoweredCausalLM, lower_causal_lm  # noqa: E402
from trt_lower.runtime.profiles import ProfileChoice  # noqa: E402

VOCAB = 96
MAX_LENGTH = 80  # prompts of 8 and 64 new tokens


def _llama() -> Any:
    return transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            vocab_size=VOCAB,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
        )
    )


def _mistral() -> Any:  # GQA, rotary, a sliding window the 72 positions go past
    return transformers.MistralForCausalLM(
        transformers.MistralConfig(
            vocab_size=VOCAB,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=1,
            sliding_window=16,
        )
    )


def _qwen2() -> Any:  # GQA with biased projections
    return transformers.Qwen2ForCausalLM(
        transformers.Qwen2Config(
            vocab_size=VOCAB,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
        )
    )


def _gpt2() -> Any:  # learned positions, fused qkv, no GQA
    return transformers.GPT2LMHeadModel(
        transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=128)
    )


_cache: dict[str, tuple[Any, LoweredCausalLM]] = {}


def lowered(make: Callable[[], Any]) -> tuple[Any, LoweredCausalLM]:
    """The eager model and its lowering, once per module for each config."""
    if make.__name__ not in _cache:
        torch.manual_seed(0)
        model = make().eval()
        _cache[make.__name__] = model, lower_causal_lm(model, max_batch=2, max_length=MAX_LENGTH)
    return _cache[make.__name__]


def _left_padded() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    ids = torch.randint(3, VOCAB, (2, 8))
    mask = torch.ones_like(ids)
    ids[1, :3], mask[1, :3] = 0, 0  # the second prompt is 5 tokens, padded on the left
    return ids, mask


GREEDY = dict(max_new_tokens=64, do_sample=False, pad_token_id=0, output_logits=True, return_dict_in_generate=True)


@pytest.mark.parametrize("make", [_llama, _mistral, _qwen2, _gpt2], ids=lambda f: f.__name__[1:])
def test_greedy_64_tokens_match_eager_generate(make: Callable[[], Any]) -> None:
    model, gen = lowered(make)
    assert gen.report.coverage >= 0.99 and not gen.report.fallbacks  # the per-token step is all engine
    assert len(gen.report.engines) == 1
    ids, mask = _left_padded()
    with torch.no_grad():
        expected = model.generate(ids, attention_mask=mask, **GREEDY)
    got = gen.generate(ids, attention_mask=mask, **GREEDY)
    assert got.sequences.shape == (2, 8 + 64)
    assert torch.equal(got.sequences, expected.sequences)
    assert len(got.logits) == len(expected.logits) == 64
    for step, (g, e) in enumerate(zip(got.logits, expected.logits)):
        torch.testing.assert_close(g, e, msg=lambda m: f"step {step}: {m}")


@pytest.mark.parametrize("chunk", [None, 3])
def test_the_step_builds_and_generates_on_the_tensorrt_double(trt_double: Any, chunk: int | None) -> None:
    """The cache length is a dynamic dim of the engine's profile (1..max_length) on TensorRT too:
    the double checks each call's shapes against it (with prefill_chunk=3, the prompt's chunks
    against the prefill profile's 1..3 tokens)."""
    model = _llama().eval()
    gen = lower_causal_lm(model, max_batch=2, max_length=24, prefill_chunk=chunk, backend="tensorrt", require_full=True)
    ids, mask = _left_padded()
    options = dict(max_new_tokens=16, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        expected = model.generate(ids, attention_mask=mask, **options)
    assert gen.report.backend == "tensorrt"
    assert torch.equal(gen.generate(ids, attention_mask=mask, **options), expected)


def test_sampling_with_a_seed_matches_eager() -> None:
    model, gen = lowered(_llama)
    ids, mask = _left_padded()
    options = dict(max_new_tokens=24, do_sample=True, temperature=0.8, top_k=20, top_p=0.9, pad_token_id=0)
    torch.manual_seed(7)
    with torch.no_grad():
        expected = model.generate(ids, attention_mask=mask, **options)
    torch.manual_seed(7)
    assert torch.equal(gen.generate(ids, attention_mask=mask, **options), expected)


def test_eos_stops_a_sequence_and_pads_it_as_eager() -> None:
    model, gen = lowered(_llama)
    ids, mask = _left_padded()
    with torch.no_grad():
        free = model.generate(ids, attention_mask=mask, max_new_tokens=16, do_sample=False, pad_token_id=0)
    eos = int(free[0, 8 + 3])  # the first sequence's 4th new token
    options = dict(max_new_tokens=16, do_sample=False, pad_token_id=0, eos_token_id=eos)
    with torch.no_grad():
        expected = model.generate(ids, attention_mask=mask, **options)
    got = gen.generate(ids, attention_mask=mask, **options)
    assert torch.equal(got, expected)
    assert (got[0, 8 + 4 :] == 0).all() or got.shape[1] < free.shape[1]  # padded (or stopped) after eos


def test_the_cache_is_written_in_place() -> None:
    """No allocation per token beyond the step's own: the buffers keep their addresses, and hold
    the generated positions afterwards."""
    _, gen = lowered(_llama)
    ((keys, values, _),) = gen._buffers.free
    addresses = [t.data_ptr() for t in (*keys, *values)]
    before = keys[0].clone()
    gen.generate(torch.randint(3, VOCAB, (1, 6)), max_new_tokens=10, do_sample=False, pad_token_id=0)
    ((keys, values, _),) = gen._buffers.free  # a serial call takes the one set and gives it back
    assert [t.data_ptr() for t in (*keys, *values)] == addresses
    per_position = keys[0].numel() // (MAX_LENGTH * 2)  # one sequence's heads x head dim (max_batch 2)
    assert not torch.equal(keys[0][: 15 * per_position], before[: 15 * per_position])


@pytest.mark.parametrize("make", [_llama, _qwen2, _gpt2], ids=lambda f: f.__name__[1:])
def test_the_step_attends_over_the_positions_in_use(make: Callable[[], Any]) -> None:
    """Each engine call gets the cache positions written so far plus the new ones (8 for the
    prompt, then 9, 10, ...), not the whole max_length buffer, as views of the buffers (no copy),
    and the tokens are eager's."""
    model, gen = lowered(make)
    ((keys, values, _),) = gen._buffers.free
    buffers = {t.data_ptr() for t in (*keys, *values)}
    lengths: list[set[int]] = []

    def record(engine: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
        caches = [t for t in inputs if t.dim() == 4]
        assert {t.data_ptr() for t in caches} == buffers  # the buffers themselves, not copies
        lengths.append({t.shape[0] for t in caches})

    ids, mask = _left_padded()
    with torch.no_grad():
        expected = model.generate(ids, attention_mask=mask, max_new_tokens=16, do_sample=False, pad_token_id=0)
    hook = gen.step.get_submodule("engine_0").register_forward_pre_hook(record)
    try:
        got = gen.generate(ids, attention_mask=mask, max_new_tokens=16, do_sample=False, pad_token_id=0)
    finally:
        hook.remove()
    assert torch.equal(got, expected)
    assert lengths == [{8 + i} for i in range(16)]


def test_prompt_and_new_tokens_run_on_their_own_profiles() -> None:
    """The step's engines have two optimization profiles, prefill and decode: an engine that sees
    the query length runs the prompt on the first, and every engine runs each new token on the
    second (tuned for one token against a growing cache)."""
    _, gen = lowered(_llama)
    engines = [m for m in gen.step.modules() if isinstance(getattr(m, "profile", None), ProfileChoice)]
    several = [e for e in engines if e.profile.several]
    assert several and all(len(e.profile.profiles) == 2 for e in several)
    chosen: dict[int, list[int]] = {id(e): [] for e in several}

    def record(module: Any, inputs: tuple[torch.Tensor, ...]) -> None:
        chosen[id(module)].append(module.profile(tuple(tuple(t.shape) for t in inputs)))

    hooks = [e.register_forward_pre_hook(record) for e in several]
    try:
        gen.generate(torch.randint(3, VOCAB, (1, 6)), max_new_tokens=4, do_sample=False, pad_token_id=0)
    finally:
        for hook in hooks:
            hook.remove()
    assert all(calls[1:] == [1, 1, 1] for calls in chosen.values()), chosen
    assert any(calls[0] == 0 for calls in chosen.values()), chosen


def test_generate_from_four_threads_gives_the_serial_tokens() -> None:
    """Each call generates on cache buffers of its own: 4 threads x 5 calls of different prompts
    (and lengths) give what the same calls give one after another."""
    _, gen = lowered(_llama)
    torch.manual_seed(3)
    prompts = [torch.randint(3, VOCAB, (1 + i % 2, 4 + i)) for i in range(20)]
    options = dict(max_new_tokens=12, do_sample=False, pad_token_id=0)
    serial = [gen.generate(p, **options) for p in prompts]
    start = threading.Barrier(4)

    def calls(first: int) -> list[torch.Tensor]:
        start.wait()
        return [gen.generate(prompts[i], **options) for i in range(first, len(prompts), 4)]

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(calls, range(4)))
    for first, got in enumerate(results):
        for i, tokens in zip(range(first, len(prompts), 4), got):
            assert torch.equal(tokens, serial[i]), f"call {i}"
    assert 1 <= len(gen._buffers.free) <= 4  # sets are reused, at most one per thread


def test_token_ids_outside_the_vocabulary_raise_as_in_eager() -> None:
    """A negative id (which ONNX's Gather would read from the end) or one past the vocabulary:
    IndexError naming input_ids, as the eager model's embedding raises, and no token generated."""
    model, gen = lowered(_llama)
    for bad in (-1, VOCAB):
        ids = torch.tensor([[5, bad, 7]])
        with pytest.raises(IndexError):
            model.generate(ids, max_new_tokens=2, do_sample=False, pad_token_id=0)
        with pytest.raises(IndexError, match=rf"input 'input_ids' holds an index outside \[0, {VOCAB}\)"):
            gen.generate(ids, max_new_tokens=2, do_sample=False, pad_token_id=0)
    assert torch.equal(
        gen.generate(torch.tensor([[5, 6, 7]]), max_new_tokens=2, do_sample=False, pad_token_id=0),
        model.generate(torch.tensor([[5, 6, 7]]), max_new_tokens=2, do_sample=False, pad_token_id=0),
    )


def test_limits_are_refused_naming_them() -> None:
    _, gen = lowered(_llama)
    with pytest.raises(GenerationLimitError, match="batch 3 exceeds max_batch=2"):
        gen.generate(torch.ones(3, 4, dtype=torch.int64), max_new_tokens=2)
    with pytest.raises(GenerationLimitError, match=f"the prompt's 81 tokens exceed max_length={MAX_LENGTH}"):
        gen.generate(torch.ones(1, 81, dtype=torch.int64), max_new_tokens=1)
    with pytest.raises(GenerationLimitError, match=f"70 tokens and 20 new ones exceed max_length={MAX_LENGTH}"):
        gen.generate(torch.ones(1, 70, dtype=torch.int64), max_new_tokens=20)
    with pytest.raises(ValueError, match="num_beams=1"):
        gen.generate(torch.ones(1, 4, dtype=torch.int64), max_new_tokens=2, num_beams=2)
    with pytest.raises(ValueError, match="must be a transformers causal LM"):
        lower_causal_lm(torch.nn.Linear(2, 2), max_batch=1, max_length=8)  # type: ignore[arg-type]


def test_save_load_generates_the_same_tokens_in_a_fresh_process(tmp_path: Path) -> None:
    _, gen = lowered(_llama)
    ids, mask = _left_padded()
    expected = gen.generate(ids, attention_mask=mask, max_new_tokens=32, do_sample=False, pad_token_id=0)
    trt_lower.save(gen, tmp_path / "llama.trtl")
    torch.save((ids, mask, expected), tmp_path / "call.pt")
    script = textwrap.dedent(f"""
        import torch, trt_lower
        from trt_lower.llm import LoweredCausalLM
        gen = trt_lower.load({str(tmp_path / "llama.trtl")!r})
        assert isinstance(gen, LoweredCausalLM), type(gen)
        ids, mask, expected = torch.load({str(tmp_path / "call.pt")!r})
        got = gen.generate(ids, attention_mask=mask, max_new_tokens=32, do_sample=False, pad_token_id=0)
        assert torch.equal(got, expected), (got, expected)
        print("same tokens")
    """)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "same tokens" in done.stdout


@pytest.mark.parametrize("make", [_llama, _gpt2], ids=lambda f: f.__name__[1:])
def test_a_prompt_longer_than_prefill_chunk_runs_in_chunks_as_eager(make: Callable[[], Any], tmp_path: Path) -> None:
    """prefill_chunk=3: the 8-token prompts (one left-padded) run as steps of 3, 3 and 2 tokens,
    each new token as one, and the tokens and logits are eager's; the saved step loads and still
    chunks (the chunk is its input signature's), and a file whose position ids take more tokens
    than its token ids is refused."""
    torch.manual_seed(0)
    model = make().eval()
    gen = lower_causal_lm(model, max_batch=2, max_length=24, prefill_chunk=3)
    assert gen.prefill_chunk == 3 and "prompts longer than 3 tokens run in chunks of 3" in gen.report.notes
    ids, mask = _left_padded()
    options = dict(max_new_tokens=8, do_sample=False, pad_token_id=0, output_logits=True, return_dict_in_generate=True)
    with torch.no_grad():
        expected = model.generate(ids, attention_mask=mask, **options)
    trt_lower.save(gen, tmp_path / "chunked.trtl")
    for run in (gen, trt_lower.load(tmp_path / "chunked.trtl")):
        queries: list[int] = []
        hook = run.step.register_forward_pre_hook(lambda _, inputs: queries.append(inputs[0].shape[1]))
        try:
            got = run.generate(ids, attention_mask=mask, **options)
        finally:
            hook.remove()
        assert queries == [3, 3, 2] + [1] * 7
        assert torch.equal(got.sequences, expected.sequences)
        for g, e in zip(got.logits, expected.logits, strict=True):
            torch.testing.assert_close(g, e)

    def positions_whole(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
        assert [i["max"] for i in manifest["inputs"][:3]] == [[2, 3], [2, 24], [2, 3]]
        manifest["inputs"][2]["max"][1] = 24

    # Position ids and token ids of one step must agree on the chunk, as the step was lowered.
    forged = tamper(tmp_path / "chunked.trtl", tmp_path / "forged.trtl", positions_whole)
    with pytest.raises(
        trt_lower.ArtifactError, match=r"forged.trtl: field 'extra': .*signatures say \[\(2, 3\), \(2, 24\), \(2, 24\)"
    ):
        trt_lower.load(forged)


def test_prefill_chunk_outside_1_to_max_length_is_refused() -> None:
    for bad in (0, 25, 2.5):
        with pytest.raises(ValueError, match=rf"prefill_chunk must be an int in 1..max_length \(24\), got {bad}"):
            lower_causal_lm(_llama().eval(), max_batch=1, max_length=24, prefill_chunk=bad)  # type: ignore[arg-type]
