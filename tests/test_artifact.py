"""trt_lower.save / trt_lower.load: round trips against eager, TensorRT plans (through the double),
a process without the model's code, refused files, and the lower/info/run CLI."""

from __future__ import annotations

import collections
import logging
import math
import os
import pickle
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import onnx
import pytest
import torch
import torchvision
import transformers
from artifact_tamper import tamper
from test_pipeline import Sandwich
from trt_double.activate import trt_double as use_trt_double
from trt_double.device import HostDevice
from trt_models import llama_config

import trt_lower
from trt_lower.cli import commands as cli
from trt_lower.deploy import artifact, graph_json
from trt_lower.engine import backend
from trt_lower.values import device

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def _round_trip(
    model: torch.nn.Module, inputs: tuple[Any, ...], path: Path, calls: list[tuple[torch.Tensor, ...]], **kwargs: Any
) -> trt_lower.LoweredModule:
    """Lower, save, load; the loaded module matches eager (and the lowered one) on every call."""
    lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", **kwargs)
    trt_lower.save(lowered, path)
    loaded = trt_lower.load(path, backend="onnxruntime")
    tolerance = {"rtol": 5e-3, "atol": 5e-3} if kwargs.get("precision") == "fp16" else {}
    with torch.no_grad():
        for args in calls:
            out = loaded(*args)
            torch.testing.assert_close(out, model(*args), **tolerance)
            torch.testing.assert_close(out, lowered(*args), rtol=0, atol=0)
    assert [e.name for e in loaded.report.engines] == [e.name for e in lowered.report.engines]
    assert type(loaded.engine_0).__name__ == "OrtEngineModule"
    return loaded


# -- round trips ------------------------------------------------------------------------------
def test_resnet18(tmp_path: Path) -> None:
    model, x = torchvision.models.resnet18(weights=None).eval(), torch.randn(1, 3, 64, 64)
    loaded = _round_trip(model, (x,), tmp_path / "r18.trtl", [(x,)])
    assert loaded.report.coverage == 1.0 and loaded.report.timings.keys() == {"load"}


def _small_bert() -> transformers.BertModel:
    config = transformers.BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=500
    )
    return transformers.BertModel(config).eval()


def test_bert_returns_its_model_output(tmp_path: Path) -> None:
    ids = torch.randint(0, 500, (2, 16))
    loaded = _round_trip(_small_bert(), (ids,), tmp_path / "bert.trtl", [(ids,)])
    out = loaded(ids)
    assert type(out) is transformers.modeling_outputs.BaseModelOutputWithPoolingAndCrossAttentions
    assert list(out.keys()) == ["last_hidden_state", "pooler_output"]


def test_eager_fallback_in_the_middle(tmp_path: Path) -> None:
    x = torch.randn(2, 3, 8, 8)
    loaded = _round_trip(Sandwich().eval(), (x,), tmp_path / "s.trtl", [(x,)])
    assert len(loaded.report.engines) == 2 and loaded.report.fallbacks
    eager = {str(n.target) for n in loaded.graph.nodes if n.op == "call_function"}
    assert "trt_lower_test.mystery.default" in eager
    with zipfile.ZipFile(tmp_path / "s.trtl") as z:
        assert {"engines/engine_0.onnx", "engines/engine_1.onnx", "weights.safetensors"} <= set(z.namelist())


