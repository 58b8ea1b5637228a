"""One name per concept across the public Python API: the same keyword for the same thing in every
function (a model's inputs are `inputs`), the same method for the same thing on every result
(`to_dict`); a former spelling still works for a release, with a DeprecationWarning."""

from __future__ import annotations

import importlib
import inspect
import warnings
from pathlib import Path
from typing import Any, Iterator

import pytest
import torch

from trt_lower.profile.profile import Profile
from trt_lower.values.renamed import renamed_keywords

PUBLIC_MODULES = ("trt_lower", "trt_lower.debug", "trt_lower.testing", "trt_lower.quantization", "trt_lower.triton")
# A former spelling -> the one name the API uses for it everywhere.
FORMER = {"example_inputs": "inputs", "iters": "iterations", "repeats": "iterations", "trusted_key": "trusted_keys"}


def _public_callables() -> Iterator[tuple[str, Any]]:
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        # trt_lower.testing has no __all__: its own names are its public ones.
        own = [
            n for n, v in vars(module).items() if not n.startswith("_") and getattr(v, "__module__", "") == module_name
        ]
        for name in getattr(module, "__all__", own):
            value = getattr(module, name)
            if inspect.isfunction(value):
                yield f"{module_name}.{name}", value
            elif inspect.isclass(value):
                for attr, member in vars(value).items():
                    if inspect.isfunction(member) and not attr.startswith("_"):
                        yield f"{module_name}.{name}.{attr}", member


def test_no_public_function_takes_a_former_spelling() -> None:
    """quantize took `example_inputs` where every other function takes `inputs`."""
    former = {
        f"{where}({p})": FORMER[p]
        for where, function in _public_callables()
        for p in inspect.signature(function).parameters
        if p in FORMER
    }
    assert former == {}


def test_every_result_saved_as_json_has_to_dict() -> None:
    """Profile's was `to_json`, BenchmarkResult's and LoweringReport's `to_dict`."""
    methods = {where for where, _ in _public_callables()}
    saved = {where.removesuffix(".save_json") for where in methods if where.endswith(".save_json")}
    assert len(saved) >= 3  # BenchmarkResult, LoweringReport, Profile
    assert sorted(c for c in saved if f"{c}.to_dict" not in methods) == []


def test_every_public_save_returns_the_path_written() -> None:
    """Profile's save_json and save_chrome_trace returned None, BenchmarkResult's and
    LoweringReport's save_json the Path."""
    saves = {where: inspect.signature(f).return_annotation for where, f in _public_callables() if ".save_" in where}
    assert len(saves) >= 4 and {where: r for where, r in saves.items() if r != "Path"} == {}


@renamed_keywords(old="new")
def _takes(a: int, *, new: int = 0) -> tuple[int, int]:
    """A function whose keyword `new` was `old`."""
    return a, new


def test_a_former_keyword_warns_and_reaches_the_new_one() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _takes(1, new=2) == (1, 2)
    with pytest.warns(DeprecationWarning, match=r"_takes\(old=\.\.\.\) is deprecated .* use new="):
        assert _takes(1, old=2) == (1, 2)  # type: ignore[call-arg]  # (type checkers see the new name only)
    with pytest.raises(TypeError, match="got old= and new=: give new= only"):
        _takes(1, old=2, new=3)  # type: ignore[call-arg]
    assert list(inspect.signature(_takes).parameters) == ["a", "new"]  # what the docs show


def test_quantize_takes_inputs_and_its_former_keyword_with_a_warning() -> None:
    from trt_lower.quantization import quantize

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    x = torch.randn(2, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        new = quantize(model, inputs=(x,), calibration_batches=[(x,)])
    with pytest.warns(DeprecationWarning, match=r"quantize\(example_inputs=\.\.\.\) is deprecated .* use inputs="):
        old = quantize(model, example_inputs=(x,), calibration_batches=[(x,)])  # type: ignore[call-arg]
    torch.testing.assert_close(old(x), new(x))


def test_profile_to_json_is_to_dict_with_a_warning(tmp_path: Path) -> None:
    profile = Profile(call_seconds=1e-3, rows=(), backend="onnxruntime", iterations=2, warmup=1)
    assert profile.to_dict()["coverage"] == 0.0
    with pytest.warns(DeprecationWarning, match=r"Profile\.to_json\(\) is deprecated .* use Profile\.to_dict\(\)"):
        assert profile.to_json() == profile.to_dict()
    assert profile.save_json(tmp_path / "p.json") == tmp_path / "p.json"
    assert profile.save_chrome_trace(tmp_path / "t.json") == tmp_path / "t.json"
