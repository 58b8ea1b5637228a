"""The CI variant of bench/soak.py: 1,000 calls each of a lowered ResNet-18 (small image) and a
small BERT (ONNX Runtime), resident memory sampled every 100 calls, a loose bound on its growth
after warm-up (the 20,000-call run with its 5 MB bound is `python bench/soak.py`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import trt_lower

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import soak  # noqa: E402  (bench/soak.py, on the path above)


@pytest.mark.parametrize("name", ["resnet18", "bert"])
def test_a_thousand_calls_do_not_grow_resident_memory(name: str) -> None:
    model, inputs = soak.MODELS[name](32)
    lowered = trt_lower.lower_to_trt(model, inputs[0], backend="onnxruntime")
    with torch.inference_mode():
        expected = [model(*x) for x in inputs]
    result = soak.soak(name, lowered, inputs, calls=1000, every=100, warmup=300, bound_mb=20.0)
    assert len(result.rss_mb) == 11
    assert result.passed, f"RSS grew {result.growth_mb} MB after warm-up: {result.rss_mb}"
    with torch.inference_mode():  # still right after the soak
        for x, want in zip(inputs, expected):
            torch.testing.assert_close(lowered(*x), want, rtol=1e-3, atol=1e-3)