class TwoLinears(torch.nn.Module):
    """Two engines around an eager op (erfinv has no converter), each with a weights member."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(width, width), torch.nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.erfinv(torch.tanh(self.a(x)) * 0.5))


def test_weights_members_start_wherever_the_zip_puts_them(tmp_path: Path) -> None:
    """A weights member's arrays are aligned in the file, after its zip header and padding, so an
    offset within the member need not be a multiple of the element size: the reader checks where
    the array lies, not the offset alone (it refused every second engine whose padding was odd)."""
    offsets = []
    for width in (64, 65, 66, 67):
        x = torch.randn(3, width)
        path = tmp_path / f"w{width}.trtl"
        loaded = _round_trip(TwoLinears(width).eval(), (x,), path, [(x,)], min_block_size=1)
        assert len(loaded.report.engines) == 2
        with zipfile.ZipFile(path) as z:
            offsets += [
                int(e.value)
                for name in ("engines/engine_0.onnx", "engines/engine_1.onnx")
                for t in onnx.load_from_string(z.read(name)).graph.initializer
                for e in t.external_data
                if e.key == "offset"
            ]
    assert any(offset % 4 for offset in offsets), offsets


Pair = collections.namedtuple("Pair", "scaled rows")


class Dynamic(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> dict[str, Any]:
        y = torch.relu(self.lin(x)) * mask + 1.0
        return {"sum": y.sum(-1), "pair": Pair(torch.tanh(y) * 2.0, x.shape[0] * 2)}


def test_dynamic_shapes_dicts_and_namedtuples(tmp_path: Path) -> None:
    specs = (trt_lower.TensorSpec((1, 4), (3, 4), (8, 4)), trt_lower.TensorSpec((1, 4), (3, 4), (8, 4)))
    calls = [(torch.randn(b, 4), torch.rand(b, 4)) for b in (1, 3, 8)]
    loaded = _round_trip(
        Dynamic().eval(), specs, tmp_path / "d.trtl", calls, fallback_ops=["aten.tanh.default"], min_block_size=1
    )
    out = loaded(*calls[1])
    assert type(out["pair"]).__name__ == "Pair" and out["pair"].rows == 6
    with pytest.raises(trt_lower.EngineInputError, match="input 'x' was lowered for the range"):
        loaded(torch.randn(9, 4), torch.rand(9, 4))
    # `* mask` makes both batch dims one shape symbol; the manifest says so.
    (batch, four), (mask_batch, _) = artifact.read(tmp_path / "d.trtl").manifest["input_dims"]
    assert isinstance(batch, str) and batch == mask_batch and four == 4


class EvenBranch(torch.nn.Module):
    """Branches on a size test no range expresses: torch.export captures the even branch."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 2 - 1) if x.shape[1] % 2 == 0 else x


def test_size_conditions_travel_with_the_file(tmp_path: Path) -> None:
    spec = trt_lower.TensorSpec((1, 2), (2, 6), (4, 12))
    calls = [(torch.randn(b, n),) for b, n in ((1, 2), (3, 8), (4, 12))]
    loaded = _round_trip(EvenBranch(), (spec,), tmp_path / "even.trtl", calls, min_block_size=1)
    manifest = artifact.read(tmp_path / "even.trtl").manifest
    assert manifest["conditions"] == ["(x.shape[1] % 2) == 0"] and manifest["format_version"] == 3
    with pytest.raises(trt_lower.EngineInputError, match=r"input shapes x \(2, 5\) break a condition .*% 2\) == 0"):
        loaded(torch.randn(2, 5))


