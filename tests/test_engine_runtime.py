"""The engine runtime's hot path and its TensorRT correctness rules, against the strict TensorRT
double: each double rule here is one the old, lenient double did not enforce."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import logging
import threading
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import pytest
import torch
import torch.utils._pytree
import transformers
from harness import Fn
from onnx import TensorProto, helper
from trt_double.device import HostDevice

import trt_lower
from converters.core.segment import ProtobufLimitError
from trt_lower.engine import ort_session
from trt_lower.runtime import bindings
from trt_lower.runtime.ort_module import OrtEngineModule
from trt_lower.runtime.output import OutputBuilder
from trt_lower.values import device, signature


class ConvHead(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x)) + 1.0


def _lowered(**kwargs: Any) -> tuple[torch.nn.Module, torch.nn.Module, torch.Tensor]:
    model, x = ConvHead().eval(), torch.randn(2, 3, 8, 8)
    return model, trt_lower.lower_to_trt(model, (x,), backend="tensorrt", **kwargs), x


def _logger() -> Any:
    """The process-wide TensorRT logger, bound to the double (its module is fresh per test)."""
    return importlib.import_module("trt_lower.runtime.trt_logger").LOGGER


def _host() -> HostDevice:
    host = device.current()
    assert isinstance(host, HostDevice)
    return host


# -- the hot path ------------------------------------------------------------------------------
def test_a_call_with_the_same_shapes_sets_no_input_shape(trt_double: ModuleType) -> None:
    model, lowered, x = _lowered()
    # 256-byte aligned, so it is read in place (an unaligned one is copied: a new address per call).
    x = importlib.import_module("trt_lower.runtime.trt_module").aligned_empty(x.shape, x.dtype, x.device).copy_(x)
    lowered(x)
    shapes, addresses = trt_double.state.set_input_shape_calls, trt_double.state.set_tensor_address_calls
    for _ in range(3):
        torch.testing.assert_close(lowered(x), model(x))
    assert trt_double.state.set_input_shape_calls == shapes
    # The input's address is unchanged: at most the new output's address is set per call.
    assert trt_double.state.set_tensor_address_calls - addresses <= 3


@pytest.mark.parametrize("backend", ["onnxruntime", "tensorrt"])
def test_a_lowered_forward_checks_its_inputs_once(
    trt_double: ModuleType, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, x = ConvHead().eval(), torch.randn(2, 3, 8, 8)
    lowered = trt_lower.lower_to_trt(model, (x,), backend=backend, fallback_ops=["aten.relu.default"], min_block_size=1)
    assert len(lowered.report.engines) == 2
    checks = []
    real = signature.InputCheck.__call__
    monkeypatch.setattr(signature.InputCheck, "__call__", lambda self, t: (checks.append(self.where), real(self, t)))
    torch.testing.assert_close(lowered(x), model(x))
    assert checks == [""]  # the guard's; neither engine checks again
    with pytest.raises(trt_lower.EngineInputError, match=r"input 'x' was lowered for \(2, 3, 8, 8\) float32"):
        lowered(x.double())
    # Called alone, an engine checks (here: a float64 tensor would be read as float32 memory).
    with pytest.raises(trt_lower.EngineInputError, match=r"engine_1: input '\w+' was lowered for .* float32"):
        lowered.engine_1(torch.randn(2, 4, 8, 8, dtype=torch.float64))


@pytest.mark.parametrize("backend", ["onnxruntime", "tensorrt"])
def test_module_calls_skip_nn_module_dispatch_until_a_hook_is_registered(
    trt_double: ModuleType, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, x = ConvHead().eval(), torch.randn(2, 3, 8, 8)
    lowered = trt_lower.lower_to_trt(model, (x,), backend=backend, fallback_ops=["aten.relu.default"], min_block_size=1)
    expected = model(x)
    dispatched: list[torch.nn.Module] = []
    real = torch.nn.Module._call_impl
    monkeypatch.setattr(
        torch.nn.Module, "_call_impl", lambda self, *a, **k: (dispatched.append(self), real(self, *a, **k))[1]
    )
    torch.testing.assert_close(lowered(x), expected)
    assert dispatched == []  # neither the lowered module nor its engines went through nn.Module's dispatch
    # Hooks still run: an engine's (its result replaces the output), the lowered module's, global ones.
    seen: list[object] = []
    lowered.engine_1.register_forward_hook(lambda m, args, out: out * 2)
    lowered.register_forward_pre_hook(lambda m, args: seen.append("pre"))
    handle = torch.nn.modules.module.register_module_forward_hook(lambda m, args, out: seen.append(m))
    try:
        torch.testing.assert_close(lowered(x), expected * 2)
    finally:
        handle.remove()
    assert seen == ["pre", lowered.engine_0, lowered.engine_1, lowered]


@pytest.mark.skipif(
    not ort_session.fast_path_works(),
    reason="this ONNX Runtime's private binding does not run the fast path (tests/test_ort_runtime.py)",
)
def test_onnxruntime_engines_take_contiguous_inputs_through_dlpack_and_give_torch_outputs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def f(x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.relu(x) * 2, (x > 0) & mask  # a float and a bool output

    lowered = trt_lower.lower_to_trt(Fn(f), (torch.randn(4, 6), torch.rand(4, 6) > 0.5), backend="onnxruntime")
    made: list[object] = []
    real = torch.Tensor.numpy
    monkeypatch.setattr(torch.Tensor, "numpy", lambda self, *a, **k: (made.append(self), real(self, *a, **k))[1])
    x, mask = torch.randn(4, 6), torch.rand(4, 6) > 0.5
    torch.testing.assert_close(lowered(x, mask), f(x, mask))  # dtypes included: the bool output comes back bool
    assert made == []  # no numpy view on the way in, the bool input included (nor torch.from_numpy on the way out)
    strided = torch.randn(6, 4).t()
    torch.testing.assert_close(lowered(strided, mask), f(strided, mask))
    assert len(made) == 2  # not one block of memory: both inputs handed over as numpy views


@pytest.mark.parametrize("returns", ["tensor", "tuple", "dict", "nested"])
def test_the_forward_rebuilds_outputs_only_where_the_model_returns_a_structure(returns: str) -> None:
    def f(x: torch.Tensor) -> Any:
        a, b = x.relu(), x * 2
        return {"tensor": a, "tuple": (a, b), "dict": {"a": a, "b": b}, "nested": {"a": (a, b)}}[returns]

    x = torch.randn(2, 3)
    lowered = trt_lower.lower_to_trt(Fn(f), (x,), backend="onnxruntime")
    assert ("tree_unflatten" in lowered.code) == (returns == "nested")
    torch.testing.assert_close(lowered(x), f(x))


@dataclasses.dataclass
class _Output(transformers.utils.ModelOutput):
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    hidden: torch.Tensor | None = None
    attentions: torch.Tensor | None = None


def test_a_model_output_is_built_directly_and_equals_the_models() -> None:
    def f(x: torch.Tensor) -> _Output:
        return _Output(logits=x.relu(), hidden=x * 2)

    x = torch.randn(2, 3)
    lowered = trt_lower.lower_to_trt(Fn(f), (x,), backend="onnxruntime")
    assert "self._output.build" in lowered.code and "tree_unflatten" not in lowered.code
    for call in range(3):  # the first call builds through the constructor, the later ones directly
        x = torch.randn(2, 3)
        got, want = lowered(x), f(x)
        assert type(got) is _Output and list(got.keys()) == ["logits", "hidden"]
        assert list(vars(got)) == list(vars(want)) and got.loss is None and got.attentions is None
        torch.testing.assert_close(got.to_tuple(), want.to_tuple())
        torch.testing.assert_close((got.logits, got["hidden"]), (want.logits, want["hidden"]))
    assert lowered._output.build.__name__ == "build", "the direct build was not trusted"


class _Tagged(dict):  # type: ignore[type-arg]
    """A dict subclass whose constructor leaves more than its items: never built directly."""

    def __init__(self, items: Any) -> None:
        super().__init__(items)
        self.tag = "made by the constructor"


torch.utils._pytree.register_pytree_node(
    _Tagged, lambda d: (list(d.values()), list(d)), lambda values, keys: _Tagged(zip(keys, values))
)


def test_an_output_builder_keeps_the_constructor_where_a_direct_build_differs() -> None:
    a, b = torch.ones(1), torch.zeros(1)
    _, spec = torch.utils._pytree.tree_flatten(_Tagged({"a": a, "b": b}))
    builder = OutputBuilder(spec)
    for _ in range(2):
        out = builder.build(a, b)
        assert type(out) is _Tagged and out == {"a": a, "b": b} and out.tag == "made by the constructor"
    assert builder.build == builder._unflatten
    # A copy (or an unpickled builder) derives its build again on its first call.
    assert copy.deepcopy(builder).build.__name__ == "_first"


def test_eager_ops_are_called_through_torch_bindings_and_the_graph_keeps_its_overloads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, x = ConvHead().eval(), torch.randn(2, 3, 8, 8)
    lowered = trt_lower.lower_to_trt(
        model, (x,), backend="onnxruntime", fallback_ops=["aten.relu.default", "aten.add.Tensor"], min_block_size=1
    )
    eager = [n.target for n in lowered.graph.nodes if n.op == "call_function"]
    assert eager == [torch.ops.aten.relu.default, torch.ops.aten.add.Tensor]  # what report and artifact read
    trt_lower.save(lowered, tmp_path / "m.trtl")
    loaded = trt_lower.load(tmp_path / "m.trtl", backend="onnxruntime")  # its graph carries no example values
    called: list[object] = []
    real = torch._ops.OpOverload.__call__
    monkeypatch.setattr(
        torch._ops.OpOverload, "__call__", lambda self, *a, **k: (called.append(self), real(self, *a, **k))[1]
    )
    for module in (lowered, loaded):
        assert "torch.relu(" in module.code and "torch.add(" in module.code and "torch.ops" not in module.code
        torch.testing.assert_close(module(x), model(x))
    assert called == []


@pytest.mark.parametrize(
    "op, args, bound",
    [
        (torch.ops.aten.add.Tensor, ("x", "w"), torch.add),
        (torch.ops.aten.add.Tensor, ("x", 2), torch.add),
        (torch.ops.aten.cat.default, (["x", "w"], 1), torch.cat),
        (torch.ops.aten.add.Scalar, ("x", 2), None),  # torch.add(x, 2) dispatches add.Tensor
        (torch.ops.aten.linear.default, ("x", "w"), None),  # torch's linear dispatches its decomposition
        (torch.ops.aten.view.default, ("x", [4]), torch.Tensor.view),  # a Tensor method only
        (torch.ops.aten.slice.Tensor, ("x", 0, 0, 1), None),  # no binding of that name
        (torch.ops.aten.max.dim, ("x", 0), None),  # two outputs (the binding's is a named tuple)
    ],
)
def test_an_eager_op_is_bound_only_where_the_binding_dispatches_it_with_the_same_arguments(
    op: torch._ops.OpOverload, args: tuple[Any, ...], bound: Callable[..., Any] | None
) -> None:
    graph = torch.fx.Graph()
    values = {name: graph.placeholder(name) for name in ("x", "w")}
    node = graph.call_function(op, torch.fx.node.map_aggregate(args, lambda a: values[a] if isinstance(a, str) else a))
    assert bindings.binding(node) is bound


# -- the double is as strict as TensorRT --------------------------------------------------------
def _context(trt_double: ModuleType) -> tuple[Any, torch.nn.Module]:
    _, lowered, _ = _lowered()
    engine = lowered.engine_0
    return engine._engine.create_execution_context(), engine


def test_null_and_unaligned_addresses_are_refused(trt_double: ModuleType) -> None:
    context, engine = _context(trt_double)
    name = engine.inputs[0].name
    buffer = torch.empty(4096, dtype=torch.uint8)
    aligned = buffer.data_ptr() + (-buffer.data_ptr() % 256)
    assert not context.set_tensor_address(name, 0)
    assert not context.set_tensor_address(name, aligned + 4)
    assert context.set_tensor_address(name, aligned)
    assert "not 256-byte aligned" in _logger().take_errors()


def test_unaligned_input_view_runs_through_an_aligned_copy(trt_double: ModuleType) -> None:
    model, lowered, x = _lowered()
    storage = torch.randn(x.numel() + 1)
    view = storage[1:].view(x.shape)  # 4 bytes past an allocation: not 256-byte aligned
    assert view.data_ptr() % 256
    torch.testing.assert_close(lowered(view), model(view))


def _dynamic_engine(trt_double: ModuleType) -> Any:
    spec = trt_lower.TensorSpec((1, 4), (2, 4), (8, 4))
    lowered = trt_lower.lower_to_trt(Fn(lambda x: x * 2 + 1), (spec,), backend="tensorrt", min_block_size=1)
    return lowered.engine_0


def test_dynamic_input_shape_must_be_set_before_enqueue(trt_double: ModuleType) -> None:
    engine = _dynamic_engine(trt_double)
    context = engine._engine.create_execution_context()
    buffers = [torch.empty(1024) for _ in range(2)]
    for sig, b in zip(engine.inputs + engine.outputs, buffers):
        assert context.set_tensor_address(sig.name, b.data_ptr() + (-b.data_ptr() % 256))
    assert not context.execute_async_v3(1)
    assert "input shapes not set" in _logger().take_errors()


def test_profile_must_cover_every_dynamic_input(trt_double: ModuleType) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m", 4])
    out = helper.make_tensor_value_info("z", TensorProto.FLOAT, [None, 4])
    graph = helper.make_graph([helper.make_node("Concat", ["x", "y"], ["z"], axis=0)], "g", [x, y], [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    builder = trt_double.Builder(_logger())
    network = builder.create_network(0)
    assert trt_double.OnnxParser(network, _logger()).parse(model.SerializeToString())
    config = builder.create_builder_config()
    assert config.add_optimization_profile(builder.create_optimization_profile()) == -1
    profile = builder.create_optimization_profile()
    profile.set_shape("x", trt_double.Dims([1, 4]), trt_double.Dims([2, 4]), trt_double.Dims([4, 4]))
    assert config.add_optimization_profile(profile) == 0
    assert builder.build_serialized_network(network, config) is None
    assert "no shapes for dynamic inputs ['y']" in _logger().take_errors()


def test_work_runs_when_the_stream_does(trt_double: ModuleType) -> None:
    """Inputs must stay unchanged until the stream has run: overwriting one before shows."""
    model, lowered, x = _lowered()
    aligned = importlib.import_module("trt_lower.runtime.trt_module").aligned_empty
    x = aligned(x.shape, x.dtype, x.device).copy_(x)  # read in place, not through an aligned copy
    host = _host()
    with host.caller_stream() as stream:
        out = lowered(x)
        expected = model(x)
        x.zero_()
        host.synchronize(stream)
    assert not torch.allclose(out, expected)
    torch.testing.assert_close(out, model(x))


def test_a_context_used_by_two_threads_at_once_raises(trt_double: ModuleType) -> None:
    context, engine = _context(trt_double)
    name = engine.inputs[0].name
    context.set_input_shape(name, (2, 3, 8, 8))
    errors: list[BaseException] = []

    def other() -> None:
        try:
            context.set_input_shape(name, (2, 3, 8, 8))
        except RuntimeError as e:
            errors.append(e)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join(timeout=30)
    assert len(errors) == 1 and "two threads at once" in str(errors[0])


def test_two_threads_on_one_module_each_get_a_context(trt_double: ModuleType) -> None:
    model, lowered, x = _lowered(verify=False)  # the contexts counted are the calls' own
    host = _host()
    others = [torch.randn(2, 3, 8, 8) for _ in range(2)]
    results: dict[int, torch.Tensor] = {}
    with host.caller_stream() as stream:  # the first thread's work is still pending ...
        results[0] = lowered(others[0])

        def second() -> None:  # ... when the second thread calls
            with host.caller_stream() as own:
                results[1] = lowered(others[1])
                host.synchronize(own)

        thread = threading.Thread(target=second)
        thread.start()
        thread.join(timeout=60)
        host.synchronize(stream)
    for i, t in enumerate(others):
        torch.testing.assert_close(results[i], model(t))
    assert trt_double.state.contexts_created == 2


def test_two_caller_streams_on_one_thread_each_get_a_context(trt_double: ModuleType) -> None:
    """The first stream's work has not run when the second stream's call binds its buffers."""
    model, lowered, _ = _lowered(verify=False)  # the contexts counted are the calls' own
    host, xs = _host(), [torch.randn(2, 3, 8, 8) for _ in range(2)]
    with host.caller_stream() as first:
        out_first = lowered(xs[0])
    with host.caller_stream() as second:
        out_second = lowered(xs[1])
    host.synchronize(first)
    host.synchronize(second)
    for out, x in ((out_first, xs[0]), (out_second, xs[1])):
        torch.testing.assert_close(out, model(x))
    assert trt_double.state.contexts_created == 2


def test_plans_are_tied_to_the_compute_capability(trt_double: ModuleType) -> None:
    _, lowered, _ = _lowered()
    trt_double.state.compute_capability = "9.0"
    assert trt_double.Runtime(_logger()).deserialize_cuda_engine(lowered.engine_0.plan) is None
    assert "compute capability 8.0, this one is 9.0" in _logger().take_errors()


def test_data_dependent_output_shapes_are_reported_as_minus_one(trt_double: ModuleType) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    out = helper.make_tensor_value_info("i", TensorProto.INT64, [1, None])
    graph = helper.make_graph([helper.make_node("NonZero", ["x"], ["i"])], "g", [x], [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    builder = trt_double.Builder(_logger())
    network = builder.create_network(0)
    assert trt_double.OnnxParser(network, _logger()).parse(model.SerializeToString())
    plan = builder.build_serialized_network(network, builder.create_builder_config())
    engine = trt_double.Runtime(_logger()).deserialize_cuda_engine(bytes(plan))
    assert tuple(engine.create_execution_context().get_tensor_shape("i")) == (1, -1)


def test_execution_context_out_of_memory_falls_back_to_eager(
    trt_double: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    trt_double.state.contexts_left = 0
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        model, lowered, x = _lowered()
    assert lowered.report.engines == []
    assert "could not create an execution context" in caplog.text
    torch.testing.assert_close(lowered(x), model(x))


def test_out_of_memory_keeps_the_cached_plan(
    trt_double: ModuleType, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A full GPU is no bad plan: the entry stays, is not rebuilt, and loads once memory is free."""
    model, x = ConvHead().eval(), torch.randn(2, 3, 8, 8)
    trt_lower.lower_to_trt(model, (x,), backend="tensorrt")
    entries = sorted((tmp_path / "engines").glob("*.engine"))
    assert trt_double.state.builds == 1 and len(entries) == 1
    trt_double.state.contexts_left = 0
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        lowered = trt_lower.lower_to_trt(model, (x,), backend="tensorrt")
    assert lowered.report.engines == [] and "discarding" not in caplog.text
    assert all("out of device memory" in f.reason for f in lowered.report.fallbacks)
    torch.testing.assert_close(lowered(x), model(x))
    assert trt_double.state.builds == 1 and sorted((tmp_path / "engines").glob("*.engine")) == entries
    trt_double.state.contexts_left = None
    lowered = trt_lower.lower_to_trt(model, (x,), backend="tensorrt")
    assert [e.cache_hit for e in lowered.report.engines] == [True]


