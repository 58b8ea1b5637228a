"""LoweredModule.profile on ONNX Runtime: rows per engine layer and eager node, mapped to the FX
nodes and the model's source lines, adding up to the measured call; its table, JSON and Chrome
trace; a saved file profiled in a fresh process without the model's code."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
import torchvision
import transformers
from artifact_tamper import tamper

import trt_lower
from trt_lower.profile import ort_layers
from trt_lower.profile.measure import ProfileError
from trt_lower.profile.profile import Profile, Row
from trt_lower.profile.sources import NodeSource

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def resnet() -> tuple[trt_lower.LoweredModule, torch.Tensor]:
    torch.manual_seed(0)
    x = torch.randn(1, 3, 64, 64)
    return trt_lower.lower_to_trt(torchvision.models.resnet18().eval(), (x,), backend="onnxruntime"), x


@pytest.fixture(scope="module")
def bert() -> tuple[trt_lower.LoweredModule, torch.Tensor]:
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=100, hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256
    )
    ids = torch.randint(0, 100, (2, 64))
    return trt_lower.lower_to_trt(transformers.BertModel(config).eval(), (ids,), backend="onnxruntime"), ids


def _with_source(profile: Profile, file: str) -> float:
    """The share of the rows with a source line in `file` (of rows, not of time: where other
    work shares the cores, one row can take a stall of tens of ms)."""
    return sum(any(file in n.source for n in r.nodes) for r in profile.rows) / len(profile.rows)


def _adds_up(profile: Profile) -> None:
    assert sum(r.seconds for r in profile.rows) + profile.glue_seconds == pytest.approx(profile.call_seconds)


def test_resnet_layers_name_their_fx_nodes_and_torchvision_lines(resnet: Any) -> None:
    lowered, x = resnet
    profile = lowered.profile(x, iterations=5, warmup=1)
    _adds_up(profile)
    # How much of the call the rows cover is a timing: bench/bench_profile.py measures it.
    assert all(r.kind == "layer" and r.engine == "engine_0" and r.nodes for r in profile.rows)
    assert _with_source(profile, "torchvision/models/resnet.py") == 1
    # ONNX Runtime fuses convolution, batch norm, the residual add and relu into one Conv: one row, four nodes.
    fused = max(profile.rows, key=lambda r: len(r.nodes))
    assert {n.op for n in fused.nodes} >= {"aten.convolution.default", "aten.relu.default"}
    assert all(n.module.startswith("layer") for n in fused.nodes if n.op == "aten.convolution.default")


def test_bert_layers_name_transformers_lines(bert: Any) -> None:
    lowered, ids = bert
    profile = lowered.profile(ids, iterations=5, warmup=1)
    _adds_up(profile)
    assert all(r.nodes for r in profile.rows)
    # The rest: gelu (transformers/activations.py).
    assert _with_source(profile, "transformers/models/bert/modeling_bert.py") > 0.8
    # Every row names a line of transformers, the embedding's index check trt_lower adds too.
    assert all(any("/transformers/" in n.source for n in r.nodes) for r in profile.rows)
    assert any("encoder.layer.1" in n.module for r in profile.top(10) for n in r.nodes)


def test_layer_rows_are_onnx_runtimes_own_profile_of_a_run(resnet: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows are one measured run of ONNX Runtime's profiler output, node for node."""
    lowered, x = resnet
    recorded: list[Any] = []
    real = ort_layers.run_times

    def record(events: list[Any]) -> list[dict[str, float]]:
        recorded.append(events)
        return real(events)

    monkeypatch.setattr(ort_layers, "run_times", record)
    profile = lowered.profile(x, iterations=3, warmup=1)
    runs: dict[int, dict[str, float]] = {}
    model_runs = sorted((e for e in recorded[0] if e["name"] == "model_run"), key=lambda e: e["ts"])
    for e in recorded[0]:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            run = next(i for i, r in enumerate(model_runs) if r["ts"] <= e["ts"] <= r["ts"] + r["dur"])
            runs.setdefault(run, {})[e["name"].removesuffix("_kernel_time")] = e["dur"] * 1e-6
    rows = {r.name: r.seconds for r in profile.rows}
    assert any(rows == pytest.approx(run) for i, run in runs.items() if i >= 1)  # not the warm-up run


