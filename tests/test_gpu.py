"""Real CUDA + TensorRT (`pytest -m gpu` on a GPU machine): the same TensorRT path the double
exercises on CPU, now on the hardware. Skipped where CUDA or TensorRT is missing."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import trt_lower
from trt_lower.engine import tensorrt as trt_engine
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
    # TensorRT may use TF32 for fp32 convolutions and matmuls.
    result = trt_lower.check_accuracy(model, lowered, inputs, rtol=1e-2, atol=1e-2)
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
