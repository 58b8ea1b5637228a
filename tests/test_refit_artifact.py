"""Weight-stripped artifacts: save(..., weights="separate") and load(path, weights=...): one code
artifact, several weight files, each loading into a module that matches its own model; a weight
file is untrusted input (names, shapes, dtypes and the architecture it was saved for checked)."""

from __future__ import annotations

import copy
from pathlib import Path
from types import ModuleType

import pytest
import safetensors.torch
import torch
from test_refit import EAGER_LINEAR, ConvBn, ConvBnNet, finetuned

import trt_lower
import trt_lower.deploy.artifact
from trt_lower.deploy import separate_weights
from trt_lower.deploy.artifact import ArtifactError
from trt_lower.deploy.separate_weights import WeightFileError


class Wide(ConvBnNet):
    """ConvBnNet with weights big enough for the sizes to tell (100 KB of linears)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 2048)
        self.head = torch.nn.Linear(2048, 4)


def _out(module: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        out: torch.Tensor = module(x)
    return out


@pytest.fixture
def saved(tmp_path: Path) -> tuple[torch.nn.Module, torch.nn.Module, torch.Tensor, Path]:
    """Model a, saved with separate weights as a.trtl + a.safetensors; its fine-tuned copy b,
    saved the same way (from the module a's lowering took b's weights) as b.trtl + b.safetensors."""
    a, x = Wide().eval(), torch.randn(2, 3, 8, 8)
    lowered = trt_lower.lower_to_trt(a, (x,), backend="onnxruntime", fallback_ops=EAGER_LINEAR[1:])
    trt_lower.save(lowered, tmp_path / "full.trtl")
    trt_lower.save(lowered, tmp_path / "a.trtl", weights="separate")
    b = finetuned(a)
    lowered.update_weights(b)
    trt_lower.save(lowered, tmp_path / "b.trtl", weights="separate")
    return a, b, x, tmp_path


def test_one_code_artifact_two_weight_files(saved: tuple[torch.nn.Module, torch.nn.Module, torch.Tensor, Path]) -> None:
    a, b, x, tmp = saved
    for model, weights in ((a, tmp / "a.safetensors"), (b, tmp / "b.safetensors")):
        module = trt_lower.load(tmp / "a.trtl", backend="onnxruntime", weights=weights)
        torch.testing.assert_close(_out(module, x), _out(model, x), rtol=1e-4, atol=1e-4)
    # The code artifacts of the two are interchangeable: b's serves a's weights too.
    module = trt_lower.load(tmp / "b.trtl", backend="onnxruntime", weights=tmp / "a.safetensors")
    torch.testing.assert_close(_out(module, x), _out(a, x), rtol=1e-4, atol=1e-4)
    # The stripped artifact is a small fraction of the full one.
    stripped, full = (tmp / "a.trtl").stat().st_size, (tmp / "full.trtl").stat().st_size
    assert stripped < full / 5, (stripped, full)


def test_a_state_dict_of_the_files_keys_serves_too(
    saved: tuple[torch.nn.Module, torch.nn.Module, torch.Tensor, Path],
) -> None:
    _, b, x, tmp = saved
    tensors = safetensors.torch.load_file(tmp / "b.safetensors")
    assert any(k.startswith("eager/") for k in tensors) and any(k.startswith("engine_") for k in tensors)
    module = trt_lower.load(tmp / "a.trtl", backend="onnxruntime", weights=tensors)
    torch.testing.assert_close(_out(module, x), _out(b, x), rtol=1e-4, atol=1e-4)


def test_weight_files_are_checked(saved: tuple[torch.nn.Module, torch.nn.Module, torch.Tensor, Path]) -> None:
    _, _, _, tmp = saved
    code = tmp / "a.trtl"
    with pytest.raises(ArtifactError, match="saved with weights='separate': load it with weights="):
        trt_lower.load(code, backend="onnxruntime")
    with pytest.raises(ArtifactError, match="holds its weights"):
        trt_lower.load(tmp / "full.trtl", backend="onnxruntime", weights=tmp / "a.safetensors")
    tensors = safetensors.torch.load_file(tmp / "a.safetensors")
    key = next(k for k in tensors if k.startswith("engine_") and tensors[k].dim() == 4)
    with pytest.raises(ArtifactError, match=rf"'{key}' is float32 \[1, 1\]; .* takes float32 \["):
        trt_lower.load(code, backend="onnxruntime", weights={**tensors, key: torch.zeros(1, 1)})
    with pytest.raises(ArtifactError, match=rf"'{key}' is float16"):
        trt_lower.load(code, backend="onnxruntime", weights={**tensors, key: tensors[key].half()})
    with pytest.raises(ArtifactError, match=rf"missing '{key}'"):
        trt_lower.load(code, backend="onnxruntime", weights={k: v for k, v in tensors.items() if k != key})
    with pytest.raises(ArtifactError, match="unexpected 'engine_9/w'"):
        trt_lower.load(code, backend="onnxruntime", weights={**tensors, "engine_9/w": torch.zeros(1)})
    # A file that is not safetensors (a pickle, say) is refused without being read as one.
    pickled = tmp / "evil.safetensors"
    torch.save({"x": torch.zeros(1)}, pickled)
    with pytest.raises(ArtifactError, match="is not a safetensors file"):
        trt_lower.load(code, backend="onnxruntime", weights=pickled)
    # Plain safetensors without our record, or saved for another architecture.
    foreign = tmp / "foreign.safetensors"
    safetensors.torch.save_file(tensors, foreign)
    with pytest.raises(ArtifactError, match="is not a trt_lower weight file"):
        trt_lower.load(code, backend="onnxruntime", weights=foreign)
    other = trt_lower.lower_to_trt(ConvBnNet().eval(), (torch.randn(2, 3, 8, 8),), backend="onnxruntime")
    trt_lower.save(other, tmp / "other.trtl", weights="separate")
    with pytest.raises(ArtifactError, match="holds weights for another graph"):
        trt_lower.load(code, backend="onnxruntime", weights=tmp / "other.safetensors")
    with pytest.raises(ValueError, match="weights must be 'inside' or 'separate'"):
        trt_lower.save(other, tmp / "x.trtl", weights="apart")


@pytest.mark.parametrize("refittable", [True, False], ids=["stripped-plan", "no-plan"])
def test_a_separate_weights_artifact_on_the_tensorrt_double(
    trt_double: ModuleType, tmp_path: Path, refittable: bool
) -> None:
    """A refittable engine's plan is stored without its weights and refitted from the weight file
    on load (no build); another engine's is left out (built on load, or found in the cache)."""
    model, x = ConvBnNet().eval(), torch.randn(2, 3, 8, 8)
    new = finetuned(model)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="tensorrt", refittable=refittable)
    trt_lower.save(lowered, tmp_path / "m.trtl", weights="separate")
    lowered.update_weights(new) if refittable else None
    again = lowered if refittable else trt_lower.lower_to_trt(new, (x,), backend="tensorrt")
    trt_lower.save(again, tmp_path / "n.trtl", weights="separate")
    manifest = trt_lower.deploy.artifact.read(tmp_path / "m.trtl").manifest
    plans = [p for e in manifest["engines"] for p in e["plans"]]
    assert len(plans) == (len(manifest["engines"]) if refittable else 0)
    assert all(p["stripped"] for p in plans)
    if refittable:  # the stripped plan is the graph alone: far smaller than the full one
        full = lowered.get_submodule(manifest["engines"][0]["name"]).plan
        stripped = trt_lower.deploy.artifact.read(tmp_path / "m.trtl").read(plans[0]["member"])
        assert len(stripped) < len(full) / 2
    trt_double.state.__init__()  # counts from here
    for weights, expected in ((tmp_path / "m.safetensors", model), (tmp_path / "n.safetensors", new)):
        module = trt_lower.load(tmp_path / "m.trtl", backend="tensorrt", weights=weights)
        torch.testing.assert_close(_out(module, x), _out(expected, x), rtol=1e-4, atol=1e-4)
    # Stripped plans are refitted, never built; without plans, the engines came from the cache
    # (lowering built them for these very weights) or a build.
    assert trt_double.state.refits == (2 * len(manifest["engines"]) if refittable else 0)
    assert trt_double.state.builds == 0 or not refittable


