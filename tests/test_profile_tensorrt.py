"""LoweredModule.profile on TensorRT (its double here): rows per engine layer from an IProfiler
set on the execution contexts only while profiling, named by the engine inspector, a fused layer
mapped to all its FX nodes; and the double's IProfiler and engine inspector, as strict as TensorRT."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from onnx import TensorProto, helper

import trt_lower

# trt_lower's TensorRT modules import `tensorrt`: here once the trt_double fixture has made it the double.


def _lowered(trt_double: ModuleType) -> tuple[Any, torch.Tensor]:
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8)).eval()
    return trt_lower.lower_to_trt(model, (x,), backend="tensorrt", min_block_size=1), x


def _profilers(engine: Any) -> list[Any]:
    return [b.context.profiler for b in engine._local.bindings.values()]


def test_rows_are_the_engines_layers_a_fused_one_naming_all_its_fx_nodes(trt_double: ModuleType) -> None:
    lowered, x = _lowered(trt_double)
    engine = lowered.engine_0
    described = json.loads(
        engine.engine.create_engine_inspector().get_engine_information(trt_double.LayerInformationFormat.JSON)
    )
    profile = lowered.profile(x, iterations=2, warmup=1)
    layers = [(layer["Name"], layer["LayerType"]) for layer in described["Layers"]]
    assert [(r.name, r.op) for r in profile.rows] == layers
    assert all(r.kind == "layer" and r.engine == "engine_0" and r.seconds > 0 for r in profile.rows)
    assert sum(r.seconds for r in profile.rows) + profile.glue_seconds == pytest.approx(profile.call_seconds)
    (fused,) = [r for r in profile.rows if " + " in r.name]
    assert [n.node for n in fused.nodes] == ["addmm", "relu"]
    assert fused.nodes[0].source.startswith(f"{torch.nn.modules.linear.__file__}:")
    covered = {n.node for r in profile.rows for n in r.nodes}
    assert covered == set(lowered.segments["engine_0"].nodes)


def test_the_profiler_is_on_the_contexts_only_while_profiling(
    trt_double: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off again after a profile, and after one whose call fails; calls outside it report nothing."""
    lowered, x = _lowered(trt_double)
    engine = lowered.engine_0
    engine.cuda_graphs = True
    lowered(x)
    lowered.profile(x, iterations=1, warmup=0)
    assert _profilers(engine) == [None] and engine.cuda_graphs

    def fails(self: Any, *args: Any) -> Any:
        self.call_module("engine_0", (x,), {})  # the profiled engine runs, then the call fails
        raise RuntimeError("a call that fails")

    with monkeypatch.context() as m:
        m.setattr(torch.fx.Interpreter, "run", fails)
        with pytest.raises(RuntimeError, match="a call that fails"):
            lowered.profile(x, iterations=1, warmup=0)
    assert _profilers(engine) == [None] and engine.cuda_graphs
    torch.testing.assert_close(lowered(x), lowered.lowering.captured.graph_module()(x))


def test_a_saved_engine_is_profiled_per_layer_after_loading(trt_double: ModuleType, tmp_path: Path) -> None:
    lowered, x = _lowered(trt_double)
    trt_lower.save(lowered, tmp_path / "model.trtl")
    profile = trt_lower.load(tmp_path / "model.trtl").profile(x, iterations=1, warmup=0)
    (fused,) = [r for r in profile.rows if " + " in r.name]
    assert [(n.node, bool(n.source)) for n in fused.nodes] == [("addmm", True), ("relu", True)]


def test_plans_are_built_with_detailed_profiling_verbosity(trt_double: ModuleType) -> None:
    lowered, _ = _lowered(trt_double)
    assert lowered.engine_0.engine.profiling_verbosity == trt_double.ProfilingVerbosity.DETAILED


@pytest.mark.parametrize(
    "layer, expected",
    [
        ("addmm/Gemm", ("addmm/Gemm",)),
        ("addmm/Gemm + relu/Relu", ("addmm/Gemm", "relu/Relu")),
        ("PWN(relu/Relu, add/Add)", ("relu/Relu", "add/Add")),
        ("{ForeignNode[addmm/Gemm...add/Add]}", ("addmm/Gemm", "relu/Relu", "add/Add")),
        ("Reformatting CopyNode for Input Tensor 0 to addmm/Gemm", ()),
    ],
)
def test_layer_names_map_to_the_onnx_nodes_tensorrt_named_them_after(
    trt_double: ModuleType, layer: str, expected: tuple[str, ...]
) -> None:
    from trt_lower.profile.trt_layers import onnx_nodes

    order = ["t/Transpose", "addmm/Gemm", "relu/Relu", "add/Add"]
    assert onnx_nodes(layer, order) == expected


