"""trt_lower.benchmark, `trt-lower bench`, the picture of the split and the progress bars.

Tiny models and a handful of calls: what is checked is the shape of the results, never a timing.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import torch

import trt_lower
from trt_lower.benchmarking import models as demo_models
from trt_lower.benchmarking.breakdown import breakdown
from trt_lower.benchmarking.measure import Latency, UnstableTimingWarning, benchmark
from trt_lower.benchmarking.timing import cuda_time
from trt_lower.cli import commands as cli
from trt_lower.report import EngineReport, Fallback, GraphNode, LoweringReport, draw
from trt_lower.values import progress

INF = float("inf")  # no UnstableTimingWarning: the tests' timings are not what they check
LATENCY_FIELDS = {"min", "mean", "median", "p90", "p95", "p99", "max"}
RUN_FIELDS = {
    "variant",
    "batch_size",
    "iterations",
    "throughput",
    "latency_ms",
    "cv",
    "unstable",
    "speedup",
    "gpu_ms",
    "enqueue_ms",
    "breakdown",
    "samples_ms",
}


class Split(torch.nn.Module):
    """Two engines around an op forced to eager (sin), an output of each engine."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = (torch.relu(self.conv(x)) + 1).split(2, dim=1)
        return torch.nn.functional.gelu(self.lin(torch.sin(a))) + b, a.sum()


@pytest.fixture(scope="module")
def lowered() -> tuple[torch.nn.Module, trt_lower.LoweredModule, tuple[torch.Tensor], str]:
    """The model, lowered for batch sizes 1..4 (stderr is not a terminal here), and what the
    lowering wrote to stderr."""
    torch.manual_seed(0)
    model, x = Split().eval(), torch.randn(2, 3, 8, 8)
    spec = trt_lower.TensorSpec(min_shape=(1, 3, 8, 8), opt_shape=(2, 3, 8, 8), max_shape=(4, 3, 8, 8))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        result = trt_lower.lower_to_trt(model, (spec,), backend="onnxruntime", fallback_ops=["aten.sin"])
    return model, result, (x,), err.getvalue()


@pytest.fixture(scope="module")
def result(lowered: Any) -> trt_lower.BenchmarkResult:
    model, low, inputs, _ = lowered
    return benchmark(
        model, low, inputs, warmup=1, iterations=3, block=2, batch_sizes=[1, 3], cv_threshold=INF, breakdown_calls=2
    )


def test_json_has_every_field_for_each_variant_and_batch_size(
    result: trt_lower.BenchmarkResult, tmp_path: Path
) -> None:
    data = json.loads(result.save_json(tmp_path / "bench.json").read_text())
    assert {"machine", "settings", "runs"} <= set(data)
    assert {"cpu", "cpu_count", "torch_threads", "python", "gpu", "versions"} <= set(data["machine"])
    assert data["machine"]["versions"]["torch"] == torch.__version__.split("+")[0]
    assert sorted((r["variant"], r["batch_size"]) for r in data["runs"]) == [
        ("eager", 1),
        ("eager", 3),
        ("lowered", 1),
        ("lowered", 3),
    ]
    for run in data["runs"]:
        assert set(run) == RUN_FIELDS
        lat = run["latency_ms"]
        assert set(lat) == LATENCY_FIELDS
        assert 0 < lat["min"] <= lat["median"] <= lat["p90"] <= lat["p99"] <= lat["max"]
        assert run["iterations"] == len(run["samples_ms"]) >= 3
        assert run["throughput"] == pytest.approx(run["batch_size"] * 1e3 / lat["mean"])
        assert run["cv"] >= 0 and run["speedup"] > 0
        assert run["gpu_ms"] is None and run["enqueue_ms"] is None  # no CUDA here
        if run["variant"] == "eager":
            assert run["speedup"] == 1.0 and run["breakdown"] is None
        else:
            parts = {p["name"]: p for p in run["breakdown"]}
            assert sorted(parts) == ["eager_0", "engine_0", "engine_1", "overhead"]
            assert parts["engine_0"]["kind"] == "engine" and parts["engine_0"]["nodes"] == 4
            assert parts["eager_0"]["kind"] == "eager" and parts["eager_0"]["nodes"] == 1  # the sin
            assert all(p["ms"] >= 0 for p in parts.values())


