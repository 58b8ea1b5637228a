"""One lowered module called from 8 threads at once, with shapes mixed within a TensorSpec range:
every call returns what a serial call returns (ONNX Runtime in process; the TensorRT double in a
fresh process, where a crash of a shared context cannot take pytest down with it)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import torch
from reliability_workers import THREADS, hammer, lower_mixed, mixed, worker, worker_env


def test_onnxruntime_module_gives_serial_results_from_8_threads() -> None:
    model, inputs = mixed()
    lowered = lower_mixed(model, "onnxruntime")
    assert len(lowered.report.engines) == 2 and {f.op for f in lowered.report.fallbacks} == {"aten.relu.default"}
    with torch.inference_mode():
        for x in inputs:
            torch.testing.assert_close(lowered(x), model(x), rtol=1e-4, atol=1e-5)
    calls, problems = hammer(lowered, inputs)
    assert calls == THREADS * 6 * len(inputs) and not problems, "\n".join(problems[:10])


def test_tensorrt_module_gives_serial_results_from_8_threads(tmp_path: Path) -> None:
    done = subprocess.run(worker("threads"), env=worker_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the worker died (exit {done.returncode}):\n{done.stderr[-3000:]}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["engines"] == 2 and result["calls"] == THREADS * 6 * 8
    assert result["mismatches"] == 0, "\n".join(result["problems"])