def test_out_of_memory_after_a_build_stores_the_plan(trt_double: ModuleType) -> None:
    model, x = ConvHead().eval(), torch.randn(2, 3, 8, 8)
    trt_double.state.contexts_left = 0
    assert trt_lower.lower_to_trt(model, (x,), backend="tensorrt").report.engines == []
    trt_double.state.contexts_left = None
    lowered = trt_lower.lower_to_trt(model, (x,), backend="tensorrt")
    assert [e.cache_hit for e in lowered.report.engines] == [True] and trt_double.state.builds == 1


def test_a_refused_optimization_profile_fails_the_build_with_the_reason(
    trt_double: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(config: Any, profile: Any) -> int:
        config._logger.log(trt_double.ILogger.Severity.ERROR, "profile refused: kMIN > kOPT")
        return -1

    monkeypatch.setattr(trt_double.IBuilderConfig, "add_optimization_profile", refuse)
    with pytest.raises(trt_lower.UnsupportedOpsError, match="could not build engine_0: profile refused"):
        _lowered(require_full=True)


def test_fp32_engines_are_built_without_tf32_and_one_logger_serves_all(trt_double: ModuleType) -> None:
    _lowered(fallback_ops=["aten.relu.default"], min_block_size=1)
    assert trt_double.state.last_build.builder_flags & 1 << int(trt_double.BuilderFlag.TF32) == 0
    assert len(trt_double.state.loggers) == 1


def test_empty_input_and_output_bind_a_valid_address(trt_double: ModuleType) -> None:
    model, x = Fn(lambda x: torch.relu(x) * 2 + 1), torch.randn(0, 4)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="tensorrt", min_block_size=1)
    assert len(lowered.report.engines) == 1
    assert lowered(x).shape == (0, 4)