def test_the_breakdown_runs_eager_ops_as_the_forward_does(lowered: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _, low, inputs, _ = lowered
    assert "torch.sin(" in low.code  # the forward calls the binding, not the OpOverload
    called: list[object] = []
    real = torch._ops.OpOverload.__call__
    monkeypatch.setattr(
        torch._ops.OpOverload, "__call__", lambda self, *a, **k: (called.append(self), real(self, *a, **k))[1]
    )
    parts = {p.name: p for p in breakdown(low, inputs, calls=1)}
    assert parts["eager_0"].nodes == 1 and called == []


def test_summary_names_each_run(result: trt_lower.BenchmarkResult) -> None:
    text = result.summary()
    for field in ("samples/s", "median", "p99", "CV", "vs eager", "lowered (onnxruntime)", "engine_1"):
        assert field in text
    assert len([line for line in text.splitlines() if line.lstrip().startswith(("1 ", "3 "))]) == 4


def test_variants_run_interleaved_in_blocks() -> None:
    calls: list[str] = []

    class Recorder(torch.nn.Module):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            calls.append(self.name)
            return x

    benchmark(Recorder("e"), Recorder("l"), (torch.zeros(1),), warmup=1, iterations=4, block=2, cv_threshold=INF)
    assert "".join(calls) == "el" + "eell" + "llee"  # warm-up, then blocks with the order rotating


def test_duration_extends_the_run() -> None:
    model = torch.nn.Identity()
    result = benchmark(
        model, model, (torch.zeros(1),), warmup=0, iterations=1, block=1, duration=0.05, cv_threshold=INF
    )
    assert all(r.iterations > 1 and sum(r.samples_ms) < 1e3 for r in result.runs)


def test_unstable_runs_warn() -> None:
    model = torch.nn.Identity()
    with pytest.warns(UnstableTimingWarning, match="coefficient of variation"):
        benchmark(model, model, (torch.zeros(1),), warmup=0, iterations=4, block=2, cv_threshold=-1.0)


def test_lowered_alone_has_no_speedup(tmp_path: Path) -> None:
    """A saved model (trt-lower bench FILE) has no eager model beside it."""
    result = benchmark(
        None, torch.nn.Identity(), (torch.zeros(2),), warmup=0, iterations=2, compare=("lowered",), cv_threshold=INF
    )
    assert [(r.variant, r.batch_size, r.speedup) for r in result.runs] == [("lowered", 2, None)]
    assert result.summary().splitlines()[2].rstrip().endswith("-")
    assert result.plot(tmp_path / "alone.png").read_bytes().startswith(b"\x89PNG")
    with pytest.raises(ValueError, match="no model to run"):
        benchmark(None, torch.nn.Identity(), (torch.zeros(2),))


def test_bad_compare_is_refused() -> None:
    with pytest.raises(ValueError, match="compare must name"):
        benchmark(torch.nn.Identity(), torch.nn.Identity(), (torch.zeros(1),), compare=("eager", "fast"))


def test_cuda_timing_reads_events_and_host_time() -> None:
    class Event:  # torch.cuda.Event's interface, without a GPU: 2.5 ms between record() calls
        def __init__(self, enable_timing: bool) -> None:
            assert enable_timing

        def record(self) -> None:
            pass

        def synchronize(self) -> None:
            pass

        def elapsed_time(self, end: Any) -> float:
            return 2.5

    t = cuda_time(lambda: sum(range(1000)), event=Event)
    assert t.gpu_ms == 2.5
    assert t.enqueue_ms is not None and 0 < t.enqueue_ms <= t.wall_ms


def test_percentiles_are_measured_values() -> None:
    lat = Latency.of([float(v) for v in range(1, 101)])
    assert (lat.min, lat.median, lat.p90, lat.p95, lat.p99, lat.max) == (1, 50.5, 90, 95, 99, 100)


def test_plot_is_a_png(result: trt_lower.BenchmarkResult, tmp_path: Path) -> None:
    data = result.plot(tmp_path / "bench.png").read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
    with pytest.raises(ValueError, match="must end in .png"):
        result.plot(tmp_path / "bench.svg")


@pytest.mark.parametrize("suffix", [".svg", ".png", ".html", ".dot"])
def test_picture_of_the_split(lowered: Any, tmp_path: Path, suffix: str) -> None:
    report = lowered[1].report
    if suffix in draw.RENDERED and shutil.which("dot") is None:
        pytest.skip("Graphviz `dot` is not installed")
    data = report.draw(tmp_path / f"split{suffix}").read_bytes()
    assert data
    text = data.decode(errors="replace")
    if suffix == ".svg":
        assert ET.fromstring(data).tag == "{http://www.w3.org/2000/svg}svg"
    elif suffix == ".png":
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
        return
    elif suffix == ".html":
        assert text.startswith("<!DOCTYPE html>")
    else:
        assert text.startswith("digraph")
    assert "engine_0" in text and "engine_1" in text
    assert all(f.reason in text for f in report.fallbacks) and report.fallbacks


def test_drawing_without_graphviz_says_what_is_missing(
    lowered: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(draw.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match=r"Graphviz's `dot` program.*\.html or \.dot"):
        lowered[1].report.draw(tmp_path / "split.svg")
    with pytest.raises(ValueError, match=r"must end in \.svg, \.png, \.html or \.dot"):
        lowered[1].report.draw(tmp_path / "split.jpg")


def test_large_graphs_collapse_but_name_every_reason() -> None:
    """200 eager nodes in a chain (100 fallbacks with 4 reasons, 100 views) between 2 engines."""
    nodes = [GraphNode("x", "input", "x"), GraphNode("engine_0", "engine", "engine_0", (("x", ""),))]
    fallbacks, prev = [], "engine_0"
    for i in range(200):
        name = f"n{i}"
        nodes.append(GraphNode(name, "eager", "aten.view.default" if i % 2 else "aten.foo.default", ((prev, ""),)))
        if i % 2 == 0:
            fallbacks.append(Fallback(name, "aten.foo.default", f"reason {i % 8}"))
        prev = name
    nodes += [
        GraphNode("engine_1", "engine", "engine_1", ((prev, ""),)),
        GraphNode("output", "output", "output", (("engine_1", ""),)),
    ]
    engines = [EngineReport(f"engine_{k}", 3, {"aten.relu.default": 3}, [(1,)], [(1,)], "onnxruntime") for k in (0, 1)]
    report = LoweringReport(0.5, engines, fallbacks, "onnxruntime", graph=nodes)
    dot = draw.to_dot(report)
    drawn = [n.get_name() for n in dot.get_nodes() if n.get_name() not in ("node", "edge")]  # not the defaults
    assert drawn == ['"x"', '"engine_0"', '"n0"', '"engine_1"', '"output"']  # the chain is one block
    text = dot.to_string()
    assert all(f"reason {k}" in text for k in (0, 2, 4, 6)) and "100 eager nodes" in text


def test_progress_bar_only_on_a_terminal(lowered: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    assert lowered[3] == ""  # lowering wrote nothing to a stderr that is not a terminal

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stream, shown in ((Terminal(), True), (io.StringIO(), False)):
        monkeypatch.setattr(sys, "stderr", stream)
        assert list(progress.track(["engine_0", "engine_1"], "building")) == ["engine_0", "engine_1"]
        assert ("building" in stream.getvalue()) == shown


def test_cli_lower_draws_and_bench_runs_the_saved_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(demo_models.MODELS, "tiny", lambda batch: (Split().eval(), (torch.randn(batch, 3, 8, 8),)))
    saved, picture = tmp_path / "tiny.trtl", tmp_path / "split.dot"
    assert (
        cli.main(
            [
                "lower",
                "--model",
                "tiny",
                "--batch",
                "2",
                "--backend",
                "onnxruntime",
                "--fallback-op",
                "aten.sin",
                "-o",
                str(saved),
                "--draw",
                str(picture),
            ]
        )
        == 0
    )
    assert "forced to eager by fallback_ops" in picture.read_text()
    out = tmp_path / "bench.json"
    assert (
        cli.main(
            ["bench", str(saved), "--backend", "onnxruntime", "--iterations", "2", "--warmup", "1", "--json", str(out)]
        )
        == 0
    )
    assert [(r["variant"], r["batch_size"], r["speedup"]) for r in json.loads(out.read_text())["runs"]] == [
        ("lowered", 2, None)
    ]
    assert "lowered (onnxruntime)" in capsys.readouterr().out


def test_cli_bench(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(demo_models.MODELS, "tiny", lambda batch: (Split().eval(), (torch.randn(batch, 3, 8, 8),)))
    out = {k: tmp_path / f"out.{k}" for k in ("json", "png", "html")}
    code = cli.main(
        [
            "bench",
            "--model",
            "tiny",
            "--batch-sizes",
            "2",
            "--backend",
            "onnxruntime",
            "--iterations",
            "2",
            "--warmup",
            "1",
            "--json",
            str(out["json"]),
            "--plot",
            str(out["png"]),
            "--draw",
            str(out["html"]),
        ]
    )
    text = capsys.readouterr().out
    assert code == 0, text
    assert "lowered (onnxruntime)" in text and "vs eager" in text
    assert all(p.stat().st_size > 0 for p in out.values())
    assert {r["variant"] for r in json.loads(out["json"].read_text())["runs"]} == {"eager", "lowered"}
