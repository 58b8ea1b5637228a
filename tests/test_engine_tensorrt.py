"""backend="tensorrt" end to end — build, cache, deserialize, run, stitch — against the TensorRT
double (tests/trt_double) with tensors on the CPU, compared with eager PyTorch."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import pytest
import torch
from harness import Fn
from trt_double import PATH as DOUBLE_PATH
from trt_double.activate import trt_double as use_trt_double
from trt_double.device import HostDevice
from trt_models import MODELS, lower_and_check

import trt_lower
from trt_lower.engine import backend
from trt_lower.engine.cache import MAGIC, EngineCache, Key
from trt_lower.values import device

TESTS = Path(__file__).resolve().parent


class ConvHead(torch.nn.Module):
    """conv/relu/add then linear/sigmoid: one engine, or two with relu kept eager."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.lin = torch.nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x)) + 1.0
        return torch.sigmoid(self.lin(y)) * 2.0


def _small() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    return ConvHead().eval(), (torch.randn(2, 3, 8, 8),)


def _lower(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], **kwargs: Any) -> trt_lower.LoweredModule:
    lowered = trt_lower.lower_to_trt(model, inputs, backend="tensorrt", **kwargs)
    with torch.no_grad():
        torch.testing.assert_close(lowered(*inputs), model(*inputs))
    return lowered


# -- real models, cold and warm cache ----------------------------------------------------------
@pytest.fixture(scope="module")
def cold(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, trt_lower.LoweredModule], int]:
    """resnet18 and BERT lowered on TensorRT 10.4 (the double) into an empty engine cache."""
    cache = tmp_path_factory.mktemp("engines")
    with use_trt_double("10.4.0", cache) as double:
        lowered = {name: lower_and_check(name) for name in MODELS}
        builds = double.state.builds
    return cache, lowered, builds


def test_resnet18_and_bert_run_as_tensorrt_engines(cold: tuple[Path, dict[str, trt_lower.LoweredModule], int]) -> None:
    _, lowered, builds = cold  # lower_and_check compared each with eager
    for name, module in lowered.items():
        report = module.report
        assert report.backend == "tensorrt" and len(report.engines) == 1, str(report)
        assert report.coverage >= 0.95, str(report)
        assert type(module.engine_0).__name__ == "TRTEngineModule"
        assert [e.cache_hit for e in report.engines] == [False]
        assert "[tensorrt, built]" in str(report)
    assert builds == 2
    out = lowered["bert"](*MODELS["bert"]()[1])
    assert set(out.keys()) == {"last_hidden_state", "pooler_output"}


def test_second_lowering_in_a_fresh_process_is_all_cache_hits(
    cold: tuple[Path, dict[str, trt_lower.LoweredModule], int],
) -> None:
    cache, _, _ = cold
    path = [str(DOUBLE_PATH), str(TESTS), str(TESTS.parent), os.environ.get("PYTHONPATH", "")]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(path),
        "TRT_DOUBLE_VERSION": "10.4.0",
        "TRT_LOWER_CACHE_DIR": str(cache),
    }
    done = subprocess.run(
        [sys.executable, str(TESTS / "trt_models.py"), *MODELS], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"resnet18": [True], "bert": [True], "builds": 0}


@pytest.mark.parametrize("trt_double", ["8.6.1"], indirect=True)
def test_bert_on_tensorrt_8_6_runs_its_int64_input_as_int32(trt_double: ModuleType) -> None:
    lowered = lower_and_check("bert")
    engine = lowered.engine_0
    assert engine._engine.get_tensor_dtype("input_ids").name == "INT32"
    assert trt_double.state.last_build.network_flags == 1 << 0  # EXPLICIT_BATCH


@pytest.mark.parametrize("trt_double, engine_dtype", [("8.6.1", "INT32"), ("10.4.0", "INT64")], indirect=["trt_double"])
def test_int64_io_is_cast_at_the_engine_boundary_per_version(trt_double: ModuleType, engine_dtype: str) -> None:
    model, ids = Fn(lambda x: x * 3 + 1), (torch.arange(12).reshape(3, 4),)
    lowered = _lower(model, ids, min_block_size=1)
    engine = lowered.engine_0
    assert {engine._engine.get_tensor_dtype(s.name).name for s in engine.inputs + engine.outputs} == {engine_dtype}
    assert lowered(*ids).dtype == torch.int64


