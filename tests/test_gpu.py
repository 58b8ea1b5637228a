"""Real CUDA + TensorRT (`pytest -m gpu` on a GPU machine): the same TensorRT path the double
exercises on CPU, now on the hardware. Skipped where CUDA or TensorRT is missing."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

import trt_lower
from trt_lower.build import tensorrt as trt_engine
from trt_models import MODELS

_MISSING = trt_engine.unavailable_reason()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_MISSING is not None, reason=f"needs CUDA + TensorRT: {_MISSING}")]


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
    lowered = trt_lower.lower_to_trt(model, (ids,), backend="tensorrt", cache_dir=tmp_path, cuda_graphs=True,
                                     min_block_size=1)
    with torch.no_grad():
        for _ in range(3):
            other = torch.randint(0, 1000, (2, 16), device="cuda")
            torch.testing.assert_close(lowered(other), model(other), rtol=1e-3, atol=1e-3)


def test_two_threads_on_one_module(tmp_path: Path) -> None:
    model, inputs = _on_gpu("resnet18")
    lowered = trt_lower.lower_to_trt(model, inputs, backend="tensorrt", cache_dir=tmp_path)
    xs = [torch.randn_like(inputs[0]) for _ in range(2)]
    with torch.no_grad():
        expected = [model(x) for x in xs]
    results: dict[int, torch.Tensor] = {}

    def call(i: int) -> None:
        with torch.no_grad(), torch.cuda.stream(torch.cuda.Stream()):
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
