"""Models past protobuf's 2 GB: every path that writes or reads an engine's ONNX keeps its weights
beside the graph, shown on small models with the limit lowered ($TRT_LOWER_PROTOBUF_LIMIT), and
ONNX Runtime reads a big segment's weights where they are. Each test fails if the weights go back
into one protobuf message (the segment refuses to make one past the limit)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import trt_lower
from converters.core.segment import ProtobufLimitError
from converters.passes.transposed_weights import gemm_over_transposed_weights
from trt_lower.deploy import artifact
from trt_lower.engine import ort_session
from trt_lower.triton import export_model_repository

LIMIT = 4096  # stands for 2 GB: these models' weights are ~50 KB


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(64, 128)
        self.down = torch.nn.Linear(128, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x))).softmax(-1)


@pytest.fixture
def big(monkeypatch: pytest.MonkeyPatch) -> tuple[torch.nn.Module, torch.Tensor, torch.nn.Module]:
    """A model whose one engine is past the (lowered) protobuf limit, lowered on ONNX Runtime."""
    monkeypatch.setenv("TRT_LOWER_PROTOBUF_LIMIT", str(LIMIT))
    torch.manual_seed(0)
    model, x = Mlp().eval(), torch.randn(4, 64)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime")
    assert lowered.report.coverage == 1.0
    with pytest.raises(ProtobufLimitError):
        lowered.segments["engine_0"].onnx.to_bytes()
    return model, x, lowered


def _owned(array: np.ndarray) -> bool:
    """Whether `array` lies in memory this process allocated (not a mapping of a file)."""
    base: object = array
    while isinstance(base, memoryview) or isinstance(base, np.ndarray) and base.base is not None:
        base = base.obj if isinstance(base, memoryview) else base.base
    return isinstance(base, np.ndarray) and base.flags.owndata


def test_an_artifact_keeps_each_engines_weights_beside_its_graph_and_reads_them_on_load(
    big: tuple[torch.nn.Module, torch.Tensor, torch.nn.Module], tmp_path: Path
) -> None:
    model, x, lowered = big
    trt_lower.save(lowered, tmp_path / "big.trtl")
    with zipfile.ZipFile(tmp_path / "big.trtl") as z:
        graph, data = z.getinfo("engines/engine_0.onnx"), z.getinfo("engines/engine_0.onnx.data")
        assert graph.file_size < LIMIT < data.file_size
        # Extracted side by side, the two members are a model onnx.load and ONNX Runtime read.
        z.extract(graph, tmp_path), z.extract(data, tmp_path)
    session = ort.InferenceSession(str(tmp_path / "engines" / "engine_0.onnx"))
    (expected,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    torch.testing.assert_close(torch.from_numpy(expected), model(x))

    loaded = trt_lower.load(tmp_path / "big.trtl", backend="onnxruntime")
    torch.testing.assert_close(loaded(x), model(x))
    weights = loaded.segments["engine_0"].onnx.weights
    assert weights and all(_owned(a) for a in weights.values())
    assert all(a.ctypes.data % 64 == 0 for a in weights.values())


def test_a_file_of_format_2_still_loads(
    big: tuple[torch.nn.Module, torch.Tensor, torch.nn.Module], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, x, lowered = big
    monkeypatch.delenv("TRT_LOWER_PROTOBUF_LIMIT")  # format 2 embedded each engine's weights
    trt_lower.save(lowered, tmp_path / "new.trtl")
    with zipfile.ZipFile(tmp_path / "new.trtl") as z:
        members = {n: z.read(n) for n in z.namelist()}
    manifest = json.loads(members.pop(artifact.MANIFEST))
    members.pop("engines/engine_0.onnx.data")
    members["engines/engine_0.onnx"] = lowered.segments["engine_0"].onnx.to_bytes()
    engine = manifest["engines"][0]
    del engine["onnx_data"]
    manifest["format_version"] = 2
    manifest["sha256"] = {n: hashlib.sha256(d).hexdigest() for n, d in members.items()}
    with zipfile.ZipFile(tmp_path / "old.trtl", "w") as z:
        z.writestr(artifact.MANIFEST, json.dumps(manifest))
        for name, data in members.items():
            z.writestr(name, data)
    torch.testing.assert_close(trt_lower.load(tmp_path / "old.trtl", backend="onnxruntime")(x), model(x))


def test_a_load_in_a_fresh_process_matches(
    big: tuple[torch.nn.Module, torch.Tensor, torch.nn.Module], tmp_path: Path
) -> None:
    model, x, lowered = big
    trt_lower.save(lowered, tmp_path / "big.trtl")
    torch.save({"x": x, "y": model(x)}, tmp_path / "io.pt")
    code = (
        "import sys, torch, trt_lower; io = torch.load(sys.argv[2]); "
        "torch.testing.assert_close(trt_lower.load(sys.argv[1], backend='onnxruntime')(io['x']), io['y'])"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "big.trtl"), str(tmp_path / "io.pt")], check=True)


def test_triton_onnx_export_writes_the_weights_beside_the_model(
    big: tuple[torch.nn.Module, torch.Tensor, torch.nn.Module], tmp_path: Path
) -> None:
    model, x, lowered = big
    exported = export_model_repository(lowered, tmp_path / "repo", "mlp", platform="onnxruntime_onnx")
    files = exported.path / "1"
    assert sorted(p.name for p in files.iterdir()) == ["model.onnx", "model.onnx.data"]
    assert (files / "model.onnx").stat().st_size < LIMIT
    session = ort.InferenceSession(str(files / "model.onnx"))
    (got,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    torch.testing.assert_close(torch.from_numpy(got), model(x))


def test_repro_writes_the_weights_beside_the_model(
    big: tuple[torch.nn.Module, torch.Tensor, torch.nn.Module], tmp_path: Path
) -> None:
    from trt_lower.debug.repro import write_repro

    model, x, lowered = big
    write_repro(model, lowered, (x,), "engine_0", tmp_path / "repro")
    assert (tmp_path / "repro" / "model.onnx.data").is_file()
    assert (tmp_path / "repro" / "model.onnx").stat().st_size < LIMIT
    full = onnx.load(str(tmp_path / "repro" / "model.onnx"))  # reads the weights beside it
    assert sum(len(t.raw_data) for t in full.graph.initializer) > LIMIT


def test_a_big_segment_runs_on_onnx_runtime_over_the_models_own_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    # 3-D inputs: each linear layer is MatMul(x, Transpose(W)), which the session must not fold
    # (a folded transpose is a copy, and its optimizers would read the graph's weights, not these).
    model, x = Mlp().eval(), torch.randn(2, 4, 64)
    copied = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime")
    monkeypatch.setattr(ort_session, "SHARE_WEIGHTS_MIN_BYTES", 0)
    shared = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime")
    ops = {n.op_type for n in shared.segments["engine_0"].onnx.model.graph.node}
    assert "Transpose" in ops  # the segment's ONNX is unchanged: the session reads W without it
    runnable = gemm_over_transposed_weights(shared.segments["engine_0"].onnx)
    assert not any(n.op_type == "Transpose" and n.input[0] in runnable.weights for n in runnable.model.graph.node)
    torch.testing.assert_close(shared(x), model(x))
    with torch.no_grad():
        model.up.weight.mul_(2)  # seen only by the session that reads the model's memory
    torch.testing.assert_close(shared(x), model(x))
    assert not torch.allclose(copied(x), model(x))
