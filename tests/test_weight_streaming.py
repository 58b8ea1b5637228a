"""Weight streaming: lower_to_trt(..., weight_streaming=True) builds streamable TensorRT engines
(BuilderFlag.WEIGHT_STREAMING on a strongly typed network) and lowered.weight_streaming_budget
sets how much of their weights stays on the GPU; on the TensorRT double at 10.0 (the first budget
API), 10.13 and 11.x (the second), refused for 8.6, ignored on ONNX Runtime."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from test_refit import _Logger

import trt_lower
from trt_lower.runtime.engine_module import EngineModule
from trt_lower.runtime.streaming_budget import engine_budgets

STREAMING_FLAG = 1 << 21  # BuilderFlag.WEIGHT_STREAMING's bit
STRONGLY_TYPED = 1 << 1  # NetworkDefinitionCreationFlag.STRONGLY_TYPED's bit
X = torch.randn(2, 64)


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).eval()


def _lower(model: torch.nn.Module, **kwargs: Any) -> trt_lower.LoweredModule:
    return trt_lower.lower_to_trt(model, (X,), backend="tensorrt", **{"weight_streaming": True, **kwargs})


def _streamable(lowered: torch.nn.Module) -> int:
    engine = lowered.get_submodule("engine_0")
    assert isinstance(engine, EngineModule)
    return engine.streamable_bytes


def _matches(lowered: torch.nn.Module, model: torch.nn.Module) -> None:
    with torch.no_grad():
        torch.testing.assert_close(lowered(X), model(X))


@pytest.mark.parametrize("trt_double", ["10.13.0", "11.2.0"], indirect=True)
def test_streamable_engines_are_built_and_budgeted(trt_double: ModuleType) -> None:
    model = _model()
    lowered = _lower(model)
    build = trt_double.state.last_build
    assert build is not None and build.builder_flags & STREAMING_FLAG
    # 10.x streams strongly typed networks only (fp32 here); 11.x types every network strongly.
    assert bool(build.network_flags & STRONGLY_TYPED) == trt_double.__version__.startswith("10.")
    size = _streamable(lowered)
    assert size == (64 * 64 + 8 * 64) * 4 and [e.streamable_bytes for e in lowered.report.engines] == [size]
    assert f"weight streaming: {size} bytes streamable" in str(lowered.report)
    assert lowered.weight_streaming_budget == size // 2  # the double's automatic budget, set before any context
    _matches(lowered, model)  # a context is alive: the budget can change only by making contexts again
    for budget, expected in ((0.25, size // 4), (0, 0), (10**12, size), ("auto", size // 2), (1000, 1000)):
        lowered.weight_streaming_budget = budget
        assert lowered.weight_streaming_budget == expected, budget
        _matches(lowered, model)


@pytest.mark.parametrize("budget", [-1, 1.5, float("nan"), "half", True, None])
def test_a_budget_that_is_none_is_refused_by_name(trt_double: ModuleType, budget: Any) -> None:
    lowered = _lower(_model())
    with pytest.raises(trt_lower.WeightStreamingError, match="weight_streaming_budget must be bytes"):
        lowered.weight_streaming_budget = budget


def test_a_module_without_streamable_engines_refuses_a_budget(trt_double: ModuleType) -> None:
    lowered = _lower(_model(), weight_streaming=False)
    assert not trt_double.state.last_build.builder_flags & STREAMING_FLAG
    assert lowered.report.engines[0].streamable_bytes == 0
    with pytest.raises(trt_lower.WeightStreamingError, match="no engine of this module has streamable weights"):
        lowered.weight_streaming_budget = 0.5


@pytest.mark.parametrize("trt_double", ["10.0.1"], indirect=True)
def test_tensorrt_10_0_takes_the_first_budget_api(trt_double: ModuleType) -> None:
    model = _model()
    lowered = _lower(model)
    size = _streamable(lowered)
    assert lowered.weight_streaming_budget is None  # 0: TensorRT chooses
    lowered.weight_streaming_budget = 1.0
    assert lowered.weight_streaming_budget == size  # -1: nothing streams
    lowered.weight_streaming_budget = 64 * 64 * 4  # 10.0's minimum: the largest weight
    assert lowered.weight_streaming_budget == 64 * 64 * 4
    with pytest.raises(trt_lower.WeightStreamingError, match=r"engine_0: .*refused .* 100 \(its minimum: 16384\)"):
        lowered.weight_streaming_budget = 100
    _matches(lowered, model)  # the refused budget left the engine with contexts again


def test_the_flag_is_in_the_cache_key(trt_double: ModuleType) -> None:
    model = _model()
    _lower(model, weight_streaming=False)
    streaming = _lower(model)
    assert [e.cache_hit for e in streaming.report.engines] == [False] and trt_double.state.builds == 2
    assert _streamable(_lower(model)) and trt_double.state.builds == 2


def test_the_artifact_keeps_streaming(trt_double: ModuleType, tmp_path: Path) -> None:
    model = _model()
    lowered = _lower(model)
    trt_lower.save(lowered, tmp_path / "m.trtl")
    loaded = trt_lower.load(tmp_path / "m.trtl", backend="tensorrt")
    size = _streamable(lowered)
    assert _streamable(loaded) == size and loaded.report.engines[0].streamable_bytes == size
    loaded.weight_streaming_budget = 0.5
    assert loaded.weight_streaming_budget == size // 2
    _matches(loaded, model)
    # Saved again, the loaded module keeps the setting its engines are built with on a rebuild.
    trt_lower.save(loaded, tmp_path / "again.trtl")
    settings = trt_lower.deploy.artifact._loaded[trt_lower.load(tmp_path / "again.trtl", backend="tensorrt")]
    assert settings.settings["weight_streaming"] is True


def test_tensorrt_8_6_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"weight_streaming=True needs TensorRT 10.0 or newer .* trt_version='8.6'"):
        trt_lower.lower_to_trt(_model(), (X,), trt_version="8.6", weight_streaming=True)


def test_a_flag_that_is_no_bool_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="weight_streaming must be True or False, got 'yes'"):
        trt_lower.lower_to_trt(_model(), (X,), weight_streaming="yes")  # type: ignore[arg-type]


def test_onnxruntime_warns_that_it_is_ignored() -> None:
    with pytest.warns(UserWarning, match="weight_streaming=True is ignored on the onnxruntime backend"):
        lowered = trt_lower.lower_to_trt(_model(), (X,), backend="onnxruntime", weight_streaming=True, verify=False)
    with pytest.raises(trt_lower.WeightStreamingError, match="no engine of this module has streamable weights"):
        lowered.weight_streaming_budget = "auto"


def test_a_byte_budget_is_shared_in_proportion() -> None:
    assert engine_budgets(300, [100, 200]) == [100, 200]
    assert engine_budgets(150, [100, 200]) == [50, 100]
    assert engine_budgets(0.5, [101, 200]) == [50, 100]
    assert engine_budgets("auto", [1, 2]) == [None, None]


# -- the double, as strict as TensorRT ---------------------------------------------------------
def _engine(trt: ModuleType, streaming: bool, strongly_typed: bool = True) -> Any:
    """A deserialized engine of y = x @ W (W 4x4), built with WEIGHT_STREAMING or not."""
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(torch.ones(4, 4).numpy(), "w")],
    )
    logger = _Logger(trt)
    builder = trt.Builder(logger)
    flags = 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED) if strongly_typed else 0
    network = builder.create_network(flags)
    assert trt.OnnxParser(network, logger).parse(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    )
    config = builder.create_builder_config()
    if streaming:
        config.set_flag(trt.BuilderFlag.WEIGHT_STREAMING)
    plan = builder.build_serialized_network(network, config)
    if not plan:
        return None, logger
    return trt.Runtime(logger).deserialize_cuda_engine(bytes(plan)), logger


def test_the_double_streams_strongly_typed_networks_only(trt_double: ModuleType) -> None:
    engine, logger = _engine(trt_double, streaming=True, strongly_typed=False)
    assert engine is None and "WEIGHT_STREAMING needs a strongly typed network" in logger.errors[-1]


@pytest.mark.parametrize("trt_double", ["8.6.1"], indirect=True)
def test_the_doubles_8_6_has_no_streaming_flag(trt_double: ModuleType) -> None:
    with pytest.raises(AttributeError, match="WEIGHT_STREAMING"):
        trt_double.BuilderFlag.WEIGHT_STREAMING


def test_the_doubles_budget_is_refused_where_tensorrt_refuses_it(trt_double: ModuleType) -> None:
    engine, logger = _engine(trt_double, streaming=True)
    assert engine.streamable_weights_size == 64
    engine.weight_streaming_budget_v2 = -1
    assert "is negative" in logger.errors[-1] and engine.weight_streaming_budget_v2 == 64
    context = engine.create_execution_context()
    engine.weight_streaming_budget_v2 = 32
    assert "while execution contexts" in logger.errors[-1] and engine.weight_streaming_budget_v2 == 64
    del context
    engine.weight_streaming_budget_v2 = 32
    assert engine.weight_streaming_budget_v2 == 32 and engine.weight_streaming_scratch_memory_size == 64
    engine.weight_streaming_budget = 0
    assert "mixing the V1 and V2" in logger.errors[-1]
    plain, logger = _engine(trt_double, streaming=False)
    assert plain.streamable_weights_size == 0
    plain.weight_streaming_budget_v2 = 0
    assert "not built with BuilderFlag::kWEIGHT_STREAMING" in logger.errors[-1]


@pytest.mark.parametrize("trt_double", ["10.0.1", "11.2.0"], indirect=True)
def test_the_doubles_budget_apis_follow_the_version(trt_double: ModuleType) -> None:
    engine, logger = _engine(trt_double, streaming=True, strongly_typed=trt_double.__version__.startswith("10."))
    first, second = ("weight_streaming_budget", "weight_streaming_budget_v2")
    missing = second if trt_double.__version__.startswith("10.") else first
    with pytest.raises(AttributeError, match=missing):
        getattr(engine, missing)
    if missing == second:  # 10.0: -1, 0 or [minimum, size - 1]
        engine.weight_streaming_budget = 8
        assert "neither -1, 0 nor in [64, 63]" in logger.errors[-1]
