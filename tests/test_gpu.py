"""Real CUDA + TensorRT (`pytest -m gpu` on a GPU machine): the same TensorRT path the double
exercises on CPU, now on the hardware, and the paths only a GPU reaches (fp16 and bf16 builds,
output allocators, CUDA graphs, profiles, several GPUs, out of memory, the real ONNX parser).
Skipped where CUDA or a real TensorRT is missing (the double of TRT_LOWER_TEST_TENSORRT=double
included). The command that installs TensorRT and runs them: README, "what is verified where"."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest
import torch
from harness import Fn
from onnx import TensorProto, helper
from trt_double import PATH as DOUBLE_PATH
from trt_models import MODELS

import trt_lower
from splitter.index_check import check_indices
from trt_lower.engine import tensorrt as trt_engine
from trt_lower.engine.build_options import BuildOptions, InputProfile


def _missing() -> str | None:
    spec = importlib.util.find_spec("tensorrt")
    if spec is not None and spec.origin is not None and Path(spec.origin).is_relative_to(DOUBLE_PATH):
        return "`tensorrt` is the test double"
    return trt_engine.unavailable_reason()


_MISSING = _missing()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_MISSING is not None, reason=f"needs CUDA + TensorRT: {_MISSING}")]


@pytest.fixture(autouse=True)
def _fp32_reference() -> Iterator[None]:
    """Eager references in IEEE float32: torch's default lets cuDNN convolutions (and, where set,
    matmuls) round to TF32, while fp32 engines are built without TF32."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def _on_gpu(name: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    model, inputs = MODELS[name]()
    return model.cuda(), tuple(t.cuda() for t in inputs)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_on_tensorrt_matches_eager_and_reloads_from_cache(name: str, tmp_path: Path) -> None:
    model, inputs = _on_gpu(name)
    lowered = trt_lower.lower_to_trt(model, inputs, backend="tensorrt", cache_dir=tmp_path)
    assert lowered.report.backend == "tensorrt"
    assert [e.cache_hit for e in lowered.report.engines] == [False] * len(lowered.report.engines)
    # fp32 engines are built without TF32: float32 arithmetic, float32 tolerances.
    result = trt_lower.check_accuracy(model, lowered, inputs, rtol=1e-3, atol=1e-3)
    assert result.passed, str(result)
    warm = trt_lower.lower_to_trt(model, inputs, backend="tensorrt", cache_dir=tmp_path)
    assert all(e.cache_hit for e in warm.report.engines), str(warm.report)
    with torch.no_grad():
        torch.testing.assert_close(warm(*inputs), lowered(*inputs))


def test_runs_on_the_callers_stream(tmp_path: Path) -> None:
    model, inputs = _on_gpu("resnet18")
    lowered = trt_lower.lower_to_trt(model, inputs, backend="tensorrt", cache_dir=tmp_path)
    expected = lowered(*inputs)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(stream):
        result = lowered(*inputs)
    stream.synchronize()
    torch.testing.assert_close(result, expected)


def test_cuda_graphs_replay_matches_eager(tmp_path: Path) -> None:
    model, inputs = _on_gpu("resnet18")
    lowered = trt_lower.lower_to_trt(model, inputs, backend="tensorrt", cache_dir=tmp_path, cuda_graphs=True)
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn_like(inputs[0])
            torch.testing.assert_close(lowered(x), model(x), rtol=1e-2, atol=1e-2)


def test_cpu_input_to_a_gpu_engine_is_a_clear_error(tmp_path: Path) -> None:
    model, inputs = _on_gpu("resnet18")
    lowered = trt_lower.lower_to_trt(model, inputs, backend="tensorrt", cache_dir=tmp_path)
    with pytest.raises(trt_lower.EngineInputError, match="is on cpu, the engine runs on cuda"):
        lowered(inputs[0].cpu())


class _Embed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(1000, 32)
        self.lin = torch.nn.Linear(32, 8)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lin(torch.tanh(self.emb(ids)))


