"""lower_to_trt(..., collectives="engine"): a tensor-parallel model's collectives inside its TensorRT
engine (TensorRT 11's DistCollective layers), on the TensorRT double with 2 gloo ranks standing in
for NCCL (tests/collectives_worker.py), and refused by name where they cannot run: ONNX Runtime,
TensorRT before 11.0, a process group that is not NCCL."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from distributed_workers import launch
from onnx import TensorProto, helper

import trt_lower
from converters.core.target import TrtTarget
from splitter.support import COLLECTIVE_REASON, unsupported_reason
from trt_lower.engine.backend import resolve_backend

MLP = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())


def _ok(outputs: list[str]) -> None:
    for rank, out in enumerate(outputs):
        assert f"ok rank {rank}" in out, out[-4000:]


def test_collectives_run_inside_one_engine(tmp_path: Path) -> None:
    """A colwise-then-rowwise MLP (its all_reduce) and a sequence-parallel block (reduce_scatter,
    all_gather) each lower to one engine holding the collectives, which the engine runs over the
    communicator (gloo here), matching eager on both ranks."""
    _ok(launch("engine", tmp_path, 2, timeout_s=300, script="collectives_worker.py"))


def test_a_process_group_other_than_nccl_is_refused(tmp_path: Path) -> None:
    """gloo without the test's seam is refused by name; an all_reduce over a part of the world
    stays eager, saying why."""
    _ok(launch("nccl", tmp_path, 2, timeout_s=300, script="collectives_worker.py"))


@pytest.mark.parametrize("backend", ["onnxruntime", "auto"])
def test_onnxruntime_is_refused_by_name(backend: str) -> None:
    """Given, or chosen by "auto" where TensorRT is not usable."""
    if backend == "auto" and resolve_backend("auto") == "tensorrt":
        pytest.skip("auto resolves to TensorRT here")
    with pytest.raises(
        trt_lower.InEngineCollectivesError, match="collectives='engine' runs on the tensorrt backend only"
    ):
        trt_lower.lower_to_trt(MLP, (torch.randn(2, 8),), backend=backend, trt_version="11.0", collectives="engine")


@pytest.mark.parametrize("trt_version", ["10.13", "10.4", "latest"])
def test_tensorrt_before_11_is_refused_by_name(trt_version: str) -> None:
    """10.x has no DistCollective layer; "latest" alone (no TensorRT installed) does not say 11."""
    with pytest.raises(trt_lower.InEngineCollectivesError, match="collectives='engine' needs TensorRT 11.0 or newer"):
        trt_lower.lower_to_trt(MLP, (torch.randn(2, 8),), trt_version=trt_version, collectives="engine")


@pytest.mark.parametrize("trt_double", ["10.13.0"], indirect=True)
def test_an_installed_tensorrt_before_11_is_refused_by_name(trt_double: ModuleType) -> None:
    """Lowered for 11.0, the engines could not be built by the TensorRT that is here."""
    with pytest.raises(trt_lower.InEngineCollectivesError, match="the installed TensorRT is 10.13.0"):
        trt_lower.lower_to_trt(MLP, (torch.randn(2, 8),), backend="tensorrt", trt_version="11.0", collectives="engine")


def test_an_unknown_value_is_refused() -> None:
    with pytest.raises(ValueError, match="collectives must be one of \\('eager', 'engine'\\), got 'inside'"):
        trt_lower.lower_to_trt(MLP, (torch.randn(2, 8),), collectives="inside")


def _all_reduce() -> torch.fx.Node:
    graph = torch.fx.Graph()
    node = graph.call_function(torch.ops._c10d_functional.all_reduce.default, (graph.placeholder("x"), "sum", "0"))
    node.meta["val"] = torch.empty(2, 8)
    return node


def test_collectives_stay_eager_unless_asked_for_and_need_a_process_group() -> None:
    node = _all_reduce()
    assert unsupported_reason(node, TrtTarget("latest"), frozenset()) == COLLECTIVE_REASON
    reason = unsupported_reason(node, TrtTarget("latest"), frozenset(), collectives_in_engine=True)
    assert reason == "no torch.distributed process group to resolve its group from"


def test_a_wait_goes_where_its_collective_goes() -> None:
    """Inside an engine only after a collective that is (an engine would read an eager
    collective's tensor before it is done)."""
    node = _all_reduce()
    ops = torch.ops._c10d_functional
    after_collective = node.graph.call_function(ops.wait_tensor.default, (node,))
    alone = node.graph.call_function(ops.wait_tensor.default, (next(iter(node.graph.nodes)),))
    target = TrtTarget("latest")
    assert unsupported_reason(after_collective, target, frozenset(), collectives_in_engine=True) == (
        "no torch.distributed process group to resolve its group from"
    )
    assert unsupported_reason(alone, target, frozenset(), collectives_in_engine=True) == (
        "waits on a tensor no collective inside an engine makes"
    )


def _dist_collective_model() -> bytes:
    graph = helper.make_graph(
        [
            helper.make_node(
                "DistCollective",
                ["x"],
                ["s"],
                name="all_reduce/DistCollective",
                collective_operation="all_reduce",
                reduce_op="sum",
                root=0,
                group_size=2,
                groups=[0, 1],
            ),
            helper.make_node("Relu", ["s"], ["y"], name="relu/Relu"),
        ],
        "engine_0",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )
    return bytes(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    )


def _logger() -> Any:
    return importlib.import_module("trt_lower.runtime.trt_logger").LOGGER


@pytest.mark.parametrize("trt_double", ["10.13.0", "10.15.0"], indirect=True)
def test_the_double_parses_dist_collective_from_11_only(trt_double: ModuleType) -> None:
    """10.15 is of the target "latest" whose support table lists DistCollective: its parser still has none."""
    parser = trt_double.OnnxParser(trt_double.Builder(_logger()).create_network(0), _logger())
    assert not parser.parse(_dist_collective_model())
    assert parser.get_error(0).desc() == "No importer registered for op: DistCollective"
    context = object.__new__(trt_double.IExecutionContext)
    with pytest.raises(AttributeError, match="set_communicator"):
        context.set_communicator(None)


@pytest.mark.parametrize("trt_double", ["11.0.0"], indirect=True)
def test_the_double_runs_dist_collective_only_with_a_communicator(trt_double: ModuleType) -> None:
    from trt_lower.runtime.trt_module import aligned_empty  # binds to the double

    builder = trt_double.Builder(_logger())
    network = builder.create_network(0)
    assert trt_double.OnnxParser(network, _logger()).parse(_dist_collective_model())
    plan = builder.build_serialized_network(network, builder.create_builder_config())
    context = trt_double.Runtime(_logger()).deserialize_cuda_engine(bytes(plan)).create_execution_context()
    for name in ("x", "y"):
        assert context.set_tensor_address(name, aligned_empty((4,), torch.float32, torch.device("cpu")).data_ptr())
    with pytest.raises(TypeError, match="incompatible function arguments"):
        context.set_communicator(0x1000)  # an address, not a capsule
    assert not context.execute_async_v3(0)
    assert "no communicator is set (set_communicator)" in _logger().take_errors()
