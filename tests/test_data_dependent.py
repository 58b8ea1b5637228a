"""Sizes the data decides (nonzero, x[mask]) inside engines: on ONNX Runtime, and on the TensorRT
double, where such engine outputs need an IOutputAllocator."""

from __future__ import annotations

import importlib
import logging
from types import ModuleType
from typing import Any, Callable, Sequence

import pytest
import torch
from harness import Fn, engine_ops, lower_and_compare
from onnx import TensorProto, helper

import trt_lower
from converters.passes import trt_support

aten = torch.ops.aten
X = torch.randn(3, 4)
MASK = X > 0
NONE = torch.zeros(3, 4, dtype=torch.bool)


def _masked(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    return x[m] * 2


def _nonzero_and_sum(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.nonzero(x > 0.5), x.sum()


def _inner(x: torch.Tensor) -> torch.Tensor:
    # The selected count flows on inside the engine: no engine output is sized by the data.
    return x[x > 0].exp().sum() + torch.nonzero(x).float().mean()


@pytest.mark.parametrize(
    ("fn", "inputs", "op"),
    [
        (lambda x: torch.nonzero(x), (X,), aten.nonzero.default),
        (lambda x: torch.nonzero(x > 0), (X,), aten.nonzero.default),
        (lambda x: torch.nonzero(x), (torch.tensor([0, 3, 0, -2]),), aten.nonzero.default),
        (lambda x: torch.nonzero(x), (torch.tensor(1.5),), aten.nonzero.default),
        (_masked, (X, MASK), aten.index.Tensor),
        (_masked, (X, NONE), aten.index.Tensor),
        (lambda x, m: x[:, m], (torch.randn(2, 3, 4), MASK), aten.index.Tensor),
        (lambda x, m: x[m], (torch.randn(3, 4, 2), MASK), aten.index.Tensor),
        (_inner, (X,), aten.index.Tensor),
    ],
    ids=[
        "nonzero",
        "nonzero-bool",
        "nonzero-int",
        "nonzero-0d",
        "mask",
        "mask-all-false",
        "mask-middle",
        "mask-leading",
        "inner",
    ],
)
def test_data_dependent_ops_run_in_engines_on_onnxruntime(
    fn: Callable[..., Any], inputs: Sequence[torch.Tensor], op: Any
) -> None:
    lowered = lower_and_compare(fn, inputs, ops=[op])
    assert len(lowered.report.engines) == 1


def test_a_mask_over_a_dynamic_batch_on_onnxruntime() -> None:
    spec = trt_lower.TensorSpec((1, 4), (3, 4), (8, 4))
    model = Fn(lambda x: x[x > 0].exp())
    lowered = trt_lower.lower_to_trt(model, (spec,), backend="onnxruntime", require_full=True, min_block_size=1)
    for x in (torch.randn(5, 4), torch.randn(1, 4), -torch.rand(2, 4)):
        torch.testing.assert_close(lowered(x), model(x))
    assert lowered.report.engines[0].output_shapes == [(-1,)]


def _on_double(fn: Callable[..., Any], inputs: Sequence[torch.Tensor], **kwargs: Any) -> trt_lower.LoweredModule:
    model = Fn(fn)
    kwargs.setdefault("verify", False)  # the tests count the calls' own allocator requests
    lowered = trt_lower.lower_to_trt(model, inputs, backend="tensorrt", require_full=True, min_block_size=1, **kwargs)
    torch.testing.assert_close(lowered(*inputs), model(*inputs))
    return lowered


@pytest.mark.parametrize("trt_double", ["8.6.1", "10.13.0"], indirect=True)
def test_data_dependent_outputs_are_served_by_an_output_allocator(trt_double: ModuleType) -> None:
    lowered = _on_double(_masked, (X, MASK))
    assert "aten.index.Tensor" in engine_ops(lowered)
    state = trt_double.state
    assert (state.output_reallocations, state.shape_notifications, state.executions) == (1, 1, 1)
    for mask in (NONE, ~NONE):  # empty, then all of it
        torch.testing.assert_close(lowered(X, mask), _masked(X, mask))
    assert (state.output_reallocations, state.shape_notifications) == (3, 3)

    lowered = _on_double(_nonzero_and_sum, (X,))  # beside an output of fixed shape
    assert "aten.nonzero.default" in engine_ops(lowered)
    assert lowered.report.engines[0].output_shapes == [(-1, 2), ()]
    assert state.output_reallocations == 4
    _on_double(torch.nonzero, (torch.tensor(0.0),))  # no rows of no coordinates: (0, 0)
    assert state.output_reallocations == 5


@pytest.mark.parametrize(
    ("trt_double", "first"),
    [("8.6.1", "reallocate_output"), ("10.13.0", "reallocate_output_async")],
    indirect=["trt_double"],
)
def test_tensorrt_asks_the_allocator_the_way_its_version_does(
    trt_double: ModuleType, first: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    allocator = importlib.import_module("trt_lower.runtime.trt_output_allocator").OutputAllocator
    calls: list[str] = []
    for name in ("reallocate_output", "reallocate_output_async"):
        original = getattr(allocator, name)
        monkeypatch.setattr(
            allocator,
            name,
            lambda self, *args, _name=name, _original=original: calls.append(_name) or _original(self, *args),
        )
    _on_double(_masked, (X, MASK))
    assert calls[0] == first


def test_data_dependent_sizes_flow_inside_an_engine_and_across_engines(trt_double: ModuleType) -> None:
    lowered = _on_double(_inner, (X,))
    assert len(lowered.report.engines) == 1
    assert trt_double.state.output_reallocations == 0  # no engine output is sized by the data

    model = Fn(lambda x, m: (x[m].exp() * 2).cos().sum() + x.sum())
    lowered = trt_lower.lower_to_trt(
        model, (X, MASK), backend="tensorrt", min_block_size=1, fallback_ops=["aten.mul.Tensor"]
    )
    assert [e.output_shapes for e in lowered.report.engines] == [[(-1,)], [()]]
    assert lowered.report.engines[1].input_shapes == [(-1,), (3, 4)]
    for mask in (MASK, NONE, ~NONE):
        torch.testing.assert_close(lowered(X, mask), model(X, mask))


def test_cuda_graphs_are_not_used_for_data_dependent_outputs(
    trt_double: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        lowered = _on_double(_masked, (X, MASK), cuda_graphs=True)
        torch.testing.assert_close(lowered(X, NONE), _masked(X, NONE))
    assert caplog.text.count("no CUDA graph: an output's shape depends on the data") == 1
    assert trt_double.state.output_reallocations == 2


def _nonzero_engine(trt_double: ModuleType) -> Any:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    out = helper.make_tensor_value_info("i", TensorProto.INT64, [1, None])
    graph = helper.make_graph([helper.make_node("NonZero", ["x"], ["i"])], "g", [x], [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    logger = importlib.import_module("trt_lower.runtime.trt_logger").LOGGER
    builder = trt_double.Builder(logger)
    network = builder.create_network(0)
    assert trt_double.OnnxParser(network, logger).parse(model.SerializeToString())
    plan = builder.build_serialized_network(network, builder.create_builder_config())
    return trt_double.Runtime(logger).deserialize_cuda_engine(bytes(plan)), logger


def test_the_double_refuses_a_data_dependent_output_without_an_allocator(trt_double: ModuleType) -> None:
    engine, logger = _nonzero_engine(trt_double)
    context = engine.create_execution_context()
    x = importlib.import_module("trt_lower.runtime.trt_module").aligned_empty((4,), torch.float32, "cpu")
    assert context.set_tensor_address("x", x.data_ptr())
    assert not context.execute_async_v3(1)
    assert "no IOutputAllocator is set" in logger.take_errors()

    class Null(trt_double.IOutputAllocator):  # type: ignore[misc,name-defined]
        def reallocate_output(self, name: str, memory: int, size: int, alignment: int) -> int:
            return 0

        def notify_shape(self, name: str, shape: Any) -> None:
            raise AssertionError("no shape without memory")

    assert context.set_output_allocator("i", Null())
    assert not context.execute_async_v3(1)
    assert "gave no memory for 'i'" in logger.take_errors()


def test_nonzero_is_in_every_targets_table_for_floats() -> None:
    node = helper.make_node("NonZero", ["x"], ["y"], name="n/NonZero")
    for elem, accepted in ((TensorProto.FLOAT, True), (TensorProto.FLOAT16, True), (TensorProto.BOOL, False)):
        graph = helper.make_graph(
            [node],
            "g",
            [helper.make_tensor_value_info("x", elem, [2, 3])],
            [helper.make_tensor_value_info("y", TensorProto.INT64, [2, None])],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        for version in ("8.6", "10.4", "latest"):
            assert (trt_support.violations(model, version) == []) == accepted, (elem, version)


@pytest.mark.parametrize(
    ("x", "mask"),
    [(X, MASK), (X, torch.tensor([True, False, False, True])), (X, NONE[0]), (torch.tensor(2.0), torch.tensor(True))],
    ids=["same", "row", "none", "0-d"],
)
def test_masked_select_runs_in_an_engine(x: torch.Tensor, mask: torch.Tensor) -> None:
    lower_and_compare(torch.masked_select, (x, mask), ops=[aten.masked_select.default])


@pytest.mark.parametrize("scale", [torch.tensor(0.5), torch.tensor(3)], ids=["float", "int"])
def test_a_number_read_from_data_stays_eager_with_its_users(scale: torch.Tensor) -> None:
    """`t.item()` is a Python number no engine receives or computes: the ops that take it run
    eager, with the reason (an int one once made the split loop forever, a float one crashed)."""
    model = Fn(lambda x, t: (x * 2 + 1) * t.item() - 3)
    x = torch.randn(4, 4)
    lowered = trt_lower.lower_to_trt(model, (x, scale), backend="onnxruntime", min_block_size=1)
    reasons = {f.op: f.reason for f in lowered.report.fallbacks}
    assert "read from a tensor's data (item())" in reasons["aten.mul.Tensor"]
    assert len(lowered.report.engines) == 2, str(lowered.report)
    for t in (scale, scale * 4):  # the number is read on each call
        torch.testing.assert_close(lowered(x, t), model(x, t))


class _Checked(torch.nn.Module):
    """Takes the first n rows, where the model itself checks 0 < n <= 3."""

    def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        k = n.item()
        torch._check(k > 0)
        torch._check(k <= 3)
        return (x[:k] * 2 + 1).sigmoid()


def test_a_check_on_a_number_read_from_data_is_kept(tmp_path: Any) -> None:
    """torch.export keeps `torch._check` on an `item()` value as a runtime assertion; those used
    to be dropped with export's shape asserts, so a lowered module went on where eager raised
    (n = 0 gave an empty result, n = -1 all rows but one). The checks stay, eager, once each,
    count as no compute, and survive a save/load round trip."""
    model, x = _Checked(), torch.randn(4, 3)
    lowered = trt_lower.lower_to_trt(model, (x, torch.tensor(2)), backend="onnxruntime")
    assert {f.op for f in lowered.report.fallbacks} == {"aten._local_scalar_dense.default"}, str(lowered.report)
    assert engine_ops(lowered) >= {"aten.mul.Tensor", "aten.sigmoid.default"}
    # One check per condition: export writes `0 < u0` twice (and `u0 >= 1` beside it).
    assert len(lowered.graph.find_nodes(op="call_function", target=aten._assert_scalar.default)) == 3
    trt_lower.save(lowered, tmp_path / "m.trt")
    for module in (lowered, trt_lower.load(tmp_path / "m.trt", backend="onnxruntime")):
        for n in (1, 3):
            torch.testing.assert_close(module(x, torch.tensor(n)), model(x, torch.tensor(n)))
        for n, broken in ((0, "u0 >= 1"), (-1, "u0 >= 1"), (4, "u0 <= 3")):
            with pytest.raises(RuntimeError, match="u0 >= 1|u0 <= 3") as raised:
                module(x, torch.tensor(n))
            assert broken in str(raised.value)
            with pytest.raises(RuntimeError):
                model(x, torch.tensor(n))
