"""save -> load for every name nn.Module gives a tensor (numbered by nn.Sequential and
nn.ModuleList, nested, ModuleDict keys that are no identifiers, held by eager nodes or by
engines, all-eager models), in this process and a fresh one; and tensor names planted in a file,
which would run as code or reach an attribute every module has, refused (deploy/tensor_names.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import safetensors.torch
import torch
from artifact_tamper import node, tamper

import trt_lower

ROOT = Path(__file__).resolve().parent.parent
ADDMM = "aten.addmm.default"


class Nested(torch.nn.Module):
    """Weights under a ModuleDict key that is no identifier, in a numbered list of numbered lists,
    and a buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleDict({"my-block 1": torch.nn.Linear(4, 4)})
        self.layers = torch.nn.ModuleList([torch.nn.Sequential(torch.nn.Linear(4, 4))])
        self.scale = torch.nn.Buffer(torch.tensor(2.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.layers[0](self.blocks["my-block 1"](x))) * self.scale


def _sequential() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4), torch.nn.Tanh())


# name -> (model, lowering options, whether it has engines)
MODELS: dict[str, tuple[Callable[[], torch.nn.Module], dict[str, Any], bool]] = {
    "numbered, eager-held": (_sequential, {"fallback_ops": [ADDMM], "min_block_size": 1}, True),
    "numbered, in an engine": (_sequential, {}, True),
    "nested, eager-held": (Nested, {"fallback_ops": [ADDMM, "aten.mul.Tensor"]}, False),
    "all-eager, too small for an engine": (_sequential, {"min_block_size": 100}, False),
    "all-eager, every op forced": (
        _sequential,
        {"fallback_ops": [ADDMM, "aten.relu.default", "aten.tanh.default"]},
        False,
    ),
}


def _lowered(name: str) -> tuple[torch.nn.Module, trt_lower.LoweredModule, torch.Tensor]:
    make, options, engines = MODELS[name]
    torch.manual_seed(0)
    model, x = make().eval(), torch.randn(3, 4)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", **options)
    assert bool(lowered.report.engines) == engines
    return model, lowered, x


@pytest.mark.parametrize("name", list(MODELS))
def test_round_trip_whatever_the_names(name: str, tmp_path: Path) -> None:
    model, lowered, x = _lowered(name)
    reads = {str(n.target) for n in lowered.graph.find_nodes(op="get_attr")}
    if name != "numbered, in an engine":  # the eager nodes read tensors by names FX quotes
        assert any(not part.isidentifier() for read in reads for part in read.split(".")), reads
    trt_lower.save(lowered, tmp_path / "m.trtl")
    loaded = trt_lower.load(tmp_path / "m.trtl", backend="onnxruntime")
    trt_lower.save(loaded, tmp_path / "again.trtl")  # a loaded module keeps its names
    again = trt_lower.load(tmp_path / "again.trtl", backend="onnxruntime")
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model(x))
        torch.testing.assert_close(loaded(x), lowered(x), rtol=0, atol=0)
        torch.testing.assert_close(again(x), lowered(x), rtol=0, atol=0)
    assert {str(n.target) for n in loaded.graph.find_nodes(op="get_attr")} == reads


LOAD_SCRIPT = """
import sys, torch, trt_lower
from safetensors.torch import load_file, save_file
x = load_file(sys.argv[1])["x"]
save_file({path: trt_lower.load(path, backend="onnxruntime")(x) for path in sys.argv[3:]}, sys.argv[2])
"""


def test_numbered_and_nested_names_load_in_a_fresh_process(tmp_path: Path) -> None:
    expected: dict[str, torch.Tensor] = {}
    for name in ("numbered, eager-held", "nested, eager-held"):
        _, lowered, x = _lowered(name)  # the same x for both (seeded)
        path = str(tmp_path / f"{len(expected)}.trtl")
        trt_lower.save(lowered, path)
        with torch.no_grad():
            expected[path] = lowered(x)
    safetensors.torch.save_file({"x": x}, tmp_path / "x.st")
    done = subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT, str(tmp_path / "x.st"), str(tmp_path / "y.st"), *expected],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    torch.testing.assert_close(safetensors.torch.load_file(tmp_path / "y.st"), expected)


