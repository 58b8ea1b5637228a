"""Large weights travel beside an engine's ONNX (converters/core/segment.py), and `onnx_bytes` is the
self-contained model: both must compute what the model computes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch

import trt_lower
from trt_lower.engine.ort_session import create_session


class ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 16, 3, padding=1)  # 4.6 KB of weights: kept apart
        self.bn = torch.nn.BatchNorm2d(16)  # 64 B per statistic: embedded
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.bn(self.conv(x))).mean((2, 3)))


def _initializers(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    return {t.name: t for t in model.graph.initializer}


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_weights_kept_apart_and_onnx_bytes_self_contained(precision: str) -> None:
    torch.manual_seed(0)
    model, x = ConvNet().eval(), torch.randn(2, 8, 6, 6)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", precision=precision)
    engine = lowered.engine_0
    declared = _initializers(engine.segment.model)
    apart = {n for n, t in declared.items() if t.data_location == onnx.TensorProto.EXTERNAL}
    assert apart and apart == set(engine.segment.weights)
    assert any(t.data_location != onnx.TensorProto.EXTERNAL for t in declared.values())

    full = onnx.load_from_string(engine.onnx_bytes)
    onnx.checker.check_model(full, full_check=True)
    embedded = _initializers(full)
    assert all(t.data_location != onnx.TensorProto.EXTERNAL for t in embedded.values())
    for name in apart:
        np.testing.assert_array_equal(onnx.numpy_helper.to_array(embedded[name]), engine.segment.weights[name])

    # The self-contained bytes, run on their own, give what the lowered module gives.
    with torch.no_grad():
        ours = lowered(x)
        (alone,) = create_session(engine.onnx_bytes).run(None, {engine.inputs[0].name: x.numpy()})
        torch.testing.assert_close(torch.from_numpy(alone), ours, rtol=0, atol=0)
        tol = {"rtol": 1e-3, "atol": 1e-3} if precision == "fp32" else {"rtol": 2e-2, "atol": 2e-2}
        torch.testing.assert_close(ours, model(x), **tol)


def test_float64_weights_kept_apart_as_float32() -> None:
    torch.manual_seed(0)
    model, x = torch.nn.Linear(64, 32).double().eval(), torch.randn(4, 64, dtype=torch.float64)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", min_block_size=1)
    weights = lowered.engine_0.segment.weights
    assert weights and all(a.dtype == np.float32 for a in weights.values())
    with torch.no_grad():
        torch.testing.assert_close(lowered(x), model(x), rtol=1e-5, atol=1e-5)