# -- engine cache ------------------------------------------------------------------------------
def test_warm_cache_builds_nothing_and_the_report_says_cache_hit(
    trt_double: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    model, inputs = _small()
    with caplog.at_level(logging.INFO, logger="trt_lower"):
        cold = _lower(model, inputs, fallback_ops=["aten.relu.default"], min_block_size=1)
    assert [e.cache_hit for e in cold.report.engines] == [False, False]
    info = [r.getMessage() for r in caplog.records if r.name == "trt_lower" and r.levelno == logging.INFO]
    progress = [line for line in info if "TensorRT engine" in line]  # not the build's phases (test_build_knobs.py)
    assert len(progress) == 4
    for engine, start, done in zip(("engine_0", "engine_1"), progress[::2], progress[1::2]):
        assert start == f"trt_lower: {engine}: building TensorRT engine (TensorRT 10.13.0, trt_double host) ..."
        assert re.fullmatch(
            rf"trt_lower: {engine}: built TensorRT engine in \d+\.\d s, host memory peak \+\d+ MiB", done
        )
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="trt_lower"):
        warm = _lower(model, inputs, fallback_ops=["aten.relu.default"], min_block_size=1)
    assert [e.cache_hit for e in warm.report.engines] == [True, True]
    assert str(warm.report).count("[tensorrt, cache hit]") == 2
    assert caplog.text.count("TensorRT engine loaded from cache") == 2
    assert trt_double.state.builds == 2


def test_cache_dir_option_wins_over_the_environment(trt_double: ModuleType, tmp_path: Path) -> None:
    model, inputs = _small()
    _lower(model, inputs, cache_dir=tmp_path / "mine")
    assert len(list((tmp_path / "mine").glob("*.engine"))) == 1
    assert not Path(os.environ["TRT_LOWER_CACHE_DIR"]).exists()


def _header(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    start = len(MAGIC) + 4
    header: dict[str, Any] = json.loads(data[start : start + int.from_bytes(data[len(MAGIC) : start], "big")])
    return header


def _rewrite_header(path: Path, **changes: object) -> None:
    data = path.read_bytes()
    start = len(MAGIC) + 4
    length = int.from_bytes(data[len(MAGIC) : start], "big")
    header = {**_header(path), **changes}
    encoded = json.dumps(header).encode()
    path.write_bytes(MAGIC + len(encoded).to_bytes(4, "big") + encoded + data[start + length :])


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-100])


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-50] ^= 0xFF
    path.write_bytes(bytes(data))


def _foreign_version(path: Path) -> None:
    _rewrite_header(path, tensorrt="8.6.1")


def _not_a_plan(path: Path) -> None:
    # A well-formed entry whose payload TensorRT cannot deserialize.
    EngineCache(path.parent, "10.13.0", HostDevice().identity()).store(
        Key(**_header(path)["built_from"]), b"not a plan"
    )


@pytest.mark.parametrize(
    "damage, why",
    [
        (_truncate, "truncated"),
        (_flip_a_byte, "checksum mismatch"),
        (_foreign_version, "its tensorrt is '8.6.1', expected '10.13.0'"),
        (_not_a_plan, "TensorRT could not load it"),
    ],
)
def test_damaged_cache_entry_is_discarded_and_rebuilt_with_a_warning(
    trt_double: ModuleType, caplog: pytest.LogCaptureFixture, damage: Callable[[Path], None], why: str
) -> None:
    model, inputs = _small()
    _lower(model, inputs)
    (entry,) = Path(os.environ["TRT_LOWER_CACHE_DIR"]).glob("*.engine")
    damage(entry)
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        rebuilt = _lower(model, inputs)
    assert [e.cache_hit for e in rebuilt.report.engines] == [False]
    assert f"discarding cache entry {entry}" in caplog.text and why in caplog.text
    assert trt_double.state.builds == 2
    assert [e.cache_hit for e in _lower(model, inputs).report.engines] == [True]