def test_eager_nodes_are_rows_with_their_line() -> None:
    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.a(x)) * 2 + 1
            y = torch.cumsum(y, 1)  # kept eager below
            return torch.sigmoid(self.b(y)) - 1

    x = torch.randn(4, 8)
    lowered = trt_lower.lower_to_trt(
        Model().eval(), (x,), backend="onnxruntime", fallback_ops=["aten.cumsum.default"], min_block_size=1
    )
    profile = lowered.profile(x, iterations=3, warmup=1)
    _adds_up(profile)
    (eager,) = [r for r in profile.rows if r.kind == "eager"]
    assert eager.name == "cumsum" and eager.engine is None
    assert eager.nodes[0].source.startswith(f"{__file__}:") and "torch.cumsum(y, 1)" in eager.nodes[0].source
    assert [r.engine for r in profile.rows if r.kind == "layer"] == sorted(r.engine for r in profile.rows if r.engine)


def test_the_nodes_onnx_runtime_inlines_a_function_op_into_are_rows_of_its_fx_node() -> None:
    """ONNX Runtime runs HardSwish (an ONNX function) as the HardSigmoid and Mul it inlines, saves
    them unnamed and times them as 'HardSigmoid_<index>': found by the property suite, a module of
    one hardswish profiled to no row at all (its whole call host glue)."""

    class Model(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.hardswish(torch.relu(torch.nn.functional.hardswish(x)) - 0.5)

    x = torch.randn(4, 8)
    lowered = trt_lower.lower_to_trt(Model().eval(), (x,), backend="onnxruntime", min_block_size=1)
    profile = lowered.profile(x, iterations=3, warmup=1)
    _adds_up(profile)
    assert all(r.nodes for r in profile.rows), profile.rows
    assert {n.node for r in profile.rows for n in r.nodes} >= {"hardswish", "hardswish_1"}


def test_profiling_leaves_the_module_as_it_was(resnet: Any) -> None:
    lowered, x = resnet
    session, forward, expected = lowered.engine_0._session, type(lowered).forward, lowered(x)
    lowered.profile(x, iterations=1, warmup=0)
    assert lowered.engine_0._session is session and type(lowered).forward is forward
    torch.testing.assert_close(lowered(x), expected)


@pytest.mark.parametrize("iterations, warmup", [(0, 1), (3, -1)])
def test_refuses_iterations_out_of_range(resnet: Any, iterations: int, warmup: int) -> None:
    lowered, x = resnet
    with pytest.raises(ProfileError, match=f"iterations={iterations}, warmup={warmup}"):
        lowered.profile(x, iterations=iterations, warmup=warmup)


@pytest.fixture(scope="module")
def saved(resnet: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("profile") / "r18.trtl"
    trt_lower.save(resnet[0], path)
    return path


def _fresh(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`code` in a new interpreter; it must not import the model's code (torchvision)."""
    check = "\nimport sys\nassert 'torchvision' not in sys.modules, 'the model code was imported'\n"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code) + check, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )


def test_a_saved_file_profiles_with_its_source_lines_in_a_fresh_process(saved: Path, tmp_path: Path) -> None:
    done = _fresh(
        """
        import json, sys, torch, trt_lower
        profile = trt_lower.load(sys.argv[1]).profile(torch.randn(1, 3, 64, 64), iterations=2, warmup=1)
        profile.save_json(sys.argv[2])
        """,
        str(saved),
        str(tmp_path / "p.json"),
    )
    assert done.returncode == 0, done.stderr
    data = json.loads((tmp_path / "p.json").read_text())
    assert data["rows"] and all(
        any("torchvision/models/resnet.py" in n["source"] for n in row["nodes"]) for row in data["rows"]
    )
    assert sum(r["seconds"] for r in data["rows"]) + data["glue_seconds"] == pytest.approx(data["call_seconds"])


def test_the_cli_profiles_a_saved_file(saved: Path, tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    done = _fresh(
        "import sys, trt_lower.cli.commands as c; sys.exit(c.main(sys.argv[1:]))",
        "profile",
        str(saved),
        "--input",
        "1x3x64x64",
        "--iterations",
        "2",
        "--top",
        "3",
        "--trace",
        str(trace),
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("profile on onnxruntime:") and "resnet.py" in lines[2]
    assert "the other" in lines[5] and "host glue" in lines[6]
    assert json.loads(trace.read_text())["traceEvents"]


def test_the_cli_names_a_bad_input(saved: Path) -> None:
    done = _fresh(
        "import sys, trt_lower.cli.commands as c; sys.exit(c.main(sys.argv[1:]))",
        "profile",
        str(saved),
        "--input",
        "3x?",
    )
    assert done.returncode == 1
    assert (
        done.stderr.strip()
        == "trt-lower profile: UsageError: --input '3x?': expected SHAPE[:DTYPE], e.g. 1x3x224x224:float32 or 2x128:int64"
    )


def test_a_file_without_sources_profiles_with_node_names(saved: Path, tmp_path: Path, resnet: Any) -> None:
    """An artifact written before sources were stored (no field 'sources')."""
    old = tamper(saved, tmp_path / "old.trtl", lambda manifest, members: manifest.pop("sources"))
    profile = trt_lower.load(old).profile(resnet[1], iterations=1, warmup=0)
    assert profile.rows and all(r.nodes and all(n.node and not n.source for n in r.nodes) for r in profile.rows)


@pytest.mark.parametrize(
    "value, message",
    [
        ([], "a dict by node name, got list"),
        ({"relu": {"node": "relu"}}, "entry 'relu': a dict of"),
        ({"relu": {"node": "relu", "op": "x", "code": "import os"}}, "entry 'relu': a dict of"),
        ({"relu": {"node": "relu", "op": 1}}, "entry 'relu': every field a string"),
    ],
)
def test_a_malformed_sources_field_is_refused_by_name(saved: Path, tmp_path: Path, value: Any, message: str) -> None:
    bad = tamper(saved, tmp_path / "bad.trtl", lambda manifest, members: manifest.update(sources=value))
    with pytest.raises(trt_lower.ArtifactError, match=f"field 'sources': {re.escape(message)}"):
        trt_lower.load(bad)


def _made_up() -> Profile:
    """A profile of a 10 ms call, without measuring: two engine layers (one fused), one eager node."""
    conv = NodeSource("convolution", "aten.convolution.default", "conv", "Conv2d", "model.py:3 in forward: conv(x)")
    relu = NodeSource("relu", "aten.relu.default", "", "", "model.py:4 in forward: relu(y)")
    rows = (
        Row("relu/Relu_fused", "layer", "engine_0", "Conv", 0.006, (conv, relu)),
        Row("cumsum", "eager", None, "aten.cumsum.default", 0.001, (NodeSource("cumsum", "aten.cumsum.default"),)),
        Row("add/Add", "layer", "engine_1", "Add", 0.002, (NodeSource("add", "aten.add.Tensor"),)),
    )
    return Profile(0.010, rows, "onnxruntime", 5, 1)


def test_the_table_sorts_by_time_and_sums_the_rest() -> None:
    lines = _made_up().table(top=2).splitlines()
    assert lines[0] == "profile on onnxruntime:   10.000ms a call (median of 5 after 1 warm-up), rows cover 90.0%"
    assert lines[2].split()[:3] == ["6.000ms", "60.0%", "engine_0/relu/Relu_fused"]
    assert "convolution, relu" in lines[2] and lines[2].endswith("model.py:3 in forward: conv(x)")
    assert lines[3].split()[:3] == ["2.000ms", "20.0%", "engine_1/add/Add"]
    assert lines[4].split() == ["1.000ms", "10.0%", "the", "other", "1", "rows"]
    assert lines[5].split() == ["1.000ms", "10.0%", "host", "glue"]
    assert str(_made_up()) == _made_up().table()


def test_json_and_chrome_trace(tmp_path: Path) -> None:
    profile = _made_up()
    profile.save_json(tmp_path / "p.json")
    data = json.loads((tmp_path / "p.json").read_text())
    assert data["call_seconds"] == 0.010 and data["glue_seconds"] == pytest.approx(0.001)
    assert data["rows"][0]["nodes"][1] == {
        "node": "relu",
        "op": "aten.relu.default",
        "module": "",
        "module_type": "",
        "source": "model.py:4 in forward: relu(y)",
    }
    profile.save_chrome_trace(tmp_path / "t.json")
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert all(e["ph"] == "X" and {"name", "ts", "dur", "pid", "tid"} <= e.keys() for e in events)
    assert [e["name"] for e in events] == ["relu/Relu_fused", "cumsum", "add/Add", "host glue"]
    assert sum(e["dur"] for e in events) == pytest.approx(10_000)  # µs: the call
    assert all(a["ts"] + a["dur"] == pytest.approx(b["ts"]) for a, b in zip(events, events[1:]))


def test_the_split_coloured_by_time(tmp_path: Path) -> None:
    x = torch.randn(4, 8)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8), torch.nn.Tanh())
    lowered = trt_lower.lower_to_trt(
        model, (x,), backend="onnxruntime", fallback_ops=["aten.relu.default"], min_block_size=1
    )
    times = lowered.profile(x, iterations=2, warmup=1).node_seconds()
    assert times.keys() == {"engine_0", "relu", "engine_1"}
    html = lowered.report.draw(tmp_path / "split.html", times=times).read_text()
    hottest = max(times, key=times.__getitem__)
    assert f'background:#ff8c1a"><b>{times[hottest] * 1e3:.3f} ms' in html
    dot = lowered.report.draw(tmp_path / "split.dot", times=times).read_text()
    assert "#ff8c1a" in dot and "ms · " in dot
    assert "ms · " not in lowered.report.draw(tmp_path / "plain.dot").read_text()


def test_keyword_inputs_are_profiled_as_the_module_takes_them() -> None:
    """BERT called with attention_mask= (a pytree of args and kwargs), lowered so and profiled so."""
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64
    )
    ids, mask = torch.randint(0, 100, (2, 8)), torch.ones(2, 8, dtype=torch.int64)
    model = transformers.BertModel(config).eval()
    lowered = trt_lower.lower_to_trt(model, (ids,), kwargs={"attention_mask": mask}, backend="onnxruntime")
    profile = lowered.profile(ids, kwargs={"attention_mask": mask}, iterations=1, warmup=0)
    _adds_up(profile)
    assert profile.rows
    with pytest.raises(trt_lower.InputStructureError, match="kwargs"):
        lowered.profile(ids, iterations=1, warmup=0)


def test_the_profiled_sessions_files_are_removed_even_when_a_call_fails(
    resnet: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lowered, x = resnet
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    lowered.profile(x, iterations=1, warmup=0)
    assert not list(tmp_path.iterdir())

    def fails(self: Any, *args: Any) -> Any:
        raise RuntimeError("a call that fails")

    monkeypatch.setattr(torch.fx.Interpreter, "run", fails)
    with pytest.raises(RuntimeError, match="a call that fails"):
        lowered.profile(x, iterations=1, warmup=0)
    assert not list(tmp_path.iterdir())
