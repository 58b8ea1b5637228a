"""ONNX Runtime as trt_lower meets it in other environments: its fast path against the public one,
another release's private binding, two builds installed at once, none installed."""

from __future__ import annotations

import importlib.util
import sys
import warnings
from importlib import metadata
from typing import Any, Iterator

import pytest
import torch
from harness import Fn
from onnxruntime.capi import _pybind_state as binding

import trt_lower
from trt_lower.engine import engines, ort_session
from trt_lower.runtime.ort_module import OrtEngineModule


def _f(x: torch.Tensor, mask: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.relu(x) * 2, (x > 0) & mask, ids * 3 + 1  # float, bool and int64 in and out


def _inputs() -> tuple[torch.Tensor, ...]:
    return torch.randn(4, 6), torch.rand(4, 6) > 0.5, torch.randint(-9, 9, (4, 6))


def _lower() -> trt_lower.LoweredModule:
    lowered = trt_lower.lower_to_trt(Fn(_f), _inputs(), backend="onnxruntime", require_full=True)
    assert lowered.report.coverage == 1.0
    return lowered


def _engines(lowered: trt_lower.LoweredModule) -> list[OrtEngineModule]:
    engines = [m for m in lowered.modules() if isinstance(m, OrtEngineModule)]
    assert engines
    return engines


@pytest.fixture
def probe_again() -> Iterator[None]:
    """fast_path_works() decides once per process: here it decides again, and after the test too."""
    ort_session.fast_path_works.cache_clear()
    yield
    ort_session.fast_path_works.cache_clear()


def test_the_public_path_gives_what_the_fast_path_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _lower()
    assert all(e._fast == ort_session.fast_path_works() for e in _engines(fast))
    monkeypatch.setattr(engines, "fast_path_works", lambda: False)
    public = _lower()
    assert not any(e._fast for e in _engines(public))
    x, mask, ids = _inputs()
    # Contiguous inputs (DLPack on the fast path), then strided ones (numpy views on both).
    for args in ((x, mask, ids), (x.t().contiguous().t(), mask.t().contiguous().t(), ids.t().contiguous().t())):
        got, want = public(*args), fast(*args)
        assert [t.dtype for t in got] == [t.dtype for t in want] == [torch.float32, torch.bool, torch.int64]
        assert all(torch.equal(g, w) for g, w in zip(got, want))
        torch.testing.assert_close(got, _f(*args))


class _Refusing:
    """OrtValueVector as ONNX Runtime 1.32 has it for this call: push_back takes no bool flag."""

    def push_back(self, *args: Any) -> None:
        raise TypeError("push_back(): incompatible function arguments")


class _Wrong(binding.OrtValueVector):  # type: ignore[misc]
    """An OrtValueVector whose outputs come back wrong (say, a changed DLPack convention)."""

    def to_dlpacks(self, convert: Any) -> list[torch.Tensor]:
        return [torch.zeros_like(t) for t in super().to_dlpacks(convert)]


@pytest.mark.parametrize("vector", [_Refusing, _Wrong], ids=["raises", "differs"])
def test_a_fast_path_that_fails_here_leaves_the_public_path(
    vector: type, monkeypatch: pytest.MonkeyPatch, probe_again: None
) -> None:
    monkeypatch.setattr(binding, "OrtValueVector", vector)
    assert not ort_session.fast_path_works()
    lowered = _lower()
    assert not any(e._fast for e in _engines(lowered))
    args = _inputs()
    torch.testing.assert_close(lowered(*args), _f(*args))


def _versions(installed: dict[str, str]) -> Any:
    def version(name: str) -> str:
        if name not in installed:
            raise metadata.PackageNotFoundError(name)
        return installed[name]

    return version


def test_two_onnxruntime_builds_installed_together_are_named_in_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metadata, "version", _versions({"onnxruntime": "1.31.1", "onnxruntime-gpu": "1.31.0"}))
    with pytest.warns(
        UserWarning,
        match=r"onnxruntime 1\.31\.1 and onnxruntime-gpu 1\.31\.0 are installed together.*"
        r"pip uninstall -y onnxruntime onnxruntime-gpu",
    ):
        ort_session.warn_if_several_installed()
    monkeypatch.setattr(metadata, "version", _versions({"onnxruntime-gpu": "1.31.0"}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ort_session.warn_if_several_installed()


def test_without_onnxruntime_the_error_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime raises ModuleNotFoundError
    spec = importlib.util.spec_from_file_location("_ort_session_without_ort", ort_session.__file__)
    assert spec is not None and spec.loader is not None
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'trt_lower\[cpu\]'.*'trt_lower\[gpu\]'"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