def test_cuda_graphs_with_index_inputs_replay_current_inputs(tmp_path: Path) -> None:
    # Garbage indices in the warm-up before capture would be an illegal memory access.
    model = _Embed().eval().cuda()
    ids = torch.randint(0, 1000, (2, 16), device="cuda")
    lowered = trt_lower.lower_to_trt(
        model, (ids,), backend="tensorrt", cache_dir=tmp_path, cuda_graphs=True, min_block_size=1
    )
    with torch.no_grad():
        for _ in range(3):
            other = torch.randint(0, 1000, (2, 16), device="cuda")
            torch.testing.assert_close(lowered(other), model(other), rtol=1e-3, atol=1e-3)


# An index out of range on a GPU, in a process of its own: the device assert it fails leaves the
# CUDA context unusable, as eager PyTorch's own does.
OUT_OF_RANGE = """
import sys, torch, trt_lower
table = torch.nn.Embedding(10, 4).cuda().eval()
lowered = trt_lower.lower_to_trt(
    table, (torch.tensor([[1, 9, 0]], device="cuda"),), backend="tensorrt", cache_dir=sys.argv[1], min_block_size=1
)
with torch.no_grad():
    lowered(torch.tensor([[1, 10, 0]], device="cuda"))
    torch.cuda.synchronize()
"""


