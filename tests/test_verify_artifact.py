"""A saved model carries a probe (example inputs, eager outputs, latency at save); `trt-lower
verify` is the upgrade gate that checks a load against it, and a load that builds engines again
checks them itself."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from types import ModuleType

import pytest
import torch
from test_verify import Block
from trt_double import miscompile

import trt_lower
from trt_lower.cli.commands import main
from trt_lower.deploy import probe as artifact_probe


def _saved(tmp_path: Path, backend: str) -> Path:
    torch.manual_seed(0)
    lowered = trt_lower.lower_to_trt(Block().eval(), (torch.randn(8, 16),), backend=backend, min_block_size=1)
    path = tmp_path / "block.trtl"
    trt_lower.save(lowered, path)
    return path


def test_verify_passes_on_a_good_artifact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _saved(tmp_path, "onnxruntime")
    with zipfile.ZipFile(path) as z:
        entry = json.loads(z.read("manifest.json"))["probe"]
    assert entry["member"] == "probe.safetensors" and entry["cap_bytes"] == artifact_probe.CAP_BYTES
    assert entry["bytes"] == (8 * 16 * 2) * 4 and entry["latency_s"] > 0
    assert main(["verify", str(path), "--backend", "onnxruntime"]) == 0
    out = capsys.readouterr().out
    assert "output 0" in out and "ok" in out and "ms at save" in out and out.rstrip().endswith("OK")


def test_verify_fails_naming_the_output_where_a_rebuilt_engine_disagrees(
    trt_double: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    path = _saved(tmp_path, "tensorrt")
    assert main(["verify", str(path), "--backend", "tensorrt"]) == 0  # its own plan, this "TensorRT"
    capsys.readouterr()
    # An upgrade: no plan in the file for this TensorRT, whose builder miscompiles the engine.
    monkeypatch.setattr(trt_double, "__version__", "10.14.1")
    trt_double.state.miscompiles = [miscompile.Wrong("Tanh")]
    loaded = trt_lower.load(path, backend="tensorrt")
    assert any("disagree(s) with the probe" in n and "output 0" in n for n in loaded.report.notes)
    assert "built again here disagree(s) with the probe" in caplog.text
    assert main(["verify", str(path), "--backend", "tensorrt"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and out.rstrip().endswith("FAIL: output 0 disagree(s) with eager PyTorch")
    assert "ms here" in out and "ms at save" in out


def test_a_probe_over_the_cap_is_left_out_and_said_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(artifact_probe, "CAP_BYTES", 100)
    path = _saved(tmp_path, "onnxruntime")
    with zipfile.ZipFile(path) as z:
        assert "over the 100-byte cap" in json.loads(z.read("manifest.json"))["probe"]["omitted"]
        assert "probe.safetensors" not in z.namelist()
    assert main(["verify", str(path), "--backend", "onnxruntime"]) == 2
    assert "holds no probe" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        # The reader's member check refuses it first: the probe's member is named by no field.
        (
            {"member": "weights.safetensors", "inputs": 1, "outputs": 1},
            "'probe.safetensors' is listed in 'sha256' but no",
        ),
        ({"member": "probe.safetensors", "inputs": 2, "outputs": 1}, "not the 2 inputs and 1 outputs"),
        ({"member": "probe.safetensors", "inputs": 1, "outputs": 1, "latency_s": "fast"}, "'probe.latency_s'"),
    ],
)
def test_a_malformed_probe_is_refused_naming_the_field(tmp_path: Path, entry: dict[str, object], message: str) -> None:
    from artifact_tamper import tamper

    path = tamper(
        _saved(tmp_path, "onnxruntime"), tmp_path / "bad.trtl", lambda manifest, members: manifest.update(probe=entry)
    )
    with pytest.raises(trt_lower.ArtifactError, match=message):
        trt_lower.load(path, backend="onnxruntime")