def test_the_models_own_state_dict_serves(saved: tuple[torch.nn.Module, torch.nn.Module, torch.Tensor, Path]) -> None:
    """By the model's names (engine and eager weights, batch-norm statistics): each model's
    state_dict() loads into the code artifact and matches that model."""
    a, b, x, tmp = saved
    for model in (a, b):
        module = trt_lower.load(tmp / "a.trtl", backend="onnxruntime", weights=model.state_dict())
        torch.testing.assert_close(_out(module, x), _out(model, x))
    # A loaded module holds no captured graph to find the names by: saved again, its file says so.
    trt_lower.save(module, tmp / "again.trtl", weights="separate")
    with pytest.raises(ArtifactError, match="records no names of the model's own"):
        trt_lower.load(tmp / "again.trtl", backend="onnxruntime", weights=b.state_dict())
    module = trt_lower.load(tmp / "again.trtl", backend="onnxruntime", weights=tmp / "again.safetensors")
    torch.testing.assert_close(_out(module, x), _out(b, x))


def _sequential(tmp: Path, backend: str) -> tuple[torch.nn.Module, torch.Tensor, Path]:
    """ConvBn (numbered names, a non-persistent buffer) saved with separate weights."""
    torch.manual_seed(0)
    model, x = ConvBn().eval(), torch.randn(2, 3, 8, 8)
    extra = {"refittable": True} if backend == "tensorrt" else {}
    trt_lower.save(trt_lower.lower_to_trt(model, (x,), backend=backend, **extra), tmp / "m.trtl", weights="separate")
    return model, x, tmp / "m.trtl"