class PairsUp(torch.nn.Module):
    """A size rounded up by math.ceil from a float product, in the graph's Python (a quotient
    of sizes would be integer division: trt_lower/capture/quotients.py)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pairs = math.ceil(x.shape[1] * 0.5)
        padded = torch.nn.functional.pad(x, (0, 2 * pairs - x.shape[1]))
        return padded.reshape(x.shape[0], pairs, 2).sum(-1) * 2


def test_sizes_rounded_by_math_ceil(tmp_path: Path) -> None:
    spec = trt_lower.TensorSpec((1, 3), (2, 6), (4, 11))
    loaded = _round_trip(
        PairsUp(),
        (spec,),
        tmp_path / "pairs.trtl",
        [(torch.randn(b, n),) for b, n in ((1, 3), (4, 11))],
        min_block_size=1,
    )
    assert any(n["target"] == "math.ceil" for n in artifact.read(tmp_path / "pairs.trtl").manifest["graph"]["nodes"])
    assert loaded(torch.randn(2, 7)).shape == (2, 4)


@pytest.mark.parametrize(
    "condition, message",
    [
        ("__import__('os').system('touch {marker}')", "is not allowed in one"),
        ("x.shape.__class__ == 1", "is not allowed"),
        ("x.shape[0] >", "is not an expression"),
    ],
)
def test_a_planted_size_condition_is_refused_and_never_runs(tmp_path: Path, condition: str, message: str) -> None:
    marker = tmp_path / "pwned"
    spec = trt_lower.TensorSpec((1, 2), (2, 6), (4, 12))
    trt_lower.save(trt_lower.lower_to_trt(EvenBranch(), (spec,), min_block_size=1), tmp_path / "even.trtl")
    planted = condition.format(marker=marker)
    path = tamper(
        tmp_path / "even.trtl", tmp_path / "evil.trtl", lambda manifest, members: manifest.update(conditions=[planted])
    )
    with pytest.raises(trt_lower.ArtifactError, match=f"evil.trtl: field 'conditions': .*{message}"):
        trt_lower.load(path)
    assert not marker.exists()


def test_model_output_without_its_class_comes_back_as_a_dict(caplog: pytest.LogCaptureFixture) -> None:
    stored = {
        "type": "ModelOutput",
        "class": "transformers.not_installed.SomeOutput",
        "keys": ["a", "b"],
        "children": ["*", "*"],
    }
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        spec = graph_json.spec_from_json(stored)
    assert "transformers.not_installed.SomeOutput is not importable here" in caplog.text
    assert torch.utils._pytree.tree_unflatten([1, 2], spec) == {"a": 1, "b": 2}


def _small_llama() -> Any:
    config = llama_config()
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def _cache_specs(spec: Any) -> list[dict[str, Any]]:
    """The stored specs of the transformers caches in a stored pytree spec."""
    if not isinstance(spec, dict):
        return []
    found = [spec] if spec.get("type") == "cache" else []
    return found + [c for child in spec["children"] for c in _cache_specs(child)]


def test_causal_lm_with_its_key_value_cache(tmp_path: Path) -> None:
    """A causal LM returns its DynamicCache (use_cache=True): the artifact stores the cache's
    structure as transformers' exporter flattens it, and the loaded module returns a cache the
    model takes back for the next token (an artifact could not hold one before)."""
    model, ids = _small_llama(), torch.randint(0, 500, (1, 8))
    lowered = trt_lower.lower_to_trt(model, (ids,), backend="onnxruntime")
    trt_lower.save(lowered, tmp_path / "llama.trtl")
    (stored,) = _cache_specs(artifact.read(tmp_path / "llama.trtl").manifest["graph"]["pytree"]["out_spec"])
    assert stored["class"] == "transformers.cache_utils.DynamicCache"
    loaded = trt_lower.load(tmp_path / "llama.trtl", backend="onnxruntime")
    with torch.no_grad():
        out, expected = loaded(ids), model(ids)
        assert type(out.past_key_values) is type(expected.past_key_values)
        scale = float(expected.logits.abs().max())
        torch.testing.assert_close(out.logits, expected.logits, rtol=1e-3, atol=1e-3 * scale)
        for got, want in zip(out.past_key_values.layers, expected.past_key_values.layers, strict=True):
            torch.testing.assert_close(got.keys, want.keys, rtol=1e-3, atol=1e-3)
            torch.testing.assert_close(got.values, want.values, rtol=1e-3, atol=1e-3)
        step = torch.randint(0, 500, (1, 1))
        torch.testing.assert_close(
            model(step, past_key_values=out.past_key_values).logits,
            model(step, past_key_values=expected.past_key_values).logits,
            rtol=1e-3,
            atol=1e-3 * scale,
        )


def test_a_cache_saved_on_a_gpu_names_the_device_it_is_loaded_on(tmp_path: Path) -> None:
    """A cache's layers record their device: one saved on cuda:0 and loaded where the engines run
    on the CPU (ONNX Runtime) must say cpu, as its tensors do (it said cuda:0 before)."""
    model, ids = _small_llama(), torch.randint(0, 500, (1, 8))
    trt_lower.save(trt_lower.lower_to_trt(model, (ids,), backend="onnxruntime"), tmp_path / "llama.trtl")

    def on_gpu(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
        (stored,) = _cache_specs(manifest["graph"]["pytree"]["out_spec"])
        for layer in stored["context"]["s"]["layers"]:
            assert layer["s"]["device"] == {"_t": "device", "s": "cpu"}
            layer["s"]["device"]["s"] = "cuda:0"

    loaded = trt_lower.load(tamper(tmp_path / "llama.trtl", tmp_path / "gpu.trtl", on_gpu), backend="onnxruntime")
    with torch.no_grad():
        layers = loaded(ids).past_key_values.layers
    assert layers and all(layer.device == torch.device("cpu") == layer.keys.device for layer in layers)


@pytest.mark.parametrize("path", ["os:system", "subprocess:Popen", "transformers.cache_utils:os"])
def test_a_planted_class_in_a_cache_is_refused_and_never_imported(tmp_path: Path, path: str) -> None:
    model, ids = _small_llama(), torch.randint(0, 500, (1, 8))
    trt_lower.save(trt_lower.lower_to_trt(model, (ids,), backend="onnxruntime"), tmp_path / "llama.trtl")

    def plant(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
        (stored,) = _cache_specs(manifest["graph"]["pytree"]["out_spec"])
        stored["context"]["s"]["layers"][0]["p"] = path

    planted = tamper(tmp_path / "llama.trtl", tmp_path / "evil.trtl", plant)
    with pytest.raises(
        trt_lower.ArtifactError, match=f"evil.trtl: cache context names '{path}', not a class of transformers"
    ):
        trt_lower.load(planted)


def test_cache_without_its_class_comes_back_as_a_list(caplog: pytest.LogCaptureFixture) -> None:
    stored = {
        "type": "cache",
        "class": "transformers.not_installed.SomeCache",
        "context": {"_t": "obj"},
        "children": ["*", "*"],
    }
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        spec = graph_json.spec_from_json(stored)
    assert "transformers.not_installed.SomeCache is not importable here" in caplog.text
    assert torch.utils._pytree.tree_unflatten([1, 2], spec) == [1, 2]


def test_fp16(tmp_path: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 3)).eval()
    x = torch.randn(1, 3, 16, 16)
    loaded = _round_trip(model, (x,), tmp_path / "h.trtl", [(x,)], precision="fp16")
    assert loaded.report.precision == "fp16" and loaded(x).dtype == torch.float32


# -- TensorRT plans, through the double ----------------------------------------------------------
class ForeignGpu(HostDevice):
    def identity(self) -> str:
        return "Some GPU sm_80"


def test_tensorrt_plans_load_without_a_build(
    trt_double: ModuleType, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model, x = Sandwich().eval(), torch.randn(2, 3, 8, 8)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="tensorrt")
    path = tmp_path / "t.trtl"
    trt_lower.save(lowered, path)
    builds = trt_double.state.builds
    assert builds == 2
    with zipfile.ZipFile(path) as z:
        assert "plans/engine_0/10.13.0_trt-double-host.plan" in z.namelist()

    loaded = trt_lower.load(path, backend="tensorrt", cache_dir=tmp_path / "empty")
    assert trt_double.state.builds == builds  # deserialized from the file, nothing built
    assert [e.cache_hit for e in loaded.report.engines] == [True, True]
    assert type(loaded.engine_0).__name__ == "TRTEngineModule"
    torch.testing.assert_close(loaded(x), model(x))

    # Another GPU: one warning, engines rebuilt from the ONNX; saved again, the file has both GPUs' plans.
    with device.using(ForeignGpu()), caplog.at_level(logging.WARNING, logger="trt_lower"):
        foreign = trt_lower.load(path, backend="tensorrt", cache_dir=tmp_path / "cache")
        torch.testing.assert_close(foreign(x), model(x))
        trt_lower.save(foreign, tmp_path / "both.trtl")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "no TensorRT plan for TensorRT 10.13.0 on Some GPU sm_80" in warnings[0]
    assert "10.13.0 on trt_double host" in warnings[0]
    assert trt_double.state.builds == builds + 2
    plans = artifact.read(tmp_path / "both.trtl").manifest["engines"][0]["plans"]
    assert {p["device"] for p in plans} == {"trt_double host", "Some GPU sm_80"}
    trt_lower.load(tmp_path / "both.trtl", backend="tensorrt")
    assert trt_double.state.builds == builds + 2


def test_tensorrt_file_on_another_tensorrt_version_or_none(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, x = Sandwich().eval(), torch.randn(2, 3, 8, 8)
    path = tmp_path / "t.trtl"
    with use_trt_double("10.4.0", tmp_path / "a"):
        trt_lower.save(trt_lower.lower_to_trt(model, (x,), backend="tensorrt"), path)
    with use_trt_double("10.13.0", tmp_path / "b") as double, caplog.at_level(logging.WARNING, logger="trt_lower"):
        loaded = trt_lower.load(path)
        assert double.state.builds == 2 and type(loaded.engine_1).__name__ == "TRTEngineModule"
        torch.testing.assert_close(loaded(x), model(x))
    assert "no TensorRT plan for TensorRT 10.13.0 on trt_double host (it has: TensorRT 10.4.0" in caplog.text
    caplog.clear()
    # No TensorRT here: backend="auto" runs the ONNX on ONNX Runtime, with lower_to_trt's one
    # warning (once per process: as if this were the first).
    monkeypatch.setattr(backend, "_warned_unusable", set())
    monkeypatch.setattr(backend.trt_engine, "unavailable_reason", lambda: "no tensorrt module")
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        loaded = trt_lower.load(path)
    assert [r.getMessage() for r in caplog.records][0].startswith("trt_lower: TensorRT is not usable")
    assert len(caplog.records) == 1 and loaded.report.backend == "onnxruntime"
    torch.testing.assert_close(loaded(x), model(x))


# -- a process without the model's code ---------------------------------------------------------
MODEL_SOURCE = """
import torch