# -- build failures ----------------------------------------------------------------------------
def test_node_the_parser_rejects_runs_eagerly_with_a_warning(
    trt_double: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    trt_double.state.unsupported_ops = {"Sigmoid"}
    model, inputs = _small()
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        lowered = _lower(model, inputs, min_block_size=1)
    (fallback,) = lowered.report.fallbacks
    assert fallback.op == "aten.sigmoid.default"
    assert "ONNX node 'sigmoid/Sigmoid' (Sigmoid, from FX node 'sigmoid')" in fallback.reason
    assert "No importer registered for op: Sigmoid" in fallback.reason
    assert "TensorRT could not build engine_0" in caplog.text and "running node sigmoid in eager" in caplog.text
    assert len(lowered.report.engines) == 2  # what surrounds the sigmoid still runs in engines


def test_segment_that_fails_to_build_runs_eagerly_with_a_warning(
    trt_double: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    trt_double.state.build_failure = "out of device memory"
    model, inputs = _small()
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        lowered = _lower(model, inputs)
    assert lowered.report.engines == [] and lowered.report.coverage == 0.0
    assert all("out of device memory" in f.reason for f in lowered.report.fallbacks)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "TensorRT could not build engine_0: Builder: out of device memory" in warnings[0]


def test_build_failure_raises_under_require_full(trt_double: ModuleType) -> None:
    trt_double.state.build_failure = "out of device memory"
    model, inputs = _small()
    with pytest.raises(
        trt_lower.UnsupportedOpsError, match="TensorRT could not build engine_0: .*out of device memory"
    ):
        trt_lower.lower_to_trt(model, inputs, backend="tensorrt", require_full=True)


def test_tensorrt_that_cannot_start_cuda_leaves_auto_on_onnxruntime(
    trt_double: ModuleType, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver older than the wheel's CUDA: TensorRT imports, its Runtime and Builder do not construct."""
    trt_double.state.cuda_failure = "CUDA initialization failure with error: 35"
    monkeypatch.setattr(backend, "_warned_unusable", set())  # as in a fresh process
    model, inputs = _small()
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        for _ in range(2):
            lowered = trt_lower.lower_to_trt(model, inputs)
            assert lowered.report.backend == "onnxruntime"
            torch.testing.assert_close(lowered(*inputs), model(*inputs))
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "trt_lower"]
    assert (
        "TensorRT is not usable (TensorRT 10.13.0 imports but cannot start CUDA (CUDA initialization "
        "failure with error: 35)" in warning
    )
    with pytest.raises(
        RuntimeError,
        match=r"backend='tensorrt' cannot run here: TensorRT 10.13.0 imports but "
        r"cannot start CUDA \(CUDA initialization failure with error: 35\)",
    ):
        trt_lower.lower_to_trt(model, inputs, backend="tensorrt")


def test_a_builder_that_cannot_be_created_leaves_the_segment_eager(
    trt_double: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    def null_builder(logger: Any) -> None:
        logger.log(trt_double.ILogger.Severity.ERROR, "Unable to load library: libnvinfer_builder_resource.so")
        raise TypeError("pybind11::init(): factory function returned nullptr")

    monkeypatch.setattr(trt_double, "Builder", null_builder)
    model, inputs = _small()
    lowered = _lower(model, inputs)
    assert lowered.report.engines == [] and lowered.report.fallbacks
    assert all("its Builder could not be created (Unable to load library" in f.reason for f in lowered.report.fallbacks)


def test_a_runtime_that_comes_back_empty_is_no_tensorrt(
    trt_double: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trt_double, "Runtime", lambda logger: None)
    model, inputs = _small()
    with pytest.raises(RuntimeError, match="cannot start CUDA \\(its Runtime came back empty\\)"):
        trt_lower.lower_to_trt(model, inputs, backend="tensorrt")


# -- calls -------------------------------------------------------------------------------------
def test_engine_called_alone_names_input_shape_and_range(trt_double: ModuleType) -> None:
    model, inputs = _small()
    lowered = _lower(model, inputs)
    with pytest.raises(
        trt_lower.EngineInputError,
        match=r"engine_0: input '\w+' was lowered for \(2, 3, 8, 8\) float32, got \(1, 3, 8, 8\)",
    ):
        lowered.engine_0(torch.randn(1, 3, 8, 8))


def test_cpu_tensor_handed_to_a_gpu_engine_is_a_clear_error(trt_double: ModuleType) -> None:
    model, inputs = _small()
    with device.using(HostDevice("cuda:0")):  # pretend: the engine's I/O lives on a GPU
        # verify=False: no tensor can be moved to the pretended GPU to check the engine with.
        lowered = trt_lower.lower_to_trt(model, inputs, backend="tensorrt", verify=False)
    with pytest.raises(trt_lower.EngineInputError, match=r"is on cpu, the engine runs on cuda:0; move the model"):
        lowered(*inputs)
    assert trt_double.state.executions == 0  # refused before TensorRT saw a host pointer


def test_cuda_graphs_capture_once_and_replay(trt_double: ModuleType) -> None:
    model, inputs = _small()
    lowered = _lower(model, inputs, cuda_graphs=True)
    given = inputs[0].clone()
    first = lowered(*inputs)
    other = (torch.randn(2, 3, 8, 8),)
    torch.testing.assert_close(lowered(*other), model(*other))
    torch.testing.assert_close(first, model(*inputs))  # not overwritten by the later replay
    assert torch.equal(inputs[0], given)  # the graph's input buffers are its own
    captures = device.current()
    assert isinstance(captures, HostDevice) and captures.captures == 1


# -- backend selection -------------------------------------------------------------------------
def test_auto_backend_picks_tensorrt_when_usable(trt_double: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    model, inputs = _small()
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        lowered = trt_lower.lower_to_trt(model, inputs)
    assert lowered.report.backend == "tensorrt" and not caplog.records


def test_tensorrt_backend_without_tensorrt_names_module_and_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # A host device stands in for the GPU; there is no TensorRT (whatever this machine has).
    monkeypatch.setitem(sys.modules, "tensorrt", None)
    with device.using(HostDevice()), pytest.raises(RuntimeError, match=r"`tensorrt` module.*pip install"):
        trt_lower.lower_to_trt(*_small(), backend="tensorrt")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"cache_dir": 3}, "cache_dir must be a path or None, got int"),
        ({"cuda_graphs": "yes"}, "cuda_graphs must be True or False, got 'yes'"),
    ],
)
def test_bad_engine_options_are_named(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        trt_lower.lower_to_trt(torch.nn.ReLU(), (torch.ones(1),), backend="onnxruntime", **kwargs)