def test_without_the_onnx_graph_a_region_names_its_ends(trt_double: ModuleType) -> None:
    from trt_lower.profile.trt_layers import onnx_nodes

    assert onnx_nodes("{ForeignNode[a/MatMul...b/Add]}", []) == ("a/MatMul", "b/Add")


# -- the double --------------------------------------------------------------------------------
def _matmul_relu() -> bytes:
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["h"], name="mm/MatMul"),
            helper.make_node("Relu", ["h"], ["y"], name="relu/Relu"),
        ],
        "engine_0",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor("w", TensorProto.FLOAT, [2, 2], [1.0, 0.0, 0.0, 1.0])],
    )
    return bytes(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    )


def _built(trt: ModuleType, verbosity: str | None) -> Any:
    """The engine of _matmul_relu built with `verbosity` (None: TensorRT's default)."""
    from trt_lower.runtime.trt_logger import LOGGER

    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    assert trt.OnnxParser(network, LOGGER).parse(_matmul_relu())
    config = builder.create_builder_config()
    if verbosity is not None:
        config.profiling_verbosity = getattr(trt.ProfilingVerbosity, verbosity)
    return trt.Runtime(LOGGER).deserialize_cuda_engine(bytes(builder.build_serialized_network(network, config)))


@pytest.mark.parametrize(
    "verbosity, layers",
    [
        (
            "DETAILED",
            [{"Name": "mm/MatMul + relu/Relu", "LayerType": "MatMul", "Inputs": ["x", "w"], "Outputs": ["y"]}],
        ),
        (None, ["mm/MatMul + relu/Relu"]),
        ("NONE", None),
    ],
)
def test_the_inspector_describes_layers_as_the_engine_was_built_to(
    trt_double: ModuleType, verbosity: str | None, layers: Any
) -> None:
    engine = _built(trt_double, verbosity)
    inspector = engine.create_engine_inspector()
    described = json.loads(inspector.get_engine_information(trt_double.LayerInformationFormat.JSON))
    assert described.get("Layers") == layers
    if layers:
        assert json.loads(inspector.get_layer_information(0, trt_double.LayerInformationFormat.JSON)) == layers[0]
    assert inspector.get_layer_information(1, trt_double.LayerInformationFormat.JSON) == ""
    with pytest.raises(TypeError):
        inspector.get_engine_information(1)  # pybind11 takes the enum, not its value


def test_a_profiler_must_be_an_initialised_iprofiler(trt_double: ModuleType) -> None:
    context = _built(trt_double, "DETAILED").create_execution_context()

    # A subclass whose __init__ skips IProfiler's: pybind11 has no trampoline for it.
    uninitialised = type("Uninitialised", (trt_double.IProfiler,), {"__init__": lambda self: None})()

    with pytest.raises(TypeError):
        context.profiler = uninitialised
    with pytest.raises(TypeError):
        context.profiler = object()
    assert context.profiler is None


def test_an_enqueue_reports_each_layer_once_and_not_inside_a_capture(trt_double: ModuleType) -> None:
    from trt_lower.runtime.trt_module import aligned_empty

    context = _built(trt_double, "DETAILED").create_execution_context()
    x, y = (aligned_empty((2, 2), torch.float32, torch.device("cpu")) for _ in range(2))
    x.copy_(torch.tensor([[1.0, -2.0], [-3.0, 4.0]]))
    assert context.set_tensor_address("x", x.data_ptr()) and context.set_tensor_address("y", y.data_ptr())
    reports: list[tuple[str, float]] = []
    recorder = type(
        "Recorder", (trt_double.IProfiler,), {"report_layer_time": lambda self, name, ms: reports.append((name, ms))}
    )()
    context.profiler = recorder
    stream = trt_double.create_stream(trt_double.get_device())
    assert context.execute_async_v3(stream) and context.execute_async_v3(stream)
    assert [name for name, _ in reports] == ["mm/MatMul + relu/Relu"] * 2 and all(ms > 0 for _, ms in reports)
    torch.testing.assert_close(y, torch.relu(x))  # the enqueue ran the engine before reporting
    trt_double.begin_capture(stream)
    assert not context.execute_async_v3(stream)
    trt_double.end_capture(stream)
