"""The TensorRT builder's knobs (optimization level, workspace, tactic sources, timing-cache file),
build progress and build memory: checked as options, carried to the builder config of the TensorRT
double (as strict as TensorRT about them), hashed into the engine cache key, kept in artifacts."""

from __future__ import annotations

import importlib
import json
import logging
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

import trt_lower
from trt_lower.deploy import artifact

VERSIONS = ["8.6.1", "10.13.0", "11.0.0"]


def _model() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).eval()


X = torch.randn(2, 4)


def _lower(model: torch.nn.Module | None = None, **options: Any) -> trt_lower.LoweredModule:
    return trt_lower.lower_to_trt(model or _model(), (X,), backend="tensorrt", verify=False, **options)


# -- options -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "options, message",
    [
        ({"optimization_level": 6}, r"^optimization_level must be an int from 0 to 5 or None .*, got 6$"),
        ({"optimization_level": -1}, r"^optimization_level must be an int from 0 to 5"),
        ({"optimization_level": True}, r"^optimization_level must be an int"),
        ({"optimization_level": "3"}, r"^optimization_level must be an int"),
        ({"workspace_bytes": 0}, r"^workspace_bytes must be a positive int \(bytes\) or None"),
        ({"workspace_bytes": 1.5}, r"^workspace_bytes must be a positive int"),
        ({"tactic_sources": "cublas"}, r"^tactic_sources must be a set of names"),
        ({"tactic_sources": {"cublass", "cudnn"}}, r"^tactic_sources names no TensorRT tactic source: 'cublass'"),
        ({"timing_cache": 3}, r"^timing_cache must be a file path or None, got 3$"),
        ({"timing_cache": ""}, r"^timing_cache must be a file path or None"),
        ({"performance_tuner": True}, r"^performance_tuner=True: trt_lower does not drive TensorRT's Global"),
    ],
)
def test_bad_builder_knobs_are_refused_by_name(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        trt_lower.lower_to_trt(_model(), (X,), backend="onnxruntime", **options)


def test_onnxruntime_warns_that_it_ignores_the_builder_knobs() -> None:
    with pytest.warns(UserWarning, match=r"optimization_level=1, tactic_sources=frozenset\(\) are ignored on the onnx"):
        trt_lower.lower_to_trt(_model(), (X,), backend="onnxruntime", optimization_level=1, tactic_sources=())


# -- the builder config, on the double ---------------------------------------------------------
@pytest.mark.parametrize("trt_double", VERSIONS, indirect=True)
def test_each_knob_reaches_the_builder_config(trt_double: ModuleType) -> None:
    _lower(optimization_level=1, workspace_bytes=1 << 20, tactic_sources={"cublas", "jit_convolutions"})
    record = trt_double.state.last_build
    assert (record.optimization_level, record.workspace_bytes) == (1, 1 << 20)
    assert record.tactic_sources == 1 << 0 | 1 << 4


@pytest.mark.parametrize("trt_double, default", [("8.6.1", 0b11111), ("10.13.0", 0b11000)], indirect=["trt_double"])
def test_unset_knobs_leave_tensorrts_defaults(trt_double: ModuleType, default: int) -> None:
    _lower()
    record = trt_double.state.last_build
    assert (record.optimization_level, record.workspace_bytes, record.tactic_sources) == (3, 4 << 30, default)


def test_the_double_is_as_strict_as_tensorrt_about_the_knobs(trt_double: ModuleType) -> None:
    logger = importlib.import_module("trt_lower.runtime.trt_logger").LOGGER
    config = trt_double.Builder(logger).create_builder_config()
    logger.take_errors()
    config.builder_optimization_level = -1
    assert config.builder_optimization_level == 3 and "level -1 must be >= 0" in logger.take_errors()
    with pytest.raises(TypeError):
        config.set_memory_pool_limit(trt_double.MemoryPoolType.WORKSPACE, -1)
    with pytest.raises(TypeError):
        config.set_memory_pool_limit(0, 1 << 20)  # a MemoryPoolType, not an int
    assert not config.set_tactic_sources(1 << 5) and "invalid tactic sources" in logger.take_errors()
    assert config.set_tactic_sources(0) and config.get_tactic_sources() == 0

    class Unready(trt_double.IProgressMonitor):
        def __init__(self) -> None:  # never calls the base __init__
            pass

    with pytest.raises(TypeError, match="__init__\\(\\) must be called"):
        config.progress_monitor = Unready()


@pytest.mark.parametrize("trt_double", ["8.6.1"], indirect=True)
def test_tensorrt_8_6_has_no_progress_monitor_and_builds_without_one(trt_double: ModuleType) -> None:
    with pytest.raises(AttributeError):
        trt_double.IProgressMonitor
    logger = importlib.import_module("trt_lower.runtime.trt_logger").LOGGER
    with pytest.raises(AttributeError):
        trt_double.Builder(logger).create_builder_config().progress_monitor = None
    _lower()
    assert trt_double.state.builds == 1 and trt_double.state.progress == []


# -- the engine cache key ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "knob, other", [("optimization_level", 4), ("workspace_bytes", 1 << 22), ("tactic_sources", {"cudnn"})]
)
def test_changing_a_knob_changes_the_cache_key(trt_double: ModuleType, knob: str, other: Any) -> None:
    model = _model()
    _lower(model)
    assert _lower(model).report.engines[0].cache_hit and trt_double.state.builds == 1
    assert not _lower(model, **{knob: other}).report.engines[0].cache_hit
    assert trt_double.state.builds == 2
    assert _lower(model, **{knob: other}).report.engines[0].cache_hit and trt_double.state.builds == 2