# -- CUDA graphs -------------------------------------------------------------------------------
class Embed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(50, 8)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.emb(ids)) * 2.0


def _poisoned(real: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """torch.empty whose memory holds what a fresh GPU buffer may: here, out-of-range indices."""

    def empty(*args: Any, **kwargs: Any) -> torch.Tensor:
        t = real(*args, **kwargs)
        return t.fill_(10**6) if t.dtype in (torch.int64, torch.int32) else t

    return empty


def test_cuda_graph_replays_read_the_current_inputs_and_warm_up_on_real_ones(
    trt_double: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, ids = Embed().eval(), torch.randint(0, 50, (2, 5))
    lowered = trt_lower.lower_to_trt(model, (ids,), backend="tensorrt", cuda_graphs=True, min_block_size=1)
    with monkeypatch.context() as patch:
        patch.setattr(torch, "empty", _poisoned(torch.empty))
        first = lowered(ids)  # the capture: its warm-up must read these ids, not garbage
    for _ in range(2):
        other = torch.randint(0, 50, (2, 5))
        torch.testing.assert_close(lowered(other), model(other))
    torch.testing.assert_close(first, model(ids))
    assert _host().captures == 1


def test_a_graph_replays_the_recorded_addresses_on_their_current_contents(trt_double: ModuleType) -> None:
    """Replay runs the captured enqueue, not a fresh one: bindings changed after capture are not
    seen, what the recorded input buffer holds at replay time is."""
    model, lowered, x = _lowered()
    engine = lowered.engine_0
    context = engine._engine.create_execution_context()
    aligned = importlib.import_module("trt_lower.runtime.trt_module").aligned_empty
    static = aligned(x.shape, x.dtype, x.device).copy_(x)
    out, moved = (aligned((2, 4, 8, 8), x.dtype, x.device).zero_() for _ in range(2))
    assert context.set_input_shape(engine.inputs[0].name, tuple(x.shape))
    assert context.set_tensor_address(engine.inputs[0].name, static.data_ptr())
    assert context.set_tensor_address(engine.outputs[0].name, out.data_ptr())
    replay = _host().capture(lambda stream: context.execute_async_v3(stream), x.device)
    assert context.set_tensor_address(engine.outputs[0].name, moved.data_ptr())
    static.copy_(torch.randn(x.shape))
    replay()
    torch.testing.assert_close(out, model(static))
    assert not moved.any()


def _graphs_over_a_batch_range() -> tuple[torch.nn.Module, torch.nn.Module]:
    model = ConvHead().eval()
    spec = trt_lower.TensorSpec((1, 3, 8, 8), (2, 3, 8, 8), (4, 3, 8, 8))
    return model, trt_lower.lower_to_trt(model, (spec,), backend="tensorrt", cuda_graphs=True)


@pytest.mark.parametrize("trt_double", ["8.6.1", "10.0.1", "10.13.0"], indirect=True)
def test_each_input_shape_replays_its_own_graph_on_its_own_context(trt_double: ModuleType) -> None:
    """TensorRT keeps shape-dependent state in an execution context, which a graph does not
    record: a graph replayed on a context whose shapes changed since its capture computes wrongly
    (the double raises). Each shape's graph is captured on a context of its own, all sharing one
    block of activation memory (8.6: without device memory, its plans sharing their profile;
    10.0: the user-managed strategy and `device_memory`; 10.1 on: `set_device_memory`)."""
    model, lowered = _graphs_over_a_batch_range()
    for batch in (2, 3, 2, 3, 4, 2):
        x = torch.randn(batch, 3, 8, 8)
        torch.testing.assert_close(lowered(x), model(x))
    assert _host().captures == 3


def test_the_least_recently_used_graph_is_dropped_past_the_limit(
    trt_double: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(importlib.import_module("trt_lower.runtime.trt_module"), "MAX_GRAPHS", 2)
    model, lowered = _graphs_over_a_batch_range()
    for batch in (2, 3, 2, 4, 2, 3):  # 3 is dropped when 4 comes, and captured again
        x = torch.randn(batch, 3, 8, 8)
        torch.testing.assert_close(lowered(x), model(x))
    assert _host().captures == 4


def test_no_context_for_a_graph_runs_those_shapes_without_one(
    trt_double: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    module = importlib.import_module("trt_lower.runtime.trt_module")

    def short(self: Any, binding: Any) -> Any:
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(module.TRTEngineModule, "_graph_context", short)
    model, lowered = _graphs_over_a_batch_range()
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        for batch in (2, 2, 3):
            x = torch.randn(batch, 3, 8, 8)
            torch.testing.assert_close(lowered(x), model(x))
    assert _host().captures == 0 and caplog.text.count("no CUDA graph for input shapes") == 2


def test_an_engine_whose_static_output_shape_is_not_the_segments_is_refused(trt_double: ModuleType) -> None:
    """Outputs are allocated in the segment's shapes and TensorRT writes the engine's: a mismatch
    would write past the buffer, so loading refuses it."""
    _, lowered, _ = _lowered()
    engine = lowered.engine_0
    out = engine.outputs[0]
    wrong = dataclasses.replace(
        out, min_shape=(1, *out.min_shape[1:]), opt_shape=(1, *out.opt_shape[1:]), max_shape=(1, *out.max_shape[1:])
    )
    module = importlib.import_module("trt_lower.runtime.trt_module")
    with pytest.raises(
        module.PlanLoadError,
        match=r"engine output '.*' has the shape \(2, 4, 8, 8\), the "
        r"segment's is \(1, 4, 8, 8\)",
    ):
        module.TRTEngineModule("engine_0", engine.plan, engine.inputs, (wrong,), engine.tuple_output)


def test_failed_capture_runs_without_a_graph_and_warns(
    trt_double: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    model, lowered, x = _lowered(cuda_graphs=True, verify=False)  # the first call captures

    def fail(run: Any, where: torch.device) -> Any:
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(_host(), "capture", fail)
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        for _ in range(2):
            x = torch.randn(2, 3, 8, 8)
            torch.testing.assert_close(lowered(x), model(x))
    assert caplog.text.count("CUDA graph capture failed") == 1


def test_a_segment_over_the_protobuf_limit_builds_from_its_graph_and_weights_beside_it(
    trt_double: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The limit lowered to far below this model's size stands for 2 GB of weights, which are not
    # allocated; the double's parser refuses a message past it, as protobuf does past 2 GB.
    monkeypatch.setenv("TRT_LOWER_PROTOBUF_LIMIT", "4096")
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64)).eval()
    x = torch.randn(2, 64)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="tensorrt")
    assert [e.name for e in lowered.report.engines] == ["engine_0"] and not lowered.report.fallbacks
    torch.testing.assert_close(lowered(x), model(x))
    # The self-contained model cannot be made, and the parser refuses a message past the limit.
    with pytest.raises(ProtobufLimitError, match="exceeds the limit of one protobuf message"):
        lowered.segments["engine_0"].onnx.to_bytes()
    weight = helper.make_tensor("w", TensorProto.FLOAT, [2048], [0.0] * 2048)
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2048])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2048])],
        [weight],
    )
    parser = trt_double.OnnxParser(trt_double.Builder(_logger()).create_network(0), _logger())
    assert not parser.parse(helper.make_model(graph).SerializeToString())
    assert "over protobuf's limit" in parser.get_error(0).desc()