@pytest.mark.parametrize("backend", ["onnxruntime", "tensorrt"])
def test_numbered_names_statistics_and_buffers(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if backend == "tensorrt":
        request.getfixturevalue("trt_double")
    model, x, code = _sequential(tmp_path, backend)
    new = finetuned(model, scale=0.1)  # parameters, running statistics and the buffer moved
    new[1].running_var.abs_()
    # A state dict holds no non-persistent buffer: the artifact keeps the lowered one, or takes it by name.
    module = trt_lower.load(code, backend=backend, weights=new.state_dict())
    torch.testing.assert_close(_out(module, x), _out(new, x) - new.offset + model.offset)
    module = trt_lower.load(code, backend=backend, weights={**new.state_dict(), "offset": new.offset})
    torch.testing.assert_close(_out(module, x), _out(new, x))


def test_a_state_dict_that_does_not_fit_is_named(tmp_path: Path) -> None:
    model, _, code = _sequential(tmp_path, "onnxruntime")
    state = model.state_dict()
    cases = {
        r"'0\.bias' is float32 \[3\]; .*m\.trtl takes float32 \[8\]": {**state, "0.bias": torch.zeros(3)},
        r"'1\.running_var' is float64": {**state, "1.running_var": state["1.running_var"].double()},
        r"missing '1\.running_mean'": {k: v for k, v in state.items() if k != "1.running_mean"},
        r"unexpected '4\.weight'": {**state, "4.weight": torch.zeros(1)},
        r"'offset' is float32 \[4\]": {**state, "offset": torch.zeros(4)},
    }
    for match, weights in cases.items():
        with pytest.raises(ArtifactError, match=match):
            trt_lower.load(code, backend="onnxruntime", weights=weights)


def test_a_weight_no_name_gives_is_named(tmp_path: Path) -> None:
    """A weight the conversion computes from several (recorded without a name), or a buffer too
    large for the manifest to keep (a name, no value), is refused by name, not filled with zeros."""
    model, _, code = _sequential(tmp_path, "onnxruntime")
    record = trt_lower.deploy.artifact.read(code).manifest["separate_weights"]
    derived = copy.deepcopy(record)
    del derived["names"]["sources"]["engine_0/_0_weight"]
    with pytest.raises(WeightFileError, match=r"'engine_0/_0_weight' is computed from the weights while converting"):
        separate_weights.read(model.state_dict(), derived, code)
    large = copy.deepcopy(record)
    del large["names"]["defaults"]["engine_0/offset"]
    with pytest.raises(WeightFileError, match=r"the state dict has no 'offset' .*: give it by name"):
        separate_weights.read(model.state_dict(), large, code)


class _Hypot(torch.nn.Module):
    """hypot's converter writes a NaN constant (NaN != NaN: it looked moved by the weights)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.hypot(self.linear(x), x)


def test_a_nan_constant_of_the_conversion_is_no_weight(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model, x = _Hypot().eval(), torch.randn(2, 4)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", min_block_size=1)
    trt_lower.save(lowered, tmp_path / "hypot.trtl", weights="separate")
    other = _Hypot().eval()
    module = trt_lower.load(tmp_path / "hypot.trtl", backend="onnxruntime", weights=other.state_dict())
    torch.testing.assert_close(module(x), other(x))