def test_the_timing_cache_file_is_not_in_the_cache_key(trt_double: ModuleType, tmp_path: Path) -> None:
    model = _model()
    _lower(model)
    assert _lower(model, timing_cache=tmp_path / "timing.cache").report.engines[0].cache_hit


# -- the timing-cache file ---------------------------------------------------------------------
def test_a_timing_cache_file_written_by_one_lowering_is_read_by_the_next(
    trt_double: ModuleType, tmp_path: Path
) -> None:
    path = tmp_path / "shared" / "timing.cache"
    _lower(timing_cache=path)
    assert path.read_bytes().startswith(trt_double.ITimingCache.MAGIC)
    entries = len(json.loads(path.read_bytes()[len(trt_double.ITimingCache.MAGIC) :])["entries"])
    hits = trt_double.state.timing_cache_hits  # layers alike within the first build
    _lower(_model(), timing_cache=path)  # other weights, same layers: another engine, timed already
    assert trt_double.state.builds == 2
    assert trt_double.state.last_build.timing_cache_entries == entries
    assert trt_double.state.timing_cache_hits > hits


def test_without_the_option_the_timings_stay_in_the_engine_cache(trt_double: ModuleType, tmp_path: Path) -> None:
    _lower()
    _lower(_model())
    assert trt_double.state.timing_cache_hits > 0 and not list(tmp_path.glob("*.cache"))


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"not a timing cache", "Failed to deserialize the timing cache"),
        ("other GPU", "made for a device of compute capability 7.0, this one is 8.0"),
        ("other TensorRT", "Failed to deserialize the timing cache"),
    ],
)
def test_a_timing_cache_tensorrt_cannot_use_is_an_error_naming_the_file_and_is_kept(
    trt_double: ModuleType, tmp_path: Path, content: bytes | str, reason: str
) -> None:
    path = tmp_path / "timing.cache"
    if content == "other GPU":
        trt_double.state.compute_capability = "7.0"
    if isinstance(content, str):
        _lower(timing_cache=path)
        trt_double.state.compute_capability = "8.0"
        if content == "other TensorRT":
            trt_double.__version__ = "10.12.0"
    else:
        path.write_bytes(content)
    before = path.read_bytes()
    with pytest.raises(trt_lower.TimingCacheError, match=f"^timing_cache {path}: TensorRT cannot use it .*{reason}"):
        _lower(_model(), timing_cache=path)
    assert path.read_bytes() == before