class Secret(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = torch.sigmoid(self.conv(x)) * 2.0 + 1.0
        y = self.lin(y.flatten(0, 2)).relu()
        return {"y": torch.tanh(y) * 3.0 - y, "mean": y.mean()}

def make_model():
    torch.manual_seed(0)
    return Secret().eval()
"""

LOAD_SCRIPT = """
import sys, importlib.util, torch, trt_lower
from safetensors.torch import load_file, save_file
assert importlib.util.find_spec("secret_model") is None, "the model's module is still importable"
loaded = trt_lower.load(sys.argv[1], backend="onnxruntime")  # x is on the CPU
out = loaded(load_file(sys.argv[2])["x"])
save_file(out, sys.argv[3])
"""


def test_fresh_process_without_the_models_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from safetensors.torch import load_file, save_file

    code = tmp_path / "code"
    code.mkdir()
    (code / "secret_model.py").write_text(MODEL_SOURCE)
    monkeypatch.syspath_prepend(str(code))
    import secret_model  # type: ignore[import-not-found]

    model, x = secret_model.make_model(), torch.randn(2, 3, 8, 8)
    path = tmp_path / "secret.trtl"
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", fallback_ops=["aten.addmm.default"])
    assert "aten.addmm.default" in {str(n.target) for n in lowered.graph.nodes}  # eager, reading weights
    trt_lower.save(lowered, path)
    monkeypatch.delitem(sys.modules, "secret_model")
    for leftover in [code / "secret_model.py", *code.glob("__pycache__/*")]:
        leftover.unlink()
    save_file({"x": x}, tmp_path / "x.safetensors")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(code)])}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            LOAD_SCRIPT,
            str(path),
            str(tmp_path / "x.safetensors"),
            str(tmp_path / "out.safetensors"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(load_file(tmp_path / "out.safetensors"), expected)


# -- refused files ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("artifact") / "small.trtl"
    x = torch.randn(2, 3, 8, 8)
    trt_lower.save(trt_lower.lower_to_trt(Sandwich().eval(), (x,), backend="onnxruntime"), path)
    return path


class Payload:
    """Unpickling this creates the marker file: what an attacker's pickle would run."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


@pytest.mark.parametrize("plant", ["torch.save", "weights", "onnx", "extra member"])
def test_a_planted_pickle_is_refused_and_never_runs(saved: Path, tmp_path: Path, plant: str) -> None:
    marker = tmp_path / "pwned"
    evil = pickle.dumps(Payload(marker))
    path = tmp_path / "evil.trtl"
    if plant == "torch.save":
        torch.save(Payload(marker), path)
        expected = "not a trt_lower artifact"
    elif plant == "weights":
        tamper(saved, path, lambda manifest, members: members.update({"weights.safetensors": evil}))
        expected = "member 'weights.safetensors' is not a safetensors file"
    elif plant == "onnx":
        tamper(saved, path, lambda manifest, members: members.update({"engines/engine_0.onnx": evil}))
        expected = "member 'engines/engine_0.onnx' is not an ONNX model"
    else:
        tamper(saved, path, lambda manifest, members: members.update({"data.pkl": evil}), checksums=False)
        expected = "member 'data.pkl' is not listed in the manifest"
    with pytest.raises(trt_lower.ArtifactError, match=expected):
        trt_lower.load(path)
    assert not marker.exists()
    pickle.loads(evil)  # the payload is live: unpickling it would have left the marker
    assert marker.exists()


@pytest.mark.parametrize(
    "target, message",
    [
        ("builtins.eval", "not an operator name"),
        ("os.system.default", "operator os::system.default, which is not registered"),
        ("aten.add.__class__", "not registered"),
    ],
)
def test_graph_targets_are_looked_up_not_imported(saved: Path, tmp_path: Path, target: str, message: str) -> None:
    def change(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
        node = next(n for n in manifest["graph"]["nodes"] if n["op"] == "call_function")
        node["target"] = target

    with pytest.raises(trt_lower.ArtifactError, match=message):
        trt_lower.load(tamper(saved, tmp_path / "bad.trtl", change))


def test_bad_files_are_named(saved: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such file: .*missing.trtl"):
        trt_lower.load(tmp_path / "missing.trtl")
    data = saved.read_bytes()
    (tmp_path / "half.trtl").write_bytes(data[: len(data) // 2])
    with pytest.raises(trt_lower.ArtifactError, match="half.trtl is not a trt_lower artifact, or is truncated"):
        trt_lower.load(tmp_path / "half.trtl")
    with zipfile.ZipFile(saved) as z:
        info = z.getinfo("engines/engine_0.onnx")
    flipped = bytearray(data)
    flipped[info.header_offset + len(info.FileHeader()) + info.file_size // 2] ^= 0xFF
    (tmp_path / "flipped.trtl").write_bytes(bytes(flipped))
    with pytest.raises(trt_lower.ArtifactError, match="engines/engine_0.onnx"):
        trt_lower.load(tmp_path / "flipped.trtl")
    tampered = tamper(
        saved,
        tmp_path / "tampered.trtl",
        lambda manifest, members: members.update({"weights.safetensors": b"x"}),
        checksums=False,
    )
    with pytest.raises(trt_lower.ArtifactError, match="checksum mismatch in member 'weights.safetensors'"):
        trt_lower.load(tampered)
    newer = tamper(saved, tmp_path / "newer.trtl", lambda manifest, members: manifest.update(format_version=4))
    with pytest.raises(trt_lower.ArtifactError, match="format version 4 .* reads up to version 3: upgrade"):
        trt_lower.load(newer)
    malformed = tamper(
        saved, tmp_path / "malformed.trtl", lambda manifest, members: manifest["engines"][0].pop("inputs")
    )
    with pytest.raises(trt_lower.ArtifactError, match=r"malformed.trtl: field 'engines\[0\].inputs' is missing"):
        trt_lower.load(malformed)
    (tmp_path / "text.trtl").write_text("hello")
    with pytest.raises(trt_lower.ArtifactError, match="text.trtl is not a trt_lower artifact"):
        trt_lower.load(tmp_path / "text.trtl")
    with pytest.raises(ValueError, match="backend must be one of"):
        trt_lower.load(saved, backend="tensorflow")
    with pytest.raises(trt_lower.ArtifactError, match="takes the LoweredModule"):
        trt_lower.save(torch.nn.Linear(2, 2), tmp_path / "no.trtl")  # type: ignore[arg-type]


def test_an_interrupted_save_leaves_the_old_file(saved: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "model.trtl"
    path.write_bytes(saved.read_bytes())
    lowered = trt_lower.load(path)

    def crash(fd: int) -> None:  # the new file is written, not yet renamed into place
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(KeyboardInterrupt):
        trt_lower.save(lowered, path)
    assert path.read_bytes() == saved.read_bytes() and os.listdir(tmp_path) == ["model.trtl"]


# -- CLI ---------------------------------------------------------------------------------------------
def test_cli_lower_info_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    package = tmp_path / "my_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "models.py").write_text(textwrap.dedent(MODEL_SOURCE))
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "model.trtl"
    assert (
        cli.main(
            [
                "lower",
                "my_pkg.models:make_model",
                "--input",
                "2x3x8x8:float32",
                "--dynamic",
                "0.0=1..4",
                "--backend",
                "onnxruntime",
                "--fallback-op",
                "aten.addmm.default",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    assert cli.main(["info", str(out)]) == 0
    text = capsys.readouterr().out
    assert "saved" in text and "format 3" in text and "checksums verified" in text
    assert "input x: " in text and "(min [1, 3, 8, 8], opt [2, 3, 8, 8], max [4, 3, 8, 8])" in text
    assert "engine_0: engines/engine_0.onnx; TensorRT plans: none" in text and "eager fallbacks" in text
    assert cli.main(["run", str(out), "--iterations", "2", "--warmup", "1"]) == 0
    text = capsys.readouterr().out
    assert "inputs: x (2, 3, 8, 8) float32" in text and "median latency over 2 runs" in text
    with pytest.raises(SystemExit, match="expected INPUT.DIM=MIN..MAX"):
        cli.main(["lower", "my_pkg.models:make_model", "--input", "2x3x8x8", "--dynamic", "0=1..4", "-o", str(out)])
    with pytest.raises(SystemExit, match="expected SHAPE"):
        cli.main(["lower", "my_pkg.models:make_model", "--input", "2x3x8x8:floaty", "-o", str(out)])


def test_cuda_device_arguments_follow_the_engines() -> None:
    graph = torch.fx.Graph()
    zeros = graph.call_function(torch.ops.aten.zeros.default, ([2],), {"device": torch.device("cuda", 0)})
    graph.output(graph.call_function(torch.ops.aten.ones.default, ([2],), {"device": torch.device("cpu")}))
    stored = graph_json.graph_to_json(graph)
    on_cpu = graph_json.graph_from_json(stored, set(), set(), torch.device("cpu"))
    assert [n.kwargs.get("device") for n in on_cpu.nodes][:2] == [torch.device("cpu")] * 2
    assert zeros.kwargs["device"] == torch.device("cuda", 0)


class _EagerAndEngine(torch.nn.Module):
    """An embedding (an index check) and a Linear in an engine, an op without converter in eager."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.head = torch.nn.Embedding(10, 4), torch.nn.Linear(4, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.special.i0e(self.head(self.embed(ids)).relu()) + 1


def test_loading_and_calling_imports_neither_dynamo_nor_the_exporter(tmp_path: Path) -> None:
    """The deploy path stays light: in a fresh process, trt_lower.load(f)(x) imports no
    torch._dynamo and no torch.export module beyond those `import torch` imports itself (its
    first dispatch of an eager op went through torch._compile, which imports Dynamo)."""
    lowered = trt_lower.lower_to_trt(
        _EagerAndEngine().eval(), (torch.tensor([[1, 9]]),), backend="onnxruntime", min_block_size=1
    )
    assert lowered.report.engines and lowered.report.fallbacks
    trt_lower.save(lowered, tmp_path / "m.trtl")
    script = textwrap.dedent(f"""
        import sys, torch
        heavy = lambda: {{m for m in sys.modules if m.split(".")[:2] in (["torch", "_dynamo"], ["torch", "export"],
                                                                      ["torch", "_export"])}}
        before = heavy()
        import trt_lower
        module = trt_lower.load({str(tmp_path / "m.trtl")!r})
        module(torch.tensor([[3, 4]]))
        try:
            module(torch.tensor([[3, 10]]))
        except IndexError:
            pass
        print(sorted(heavy() - before))
    """)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
