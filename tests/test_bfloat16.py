"""bfloat16 inside engines where the target has it (TensorRT 10.12+, Ampere and newer), eager
with the reason where not; ONNX Runtime (and the TensorRT double, which runs on it) compute it
in float32."""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Callable

import pytest
import torch
from harness import Fn
from onnx import TensorProto

import trt_lower

BF16 = torch.bfloat16
Make = Callable[[], tuple[torch.nn.Module, torch.Tensor]]
# Eager rounds to bfloat16 after every op, the engines here only at their outputs.
TOLERANCE = {"rtol": 2e-2, "atol": 2e-2}


def _mlp() -> tuple[torch.nn.Module, torch.Tensor]:
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
    return model.eval().to(BF16), torch.randn(4, 16, dtype=BF16)


def _conv() -> tuple[torch.nn.Module, torch.Tensor]:
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()
    )
    return model.eval().to(BF16), torch.randn(2, 3, 8, 8, dtype=BF16)


MODELS = {"linear-gelu": _mlp, "conv": _conv}


@pytest.mark.parametrize("make", list(MODELS.values()), ids=list(MODELS))
def test_bf16_runs_in_engines_for_latest_on_onnxruntime(make: Make) -> None:
    model, x = make()
    lowered = trt_lower.lower_to_trt(
        model, (x,), backend="onnxruntime", trt_version="latest", require_full=True, min_block_size=1
    )
    assert lowered.report.coverage == 1.0 and len(lowered.report.engines) == 1
    onnx_inputs = lowered.segments["engine_0"].onnx.model.graph.input
    assert onnx_inputs[0].type.tensor_type.elem_type == TensorProto.BFLOAT16  # bf16 in the engine's own ONNX
    assert any("computes bfloat16 as float32 on ONNX Runtime" in n for n in lowered.report.notes)
    y = lowered(x)
    assert y.dtype == BF16
    torch.testing.assert_close(y, model(x), **TOLERANCE)


@pytest.mark.parametrize(
    ("version", "reason"),
    [("10.4", "V100 (Volta) GPUs, which have no bfloat16"), ("8.6", "TensorRT 8.6 has no bfloat16")],
)
def test_bf16_stays_eager_where_the_target_has_none(version: str, reason: str) -> None:
    model, x = _mlp()
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", trt_version=version, min_block_size=1)
    assert lowered.report.engines == []
    assert lowered.report.fallbacks and all(reason in f.reason for f in lowered.report.fallbacks)
    torch.testing.assert_close(lowered(x), model(x))


@pytest.mark.parametrize("make", list(MODELS.values()), ids=list(MODELS))
def test_bf16_engines_on_the_tensorrt_double(trt_double: ModuleType, make: Make) -> None:
    model, x = make()
    lowered = trt_lower.lower_to_trt(
        model, (x,), backend="tensorrt", trt_version="10.12", require_full=True, min_block_size=1
    )
    engine = lowered.engine_0
    assert {str(engine._engine.get_tensor_dtype(s.name)) for s in engine.inputs + engine.outputs} == {
        str(trt_double.DataType.BF16)
    }
    assert trt_double.state.last_build.network_flags == 1 << 1  # strongly typed: bf16 from the ONNX
    before = trt_double.state.executions  # build-time verification ran it once
    y = lowered(x)
    assert y.dtype == BF16 and trt_double.state.executions == before + 1
    torch.testing.assert_close(y, model(x), **TOLERANCE)


def test_a_gpu_without_bf16_cannot_build_a_bf16_engine(
    trt_double: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    trt_double.state.compute_capability = "7.0"  # V100
    model, x = _mlp()
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        lowered = trt_lower.lower_to_trt(model, (x,), backend="tensorrt", trt_version="10.12", min_block_size=1)
    assert lowered.report.engines == []
    assert "bfloat16 needs compute capability 8.0" in caplog.text
    torch.testing.assert_close(lowered(x), model(x))


def test_bf16_constants_and_common_ops_convert() -> None:
    f = torch.nn.functional

    def fn(x: torch.Tensor) -> torch.Tensor:
        y = f.layer_norm(x, (16,)).softmax(-1) + torch.arange(16, dtype=BF16) + torch.full_like(x, 0.5)
        return f.scaled_dot_product_attention(y, x, x).masked_fill(x > 1, -1e4).clamp(-10, 10)

    x = torch.randn(2, 8, 16, dtype=BF16)
    lowered = trt_lower.lower_to_trt(
        Fn(fn), (x,), backend="onnxruntime", trt_version="latest", require_full=True, min_block_size=1
    )
    assert lowered.report.coverage == 1.0
    torch.testing.assert_close(lowered(x), fn(x), **TOLERANCE)