class Ligature(torch.nn.Module):
    """A ModuleDict key Python reads as another name in code (NFKC: 'ﬁ' is 'fi')."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleDict({"\ufb01": torch.nn.Linear(4, 4)})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.blocks["\ufb01"](x))


def test_save_refuses_a_name_load_would_refuse(tmp_path: Path) -> None:
    lowered = trt_lower.lower_to_trt(
        Ligature().eval(), (torch.randn(3, 4),), backend="onnxruntime", fallback_ops=[ADDMM]
    )
    with pytest.raises(
        trt_lower.ArtifactError, match="cannot save this module: tensor name 'blocks.\ufb01.weight'.*NFKC"
    ):
        trt_lower.save(lowered, tmp_path / "m.trtl")
    assert not (tmp_path / "m.trtl").exists()


# -- planted names ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def numbered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("numbered") / "numbered.trtl"
    trt_lower.save(_lowered("numbered, eager-held")[1], path)
    return path


def _renamed(*names: str) -> Callable[[dict[str, Any], dict[str, bytes]], None]:
    """A change giving the file's first len(names) weights (and the nodes reading them) `names`."""

    def change(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
        weights = safetensors.torch.load(members["weights.safetensors"])
        for nth, new in enumerate(names):
            read = node(manifest, "get_attr", nth)
            weights[new] = weights.pop(read["target"])
            read["target"] = new
        members["weights.safetensors"] = safetensors.torch.save(weights)

    return change


QUOTED = 'open("pwned", "w")'
PLANTED = {  # what: (names, what the error says)
    "a quote that ends FX's getattr string": ((f'0") and {QUOTED} and getattr(self, "0',), "not an identifier"),
    "a backslash": (('0\\") or __import__("os") #',), "not an identifier"),
    "a new line": (("0\nimport os",), "not an identifier"),
    "an empty part": (("0..weight",), "part '' is not an identifier"),
    "a leading dot": ((".weight",), "part '' is not an identifier"),
    "a keyword": (("0.class",), "part 'class' is not an identifier"),
    "a ligature Python reads as another name": (("\ufb01.weight",), "NFKC"),
    "a dunder reaching the module's class": (("0.__class__.forward",), "part '__class__' names an attribute"),
    "a dunder at the top": (("__dict__.weight",), "part '__dict__' names an attribute"),
    "the module's forward": (("forward",), "part 'forward' names an attribute"),
    "the module's graph": (("graph.weight",), "part 'graph' names an attribute"),
    "the report lowering sets": (("report",), "part 'report' names an attribute"),
    "the input spec loading sets": (("_in_spec",), "part '_in_spec' names an attribute"),
    "an nn.Module attribute below the top": (("0.training.weight",), "part 'training' names an attribute"),
    "a method below the top": (("0.to",), "part 'to' names an attribute"),
    "a very long name": (("w" * 2000,), "longer than 1024 characters"),
    "a deep name": ((".".join(["m"] * 100),), "or 64 parts"),
    "a tensor with tensors inside it": (("a", "a.b"), "'a' is a tensor, and other names read tensors inside it"),
}


@pytest.mark.parametrize("what", list(PLANTED))
def test_planted_tensor_names_are_refused(
    numbered: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str
) -> None:
    names, message = PLANTED[what]
    monkeypatch.chdir(tmp_path)  # a payload that ran would write ./pwned
    forward, init = torch.nn.Module.forward, torch.nn.Module.__init__
    evil = tamper(numbered, tmp_path / "evil.trtl", _renamed(*names))
    try:
        with pytest.raises(trt_lower.ArtifactError) as refused:
            trt_lower.load(evil, backend="onnxruntime")(torch.randn(3, 4))
        text = str(refused.value)
        assert text.startswith(f"{evil}: member 'weights.safetensors': tensor name") and message in text, text
    finally:
        assert not (tmp_path / "pwned").exists(), "the file's text ran as code"
        assert (torch.nn.Module.forward, torch.nn.Module.__init__) == (forward, init), "a class was changed"
