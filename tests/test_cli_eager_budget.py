"""`--max-eager-allocation BYTES`: every command that loads a saved model passes it to
trt_lower.load, and `triton` writes it into a python model's config, which model.py loads with."""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch

import trt_lower
from trt_lower.cli import commands as cli
from trt_lower.deploy import allocations, artifact
from trt_lower.triton import export_model_repository, repository
from trt_lower.triton.backend import Runner

LOADING = {
    "run": ["run", "{file}"],
    "bench": ["bench", "{file}"],
    "profile": ["profile", "{file}"],
    "verify": ["verify", "{file}"],
    "repro": ["repro", "{file}", "-o", "{tmp}/repro"],
}


class Loaded(Exception):
    """Raised by the stand-in for trt_lower.load, carrying its keywords."""


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_command_loading_a_saved_model_takes_the_budget() -> None:
    """As --trusted-key: a command that loads a file without it could not run a model that needs more."""
    for name, command in _subparsers(cli.parser()).items():
        takes = any(a.option_strings == ["--max-eager-allocation"] for a in command._actions)
        assert takes == (name in {*LOADING, "triton"}), name


@pytest.mark.parametrize("command", sorted(LOADING))
@pytest.mark.parametrize(("given", "budget"), [([], allocations.DEFAULT_MAX_EAGER_ALLOCATION), (["12345"], 12345)])
def test_the_budget_reaches_load(
    command: str, given: list[str], budget: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def load(*args: Any, **kwargs: Any) -> Any:
        raise Loaded(kwargs["max_eager_allocation"])

    monkeypatch.setattr(trt_lower, "load", load)
    monkeypatch.setattr(artifact, "load", load)
    file = tmp_path / "m.trtl"
    file.write_bytes(b"")
    argv = [a.format(file=file, tmp=tmp_path) for a in LOADING[command]]
    with pytest.raises(SystemExit) as exited:  # the command's one line: what load was called with
        cli.main([*argv, *(["--max-eager-allocation", *given] if given else [])])
    assert exited.value.code == f"trt-lower {command}: Loaded: {budget}"


@pytest.mark.parametrize("bad", ["0", "-1", "4GiB", "1e9"])
def test_a_budget_that_is_no_positive_number_of_bytes_is_a_usage_error(bad: str, tmp_path: Path) -> None:
    file = tmp_path / "m.trtl"
    file.write_bytes(b"")
    with pytest.raises(SystemExit) as exited:
        cli.main(["run", str(file), f"--max-eager-allocation={bad}"])
    assert re.search(
        rf"--max-eager-allocation: '{re.escape(bad)}' is not a positive number of bytes", str(exited.value.code)
    )


def test_triton_writes_the_budget_the_python_model_loads_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lowered = trt_lower.lower_to_trt(torch.nn.Linear(3, 2).eval(), (torch.randn(2, 3),), backend="onnxruntime")
    trt_lower.save(lowered, tmp_path / "m.trtl")
    repo = tmp_path / "repo"
    argv = ["triton", str(tmp_path / "m.trtl"), "--repo", str(repo), "--platform", "python"]
    assert cli.main([*argv, "--name", "budget", "--max-eager-allocation", "1048576"]) == 0
    assert cli.main([*argv, "--name", "default"]) == 0
    assert (
        'key: "max_eager_allocation" value: { string_value: "1048576" }' in (repo / "budget/config.pbtxt").read_text()
    )
    assert "max_eager_allocation" not in (repo / "default/config.pbtxt").read_text()  # load's default
    with pytest.raises(ValueError, match="max_eager_allocation must be a positive int of bytes or None, got 0"):
        export_model_repository(tmp_path / "m.trtl", repo, "zero", platform="python", max_eager_allocation=0)

    budgets: list[int] = []

    def load(path: str, *, max_eager_allocation: int) -> Any:
        budgets.append(max_eager_allocation)
        return lowered

    monkeypatch.setattr(trt_lower, "load", load)
    Runner.from_artifact(str(repo / "budget/1/model.trtl"), ["x"], ["output"], "cpu", False, max_eager_allocation=2**20)
    assert budgets == [2**20]


@pytest.mark.parametrize(("parameters", "budget"), [({"max_eager_allocation": "4096"}, 4096), ({}, None)])
def test_model_py_loads_with_the_budget_its_config_holds(
    parameters: dict[str, str], budget: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """model.py as Triton's python backend starts it (its utilities module stood in for)."""
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", types.ModuleType("triton_python_backend_utils"))
    spec = importlib.util.spec_from_file_location("triton_model", Path(repository.__file__).with_name("model.py"))
    assert spec is not None and spec.loader is not None
    model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(model)
    loaded: list[int] = []

    def from_artifact(cls: type, /, path: str, *args: Any, max_eager_allocation: int, **kwargs: Any) -> None:
        loaded.append(max_eager_allocation)

    monkeypatch.setattr(Runner, "from_artifact", classmethod(from_artifact))
    monkeypatch.setattr(sys, "path", list(sys.path))  # model.py puts its python_path first
    root = str(Path(trt_lower.__file__).resolve().parent.parent)
    params = {"artifact": "model.trtl", "python_path": root, **parameters}
    config = {"parameters": {k: {"string_value": v} for k, v in params.items()}, "input": [], "output": []}
    args = {"model_config": json.dumps(config), "model_repository": "repo", "model_version": "1"}
    model.TritonPythonModel().initialize({**args, "model_instance_kind": "CPU", "model_instance_device_id": "0"})
    assert loaded == [allocations.DEFAULT_MAX_EAGER_ALLOCATION if budget is None else budget]
