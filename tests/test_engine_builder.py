"""The TensorRT engine builder's version branches (8.6 / 10.4 / 11.x), driven through the double,
and the double's own strictness about the API misuse those branches avoid."""

from __future__ import annotations

import importlib
import logging
from types import ModuleType

import onnx
import pytest
from onnx import TensorProto, helper

from trt_lower.engine.build_options import BuildOptions, InputProfile

VERSIONS = ["8.6.1", "10.4.0", "11.0.0"]
PROFILES = [[InputProfile("x", (2, 3), (2, 3), (2, 3))]]


def _onnx(opset: int = 17) -> bytes:
    """x -> Relu -> Identity, named the way GraphBuilder names nodes after their FX node."""
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["relu_relu"], name="relu/Relu"),
            helper.make_node("Identity", ["relu_relu"], ["relu"], name="relu/output"),
        ],
        "engine_0",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("relu", TensorProto.FLOAT, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _builder() -> ModuleType:
    # Imported under the double: the module binds `tensorrt` when it is imported.
    return importlib.import_module("trt_lower.engine.trt_builder")


@pytest.mark.parametrize(
    "trt_double, flags", [("8.6.1", 1 << 0), ("10.4.0", 0), ("11.0.0", 0)], indirect=["trt_double"]
)
def test_network_flags_per_version(trt_double: ModuleType, flags: int) -> None:
    plan, _ = _builder().build_plan(_onnx(), PROFILES, BuildOptions(), b"")
    assert trt_double.state.last_build.network_flags == flags
    logger = importlib.import_module("trt_lower.runtime.trt_logger").LOGGER
    assert trt_double.Runtime(logger).deserialize_cuda_engine(plan) is not None


@pytest.mark.parametrize(
    "trt_double, fp16_flag, network_flags",
    [("8.6.1", True, 1 << 0), ("10.4.0", False, 1 << 1), ("11.0.0", False, 0)],
    indirect=["trt_double"],
)
def test_fp16_is_a_builder_flag_on_8_6_and_strong_typing_after(
    trt_double: ModuleType, fp16_flag: bool, network_flags: int
) -> None:
    """8.6: EXPLICIT_BATCH network + FP16 flag; 10.x: STRONGLY_TYPED network; 11.x: always strong."""
    _builder().build_plan(_onnx(), PROFILES, BuildOptions(precision="fp16"), b"")
    assert bool(trt_double.state.last_build.builder_flags & 1 << 0) == fp16_flag
    assert trt_double.state.last_build.network_flags == network_flags


@pytest.mark.parametrize("trt_double", ["8.6.1"], indirect=True)
def test_a_weakly_typed_fp16_build_with_a_free_float32_layer_fails_on_the_double(
    trt_double: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_builder(), "_pin_float32", lambda network: None)
    with pytest.raises(
        _builder().BuildFailure, match=r"weakly typed fp16 build may run layer 'relu/Relu' \(Relu\) in fp16"
    ):
        _builder().build_plan(_onnx(), PROFILES, BuildOptions(precision="fp16"), b"")


@pytest.mark.parametrize("trt_double", VERSIONS, indirect=True)
def test_workspace_optimization_level_and_profile_reach_the_config(trt_double: ModuleType) -> None:
    _builder().build_plan(_onnx(), PROFILES, BuildOptions(workspace_bytes=1 << 20, optimization_level=5), b"")
    record = trt_double.state.last_build
    assert (record.workspace_bytes, record.optimization_level) == (1 << 20, 5)
    assert record.profiles == [{"x": ((2, 3), (2, 3), (2, 3))}]


def test_profile_that_does_not_fit_the_network_is_a_build_failure(trt_double: ModuleType) -> None:
    with pytest.raises(_builder().BuildFailure, match="profile for 'x' .* does not fit its dims"):
        _builder().build_plan(_onnx(), [[InputProfile("x", (1, 3), (2, 3), (2, 3))]], BuildOptions(), b"")


def test_timing_cache_carries_over_between_builds(trt_double: ModuleType) -> None:
    _, timing = _builder().build_plan(_onnx(), PROFILES, BuildOptions(), b"")
    assert trt_double.state.last_build.timing_cache_entries == 0
    _builder().build_plan(_onnx(), PROFILES, BuildOptions(optimization_level=4), timing)
    assert trt_double.state.last_build.timing_cache_entries == 2
    assert trt_double.state.timing_cache_hits == 2


def test_unreadable_timing_cache_is_replaced_with_a_warning(
    trt_double: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        plan, timing = _builder().build_plan(_onnx(), PROFILES, BuildOptions(), b"garbage")
    assert plan and timing
    assert "TensorRT rejected the saved timing cache (Failed to deserialize the timing cache" in caplog.text


@pytest.mark.parametrize("trt_double", VERSIONS, indirect=True)
def test_parser_error_names_the_onnx_node_and_its_fx_node(trt_double: ModuleType) -> None:
    trt_double.state.unsupported_ops = {"Relu"}
    with pytest.raises(_builder().BuildFailure) as failure:
        _builder().build_plan(_onnx(), PROFILES, BuildOptions(), b"")
    assert failure.value.fx_node == "relu"
    assert failure.value.reason == (
        "its ONNX parser failed: ONNX node 'relu/Relu' (Relu, from FX node 'relu'): No importer registered for op: Relu"
    )


@pytest.mark.parametrize("trt_double, opset", [("8.6.1", 18), ("10.4.0", 21)], indirect=["trt_double"])
def test_opset_above_the_parser_is_a_build_failure(trt_double: ModuleType, opset: int) -> None:
    with pytest.raises(_builder().BuildFailure, match=f"opset {opset} is above"):
        _builder().build_plan(_onnx(opset), PROFILES, BuildOptions(), b"")


def test_failed_build_reports_the_builders_error(trt_double: ModuleType) -> None:
    trt_double.state.build_failure = "out of device memory"
    with pytest.raises(_builder().BuildFailure, match="^Builder: out of device memory$"):
        _builder().build_plan(_onnx(), PROFILES, BuildOptions(), b"")


# -- the double refuses what the version branches exist to avoid ------------------------------------
def _parse(trt: ModuleType, flags: int) -> bool:
    logger = importlib.import_module("trt_lower.runtime.trt_logger").LOGGER
    network = trt.Builder(logger).create_network(flags)
    return bool(trt.OnnxParser(network, logger).parse(_onnx()))


@pytest.mark.parametrize("trt_double", ["8.6.1"], indirect=True)
def test_double_8_6_parser_needs_explicit_batch(trt_double: ModuleType) -> None:
    assert not _parse(trt_double, 0)
    assert _parse(trt_double, 1 << int(trt_double.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    with pytest.raises(AttributeError):
        trt_double.DataType.INT64


@pytest.mark.parametrize("trt_double", ["10.4.0"], indirect=True)
def test_double_10_refuses_explicit_batch(trt_double: ModuleType) -> None:
    with pytest.raises(ValueError, match="create_network\\(0\\)"):
        _parse(trt_double, 1 << int(trt_double.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    assert _parse(trt_double, 0)


@pytest.mark.parametrize("trt_double", ["11.0.0"], indirect=True)
def test_double_11_has_no_explicit_batch_nor_fp16_flag(trt_double: ModuleType) -> None:
    with pytest.raises(AttributeError):
        trt_double.NetworkDefinitionCreationFlag.EXPLICIT_BATCH
    with pytest.raises(AttributeError):
        trt_double.BuilderFlag.FP16
    assert _parse(trt_double, 0)