def test_the_double_takes_another_gpus_timing_cache_when_told_to_ignore_the_mismatch(trt_double: ModuleType) -> None:
    logger = importlib.import_module("trt_lower.runtime.trt_logger").LOGGER
    config = trt_double.Builder(logger).create_builder_config()
    foreign = trt_double.ITimingCache({}, trt_double.__version__, "7.0")
    assert not config.set_timing_cache(foreign, False)
    assert config.set_timing_cache(foreign, True)


def test_an_unwritable_timing_cache_file_costs_a_warning_not_the_build(
    trt_double: ModuleType, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(path: Path, private: bool) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(importlib.import_module("trt_lower.engine.timing_cache_file"), "atomic_file", full)
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        lowered = _lower(timing_cache=tmp_path / "timing.cache")
    assert lowered.report.engines[0].cache_hit is False
    assert "could not write the timing cache" in caplog.text


# -- progress and memory -----------------------------------------------------------------------
def test_build_progress_is_logged_per_engine(trt_double: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="trt_lower"):
        _lower()
    lines = [r.getMessage() for r in caplog.records]
    assert "trt_lower: engine_0: Building engine (1 steps)" in lines
    assert "trt_lower: engine_0:   Tactic selection (6 steps)" in lines  # a step per ONNX node
    assert any(line.startswith("trt_lower: engine_0: Building engine done in ") for line in lines)
    assert [p[0] for p in trt_double.state.progress].count("step") == 6


def test_the_report_has_the_builds_peak_host_memory(trt_double: ModuleType) -> None:
    report = _lower().report
    assert report.build_peak_rss_bytes is not None and report.build_rss_growth_bytes is not None
    assert report.build_peak_rss_bytes > 0 and 0 <= report.build_rss_growth_bytes <= report.build_peak_rss_bytes
    assert report.to_dict()["build_peak_rss_bytes"] == report.build_peak_rss_bytes
    assert "build host memory: peak RSS" in str(report)


def test_peak_memory_sees_native_memory_held_only_during_the_block() -> None:
    """64 MiB that native code allocates and frees inside the block: only the sampling thread sees it."""
    from trt_lower.engine.build_memory import SAMPLE_S, peak_resident

    with peak_resident() as memory:
        block = torch.ones(64 << 20, dtype=torch.uint8)
        deadline = time.monotonic() + 10  # bounded: the sampler runs every SAMPLE_S
        while (memory.peak or 0) - (memory.start or 0) < 48 << 20 and time.monotonic() < deadline:
            time.sleep(SAMPLE_S)
        del block
    assert memory.peak is not None and memory.start is not None
    assert memory.peak - memory.start >= 48 << 20


# -- artifacts ---------------------------------------------------------------------------------
def test_an_artifact_keeps_the_knobs_and_builds_with_them_on_load(trt_double: ModuleType, tmp_path: Path) -> None:
    lowered = _lower(optimization_level=2, tactic_sources={"cudnn"}, timing_cache=tmp_path / "t.cache")
    path = tmp_path / "model.trtl"
    trt_lower.save(lowered, path)
    settings = artifact.read(path).manifest["settings"]
    assert (settings["optimization_level"], settings["tactic_sources"]) == (2, ["cudnn"])
    assert settings["workspace_bytes"] is None and "timing_cache" not in settings
    trt_double.state.compute_capability = "9.0"  # another GPU: the plan does not fit, the engine is built
    trt_lower.load(path, backend="tensorrt")
    assert trt_double.state.last_build.optimization_level == 2
    assert trt_double.state.last_build.tactic_sources == 1 << 2


def test_an_artifact_written_before_the_knobs_loads_with_the_builders_defaults(
    trt_double: ModuleType, tmp_path: Path
) -> None:
    from artifact_tamper import tamper

    path = tmp_path / "model.trtl"
    trt_lower.save(_lower(optimization_level=2), path)

    def older(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
        for knob in ("optimization_level", "workspace_bytes", "tactic_sources"):
            del manifest["settings"][knob]

    trt_double.state.compute_capability = "9.0"  # no fitting plan: built on load
    trt_lower.load(tamper(path, tmp_path / "old.trtl", older), backend="tensorrt")
    assert trt_double.state.last_build.optimization_level == 3


def test_an_artifact_with_a_bad_knob_is_refused_naming_the_field(trt_double: ModuleType, tmp_path: Path) -> None:
    from artifact_tamper import tamper

    path = tmp_path / "model.trtl"
    trt_lower.save(_lower(), path)

    def bad(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
        manifest["settings"]["optimization_level"] = 9

    with pytest.raises(trt_lower.ArtifactError, match=r"settings\.optimization_level.*must be an int from 0 to 5"):
        trt_lower.load(tamper(path, tmp_path / "bad.trtl", bad), backend="tensorrt")


# -- the CLI and lower_causal_lm ---------------------------------------------------------------
def small_model() -> torch.nn.Module:
    """The CLI's MODULE:FACTORY for the test below."""
    return _model()


def test_trt_lower_lower_takes_the_knobs_and_shows_build_progress(
    trt_double: ModuleType, tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    from trt_lower.cli import commands as cli

    timing = tmp_path / "timing.cache"
    argv = ["lower", "test_build_knobs:small_model", "--input", "2x4:float32", "--backend", "tensorrt"]
    knobs = ["--optimization-level", "1", "--workspace-bytes", "1048576", "--tactic-sources", "cudnn,cublas"]
    with caplog.at_level(logging.INFO, logger="trt_lower"):
        code = cli.main([*argv, *knobs, "--timing-cache", str(timing), "-o", str(tmp_path / "m.trtl")])
    assert code == 0, capsys.readouterr().out
    record = trt_double.state.last_build
    assert (record.optimization_level, record.workspace_bytes, record.tactic_sources) == (1, 1 << 20, 0b101)
    assert timing.exists() and "engine_0: Building engine (1 steps)" in caplog.text
    assert cli.main(["info", str(tmp_path / "m.trtl")]) == 0
    assert "'optimization_level': 1" in capsys.readouterr().out


def test_lower_causal_lm_passes_the_knobs_on() -> None:
    transformers = pytest.importorskip("transformers")
    from trt_models import llama_config

    from trt_lower.llm import lower_causal_lm

    model = transformers.LlamaForCausalLM(llama_config()).eval()
    with pytest.raises(ValueError, match="^optimization_level must be an int from 0 to 5"):
        lower_causal_lm(model, max_batch=1, max_length=8, backend="onnxruntime", optimization_level=7)


def test_the_doubles_build_stops_when_the_progress_monitor_says_so(trt_double: ModuleType) -> None:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu/Relu")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    logger = importlib.import_module("trt_lower.runtime.trt_logger").LOGGER
    builder = trt_double.Builder(logger)
    network = builder.create_network(0)
    assert trt_double.OnnxParser(network, logger).parse(model.SerializeToString())

    class Stop(trt_double.IProgressMonitor):
        def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
            pass

        def step_complete(self, phase_name: str, step: int) -> bool:
            return False

        def phase_finish(self, phase_name: str) -> None:
            pass

    config = builder.create_builder_config()
    config.progress_monitor = Stop()
    logger.take_errors()
    assert builder.build_serialized_network(network, config) is None
    assert "cancelled by the IProgressMonitor" in logger.take_errors()
    assert [p[0] for p in trt_double.state.progress] == ["start", "start", "step", "finish", "finish"]


@pytest.mark.parametrize("trt_double", ["11.0.0"], indirect=True)
def test_a_tactic_source_the_installed_tensorrt_lacks_is_refused_by_name(
    trt_double: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every name is in 8.6-11.x's API; a release that drops one (deprecated: cuBLAS) is refused by name."""
    monkeypatch.setattr(trt_double.TacticSource, "_versions", {"CUBLAS": (0, 11)})
    with pytest.raises(ValueError, match=r"^tactic_sources: TensorRT 11\.0\.0 has no tactic source 'cublas'$"):
        _lower(tactic_sources={"cublas", "cudnn"})
    _lower(tactic_sources={"cudnn"})
    assert trt_double.state.last_build.tactic_sources == 1 << 2
