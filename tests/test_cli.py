"""The CLI: the demo prints the report, the accuracy and the latency comparison; bad input is one line."""
from __future__ import annotations

from pathlib import Path

import pytest

from trt_lower.cli import commands as cli
def test_demo_prints_report_accuracy_and_speed(capsys: pytest.CaptureFixture[str]) -> None:
    # The demo's MobileNetV3 has uncalibrated BatchNorm: outputs around 1e-9, so an absolute
    # tolerance of 1e-3 would pass zeros; compare relative to that scale instead.
    code = cli.main(["demo", "--model", "mobilenet_v3_small", "--backend", "onnxruntime", "--iters", "2",
                     "--warmup", "1", "--rtol", "1e-3", "--atol", "1e-12"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "trt_lower report: backend=onnxruntime" in out
    assert "accuracy vs eager" in out and "PASS" in out
    assert "lowered (onnxruntime)" in out and "vs eager" in out and "p99" in out


def test_demo_rejects_an_unknown_model() -> None:
    with pytest.raises(SystemExit):
        cli.main(["demo", "--model", "nope"])


def test_bad_input_is_one_line_naming_the_command_not_a_traceback(tmp_path: Path) -> None:
    missing = f"{tmp_path}/missing.trtl"
    with pytest.raises(SystemExit, match=rf"^trt-lower info: FileNotFoundError: .*no such file: {missing}$"):
        cli.main(["info", missing])
    with pytest.raises(SystemExit, match=r"^trt-lower triton: FileNotFoundError: "):
        cli.main(["triton", missing, "--repo", f"{tmp_path}/repo", "--name", "m"])