def test_onnxruntime_engine_serves_two_threads_at_once() -> None:
    """Each thread binds its own I/O addresses (an IOBinding per thread)."""
    model, x = ConvHead().eval(), torch.randn(2, 3, 8, 8)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime")
    xs = [torch.randn(2, 3, 8, 8) for _ in range(2)]
    expected = [model(t) for t in xs]
    wrong: list[int] = []

    def call(i: int) -> None:
        for _ in range(200):
            if not torch.allclose(lowered(xs[i]), expected[i], rtol=1e-4, atol=1e-5):
                wrong.append(i)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not wrong


@pytest.mark.parametrize(
    ("fallback_ops", "engines", "spins"),
    [
        ([], 1, True),  # the engine is the whole call
        (["aten.add.Tensor"], 1, False),  # eager work after it
        (["aten.relu.default"], 2, False),  # another engine's session (and an eager op) between its runs
    ],
)
def test_onnxruntime_workers_spin_between_runs_only_where_the_engine_is_the_whole_call(
    fallback_ops: list[str], engines: int, spins: bool, tmp_path: Path
) -> None:
    model, x = ConvHead().eval(), torch.randn(2, 3, 8, 8)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", fallback_ops=fallback_ops, min_block_size=1)
    trt_lower.save(lowered, tmp_path / "m.trtl")
    loaded = trt_lower.load(tmp_path / "m.trtl", backend="onnxruntime")
    for module in (lowered, loaded):
        assert len(module.report.engines) == engines
        for engine in (m for m in module.modules() if isinstance(m, OrtEngineModule)):
            options = engine._session.get_session_options()
            if spins:
                with pytest.raises(RuntimeError, match="does not have configuration"):
                    options.get_session_config_entry("session.force_spinning_stop")
            else:
                assert options.get_session_config_entry("session.force_spinning_stop") == "1"
        torch.testing.assert_close(module(x), model(x))