def test_index_checks_read_nothing_back_per_call(tmp_path: Path) -> None:
    """The index test stays on the GPU (splitter/index_check.py): a call makes no device-to-host
    read (torch's sync debug mode raises on one), and an index out of range still fails, as
    eager's does on a GPU."""
    model = _Embed().eval().cuda()
    ids = torch.randint(0, 1000, (2, 16), device="cuda")
    lowered = trt_lower.lower_to_trt(model, (ids,), backend="tensorrt", cache_dir=tmp_path, min_block_size=1)
    assert check_indices in {n.target for n in lowered.graph.nodes}
    with torch.no_grad():
        lowered(ids)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            out = lowered(ids)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        torch.testing.assert_close(out, model(ids), rtol=1e-3, atol=1e-3)
    done = subprocess.run(
        [sys.executable, "-c", OUT_OF_RANGE, str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0 and "device-side assert" in done.stderr, done.stderr[-2000:]


def test_two_threads_on_one_module(tmp_path: Path) -> None:
    model, inputs = _on_gpu("resnet18")
    lowered = trt_lower.lower_to_trt(model, inputs, backend="tensorrt", cache_dir=tmp_path)
    xs = [torch.randn_like(inputs[0]) for _ in range(2)]
    with torch.no_grad():
        expected = [model(x) for x in xs]
    results: dict[int, torch.Tensor] = {}

    def call(i: int) -> None:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.default_stream())  # xs were made there
        with torch.no_grad(), torch.cuda.stream(stream):
            for _ in range(20):
                results[i] = lowered(xs[i])
            torch.cuda.current_stream().synchronize()

    threads = [threading.Thread(target=call, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for i in range(2):
        torch.testing.assert_close(results[i], expected[i], rtol=1e-3, atol=1e-3)


def test_two_streams_one_thread(tmp_path: Path) -> None:
    model, inputs = _on_gpu("resnet18")
    lowered = trt_lower.lower_to_trt(model, inputs, backend="tensorrt", cache_dir=tmp_path)
    streams = [torch.cuda.Stream() for _ in range(2)]
    xs = [torch.randn_like(inputs[0]) for _ in range(2)]
    with torch.no_grad():
        expected = [model(x) for x in xs]
        outs = []
        for s, x in zip(streams, xs):
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                outs.append(lowered(x))
    for s in streams:
        s.synchronize()
    for out, e in zip(outs, expected):
        torch.testing.assert_close(out, e, rtol=1e-3, atol=1e-3)


def test_unaligned_input_view(tmp_path: Path) -> None:
    model, inputs = _on_gpu("resnet18")
    lowered = trt_lower.lower_to_trt(model, inputs, backend="tensorrt", cache_dir=tmp_path)
    storage = torch.randn(inputs[0].numel() + 1, device="cuda")
    view = storage[1:].view(inputs[0].shape)  # 4 bytes past the allocation: not 256-byte aligned
    with torch.no_grad():
        torch.testing.assert_close(lowered(view), model(view), rtol=1e-3, atol=1e-3)


# -- paths only a GPU reaches ----------------------------------------------------------------------
def test_fp16_build_matches_fp32_eager(tmp_path: Path) -> None:
    """Strongly typed on 10.x/11.x; on 8.6 the FP16 flag with the float32 layers pinned."""
    model, inputs = _on_gpu("bert")
    lowered = trt_lower.lower_to_trt(model, inputs, backend="tensorrt", precision="fp16", cache_dir=tmp_path)
    assert lowered.report.precision == "fp16" and lowered.report.engines, str(lowered.report)
    result = trt_lower.check_accuracy(model, lowered, inputs, rtol=2e-2, atol=2e-2)
    assert result.passed, str(result)


def test_bf16_build_matches_bf16_eager(tmp_path: Path) -> None:
    if trt_engine.installed_target() not in ("10.12", "latest"):
        pytest.skip("bfloat16 engines need trt_version '10.12' or 'latest' (TensorRT 10.12+)")
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("bfloat16 needs compute capability 8.0+")
    model, inputs = _on_gpu("resnet18")
    model, inputs = model.bfloat16(), tuple(t.bfloat16() for t in inputs)
    lowered = trt_lower.lower_to_trt(model, inputs, backend="tensorrt", cache_dir=tmp_path)
    assert lowered.report.coverage >= 0.95, str(lowered.report)
    with torch.no_grad():
        out = lowered(*inputs)
        assert out.dtype == torch.bfloat16
        torch.testing.assert_close(out.float(), model(*inputs).float(), rtol=5e-2, atol=5e-2)


def test_data_dependent_outputs_through_the_output_allocator(tmp_path: Path) -> None:
    model = Fn(lambda x, m: (x[m].exp() * 2, torch.nonzero(x > 0)))
    x = torch.randn(64, device="cuda")
    lowered = trt_lower.lower_to_trt(
        model, (x, x > 0.5), backend="tensorrt", cache_dir=tmp_path, require_full=True, min_block_size=1
    )
    with torch.no_grad():
        for threshold in (0.5, 10.0, -10.0):  # some, none, all of it
            mask = x > threshold
            for got, want in zip(lowered(x, mask), model(x, mask), strict=True):
                torch.testing.assert_close(got, want)


def test_cuda_graphs_over_several_shapes(tmp_path: Path) -> None:
    """One graph per input shape, each on its own execution context, sharing activation memory."""
    model = Fn(lambda x: torch.softmax(torch.relu(x @ x.transpose(-1, -2)) * 2, -1).sum(-1))
    spec = trt_lower.TensorSpec((1, 8, 16), (4, 8, 16), (8, 8, 16))
    lowered = trt_lower.lower_to_trt(
        model, (spec,), backend="tensorrt", cache_dir=tmp_path, cuda_graphs=True, require_full=True, min_block_size=1
    )
    with torch.no_grad():
        for _ in range(2):  # captures, then replays
            for batch in (1, 3, 8):
                x = torch.randn(batch, 8, 16, device="cuda")
                torch.testing.assert_close(lowered(x), model(x), rtol=1e-3, atol=1e-3)
    engine: Any = lowered.engine_0
    (binding,) = engine._local.bindings.values()  # this thread's, on the side stream
    assert len(binding.graphs) == 3 and all(g.replay is not None for g in binding.graphs.values())
    assert binding.graph_memory is not None  # the one block their contexts run in


def test_dynamic_profile_takes_its_range_and_refuses_beyond(tmp_path: Path) -> None:
    model = Fn(lambda x: torch.relu(x * 2) + x.mean(-1, keepdim=True))
    spec = trt_lower.TensorSpec((1, 4), (4, 32), (8, 64))
    lowered = trt_lower.lower_to_trt(
        model, (spec,), backend="tensorrt", cache_dir=tmp_path, require_full=True, min_block_size=1
    )
    with torch.no_grad():
        for shape in ((1, 4), (5, 17), (8, 64)):
            x = torch.randn(shape, device="cuda")
            torch.testing.assert_close(lowered(x), model(x), rtol=1e-5, atol=1e-5)
    with pytest.raises(trt_lower.EngineInputError):
        lowered(torch.randn(9, 4, device="cuda"))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_an_engine_runs_on_the_gpu_it_was_lowered_on(tmp_path: Path) -> None:
    model, inputs = _on_gpu("resnet18")
    with torch.cuda.device(1):
        model, inputs = model.to("cuda:1"), tuple(t.to("cuda:1") for t in inputs)
        lowered = trt_lower.lower_to_trt(model, inputs, backend="tensorrt", cache_dir=tmp_path)
    with torch.no_grad():  # called with GPU 0 current
        torch.testing.assert_close(lowered(*inputs), model(*inputs), rtol=1e-3, atol=1e-3)


def test_out_of_memory_runs_eagerly_and_keeps_the_cached_plan(tmp_path: Path) -> None:
    """No room for an execution context's activations: eager with the reason, the plan kept."""
    model = Fn(lambda x: torch.relu(x * 2 + 1) * 3).cuda()
    x = torch.randn(64, 1024, 1024, device="cuda")  # 256 MiB activations
    trt_lower.lower_to_trt(model, (x,), backend="tensorrt", cache_dir=tmp_path, min_block_size=1)
    plans = sorted(tmp_path.glob("*.engine"))
    free, _ = torch.cuda.mem_get_info()
    hog = torch.empty(max(free - (64 << 20), 0), dtype=torch.uint8, device="cuda")
    try:
        lowered = trt_lower.lower_to_trt(model, (x,), backend="tensorrt", cache_dir=tmp_path, min_block_size=1)
        if lowered.report.engines:
            pytest.skip("the engine fit in the memory left")
        assert all("execution context" in f.reason for f in lowered.report.fallbacks), str(lowered.report)
        assert sorted(tmp_path.glob("*.engine")) == plans
    finally:
        del hog
    with torch.no_grad():
        torch.testing.assert_close(lowered(x), model(x))


def test_the_real_parser_names_the_node_it_rejects() -> None:
    from trt_lower.engine.trt_builder import BuildFailure, build_plan

    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["r"], name="relu/Relu"),
            helper.make_node("NoSuchOp", ["r"], ["y"], name="nope/NoSuchOp"),
        ],
        "engine_0",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    with pytest.raises(BuildFailure) as failure:
        build_plan(model.SerializeToString(), [[InputProfile("x", (2, 3), (2, 3), (2, 3))]], BuildOptions(), b"")
    assert failure.value.fx_node == "nope" and "NoSuchOp" in failure.value.reason


def test_causal_lm_generates_on_tensorrt_as_eager(tmp_path: Path) -> None:
    """Generation's step on a real engine: the cache buffers on the GPU, written in place between
    engine runs, greedy tokens as eager `generate()` on the same GPU."""
    transformers = pytest.importorskip("transformers")
    from trt_lower.llm import lower_causal_lm

    torch.manual_seed(0)
    model = (
        transformers.LlamaForCausalLM(
            transformers.LlamaConfig(
                vocab_size=96,
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
            )
        )
        .cuda()
        .eval()
    )
    gen = lower_causal_lm(model, max_batch=2, max_length=48, backend="tensorrt", cache_dir=tmp_path)
    assert gen.report.backend == "tensorrt" and gen.report.coverage >= 0.99 and not gen.report.fallbacks
    ids = torch.randint(3, 96, (2, 8), device="cuda")
    mask = torch.ones_like(ids)
    ids[1, :3], mask[1, :3] = 0, 0
    options: dict[str, Any] = dict(
        max_new_tokens=32, do_sample=False, pad_token_id=0, output_logits=True, return_dict_in_generate=True
    )
    with torch.no_grad():
        expected = model.generate(ids, attention_mask=mask, **options)
    got = gen.generate(ids, attention_mask=mask, **options)
    assert got.sequences.device.type == "cuda" and gen._buffers.free[0][0][0].device.type == "cuda"
    assert torch.equal(got.sequences, expected.sequences)
    for g, e in zip(got.logits, expected.logits):
        torch.testing.assert_close(g, e, rtol=1e-3, atol=1e-3)
