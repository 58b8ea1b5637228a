"""Exporting a Triton model repository under a fault: a write that fails midway (here the file
size limit, as a full disk would) leaves no file a server could load torn: each file of the
repository appears whole or not at all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Lowers a 256x256 linear (a 256 KiB model.onnx; for the python platform an artifact saved first,
# which the export copies), then exports it with files limited to argv[2] bytes: the first large
# file's write fails midway with EFBIG.
EXPORT = """
import resource, signal, sys
import torch, trt_lower
from trt_lower.triton import export_model_repository

torch.manual_seed(0)
model = torch.nn.Linear(256, 256).eval()
lowered = trt_lower.lower_to_trt(model, (torch.randn(2, 256),), backend="onnxruntime", min_block_size=1, verify=False)
source = lowered if sys.argv[3] != "python" else sys.argv[1] + ".trtl"  # a saved artifact, copied in
trt_lower.save(lowered, sys.argv[1] + ".trtl")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), resource.RLIM_INFINITY))
try:
    export_model_repository(source, sys.argv[1], "m", platform=sys.argv[3])
except OSError as e:
    print("export failed:", e)
"""


@pytest.mark.parametrize("platform", ["onnxruntime_onnx", "python"])
def test_a_write_failing_midway_leaves_no_torn_file(platform: str, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", EXPORT, str(repo), str(64 << 10), platform],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "export failed:" in done.stdout and "File too large" in done.stdout, done.stdout
    left = sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file())
    assert "m/config.pbtxt" not in left
    large = {"onnxruntime_onnx": "m/1/model.onnx", "python": "m/1/model.trtl"}[platform]
    assert large not in left and not any(name.endswith(".tmp") for name in left), left
