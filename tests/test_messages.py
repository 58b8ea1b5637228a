"""What the accuracy checks and the report say: a dtype or shape mismatch named as such (not an
infinite error), pytest showing the caller's line, and the report as JSON with repair counts per
engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import trt_lower
from trt_lower.report.entries import Repair
from trt_lower.testing import LoweredMismatch, assert_lowered_close

TOL = {"rtol": 1e-3, "atol": 1e-3}


class Scale(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * 2, x + 1


class Wrong(torch.nn.Module):
    """A stand-in for a lowered module: the first output in float16, the second with a row dropped."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return (x * 2).half(), (x + 1)[1:]


def test_check_accuracy_names_dtype_and_shape_mismatches() -> None:
    result = trt_lower.check_accuracy(Scale(), Wrong(), torch.ones(3, 2), details=True, **TOL)
    assert not result.passed
    text = str(result)
    assert "output[0]: dtype mismatch: float16, eager float32" in text
    assert "output[1]: shape mismatch: (2, 2), eager (3, 2)" in text
    assert "inf" not in text
    assert result.divergence is None  # a mismatch is its own explanation: no search


def test_assert_lowered_close_names_the_mismatch_at_the_callers_line() -> None:
    with pytest.raises(LoweredMismatch, match=r"output\[0\] \(dtype mismatch: float16, eager float32\)") as caught:
        assert_lowered_close(Scale(), Wrong(), torch.ones(3, 2), **TOL)
    assert "first divergence: none" not in str(caught.value)
    shown = caught.traceback.filter(caught)
    assert all(entry.frame.code.raw is not assert_lowered_close.__code__ for entry in shown)


def _repair(engine: str, action: str) -> Repair:
    return Repair("mul", "aten.mul.Tensor", "", "m.py:1", engine, "ONNX Runtime", ["mul"], 1.0, 0.0, action)


def test_report_counts_repairs_per_engine() -> None:
    report = trt_lower.LoweringReport(
        coverage=1.0, repairs=[_repair("engine_0", "split"), _repair("engine_0", "fp32"), _repair("engine_1", "eager")]
    )
    assert report.repairs_per_engine == {"engine_0": 2, "engine_1": 1}
    assert "2 engine(s) repaired, actions per engine: engine_0 2, engine_1 1" in str(report)
    assert report.to_dict()["repairs_per_engine"] == {"engine_0": 2, "engine_1": 1}


def test_report_saves_as_json(tmp_path: Path) -> None:
    model, x = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), torch.ones(2, 4)
    lowered = trt_lower.lower_to_trt(model, x, backend="onnxruntime", min_block_size=1, trt_version="10.13")
    written = lowered.report.save_json(tmp_path / "report.json")
    data = json.loads(written.read_text())
    assert data == json.loads(json.dumps(lowered.report.to_dict()))
    assert (data["trt_version"], data["trt_release"], data["backend"]) == ("10.12", "10.13", "onnxruntime")
    assert data["engines"][0]["input_shapes"] == [[2, 4]]
    assert set(data["timings"]) >= {"capture", "build"}
    assert data["repairs"] == [] and data["repairs_per_engine"] == {}
