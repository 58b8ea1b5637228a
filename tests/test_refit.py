"""LoweredModule.update_weights: new weights without building engines again, on ONNX Runtime and
on the TensorRT double; every refusal and failed check leaves the module with its old weights."""

from __future__ import annotations

import copy
from types import ModuleType
from typing import Any, Iterator

import pytest
import torch

import trt_lower
from trt_lower.refit.errors import WeightUpdateError


class ConvBnNet(torch.nn.Module):
    """conv + batch norm + relu in one engine, an eager linear (fallback_ops) reading its weight,
    then a second engine: engines and eager tensors alike take new weights."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 16)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn(self.conv(x))).mean((2, 3))
        return torch.sigmoid(self.head(torch.tanh(self.fc(y)) * 2.0)) + 1.0


class ConvBn(torch.nn.Sequential):
    """conv + batch norm with numbered names (`0.weight`, `1.running_mean`), and an offset kept as
    a non-persistent buffer."""

    def __init__(self) -> None:
        super().__init__(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 1))
        self.register_buffer("offset", torch.randn(1, 4, 1, 1), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) + self.offset


EAGER_LINEAR = ("aten.linear.default", "aten.addmm.default")


def finetuned(model: torch.nn.Module, scale: float = 0.2, seed: int = 1) -> torch.nn.Module:
    """A copy of `model` with every parameter and batch-norm statistic moved: a fine-tuned model."""
    new = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for t in [*new.parameters(), *(b for b in new.buffers() if b.is_floating_point())]:
            t.add_(torch.randn(t.shape, generator=generator) * scale)
    return new


def _outputs(module: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        out: torch.Tensor = module(x)
    return out


@pytest.fixture(params=["onnxruntime", "tensorrt"])
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "onnxruntime":
        yield "onnxruntime"
        return
    trt_double = request.getfixturevalue("trt_double")
    assert isinstance(trt_double, ModuleType)
    yield "tensorrt"


def _lower(model: torch.nn.Module, x: torch.Tensor, backend: str, **kwargs: Any) -> trt_lower.LoweredModule:
    extra = {"refittable": True} if backend == "tensorrt" else {}
    return trt_lower.lower_to_trt(
        model, (x,), backend=backend, fallback_ops=EAGER_LINEAR, min_block_size=1, **{**extra, **kwargs}
    )


def _builds() -> int:
    import tensorrt

    return int(getattr(tensorrt, "state").builds) if hasattr(tensorrt, "state") else 0


def test_update_from_a_finetuned_model_matches_it_without_a_build(backend: str) -> None:
    model, x = ConvBnNet().eval(), torch.randn(2, 3, 8, 8)
    lowered = _lower(model, x, backend)
    assert len(lowered.segments) >= 2 and lowered.report.fallbacks  # engines and eager linears
    new = finetuned(model)
    assert not torch.allclose(_outputs(new, x), _outputs(model, x), atol=1e-2)
    builds = _builds() if backend == "tensorrt" else 0
    original = {k: v.clone() for k, v in model.state_dict().items()}

    lowered.update_weights(new)

    torch.testing.assert_close(_outputs(lowered, x), _outputs(new, x), rtol=1e-4, atol=1e-4)
    other = torch.randn(2, 3, 8, 8)  # not only on the example inputs it was checked on
    torch.testing.assert_close(_outputs(lowered, other), _outputs(new, other), rtol=1e-4, atol=1e-4)
    if backend == "tensorrt":
        import tensorrt

        assert _builds() == builds and getattr(tensorrt, "state").refits == len(lowered.segments)
        # The refitted plans are what saving stores: they carry the new weights.
        for name in lowered.segments:
            assert lowered.get_submodule(name).plan == bytes(lowered.get_submodule(name).engine.serialize())
    # The model lowered was not written into (the eager weights were its own tensors).
    for key, value in model.state_dict().items():
        assert torch.equal(value, original[key]), key


def test_update_from_a_state_dict_and_back(backend: str) -> None:
    model, x = ConvBnNet().eval(), torch.randn(2, 3, 8, 8)
    lowered = _lower(model, x, backend)
    new = finetuned(model)
    lowered.update_weights(new.state_dict())
    torch.testing.assert_close(_outputs(lowered, x), _outputs(new, x), rtol=1e-4, atol=1e-4)
    lowered.update_weights(model.state_dict())
    torch.testing.assert_close(_outputs(lowered, x), _outputs(model, x), rtol=1e-4, atol=1e-4)


def _refused(lowered: trt_lower.LoweredModule, source: Any, x: torch.Tensor, before: torch.Tensor, match: str) -> None:
    with pytest.raises(WeightUpdateError, match=match):
        lowered.update_weights(source)
    torch.testing.assert_close(_outputs(lowered, x), before, rtol=0, atol=0)


def test_refusals_name_the_weight_and_keep_the_old_ones(backend: str) -> None:
    model, x = ConvBnNet().eval(), torch.randn(2, 3, 8, 8)
    lowered = _lower(model, x, backend)
    before = _outputs(lowered, x)
    state = finetuned(model).state_dict()

    _refused(
        lowered,
        {**state, "conv.weight": torch.zeros(8, 3, 5, 5)},
        x,
        before,
        r"'conv\.weight' is torch\.float32 \(8, 3, 5, 5\); the model was lowered with torch\.float32 \(8, 3, 3, 3\)",
    )
    _refused(lowered, {**state, "fc.bias": state["fc.bias"].double()}, x, before, r"'fc\.bias' is torch\.float64")
    _refused(
        lowered, {k: v for k, v in state.items() if k != "bn.running_var"}, x, before, r"missing 'bn\.running_var'"
    )
    _refused(lowered, {**state, "extra.weight": torch.zeros(1)}, x, before, r"unexpected 'extra\.weight'")
    _refused(lowered, {**state, "head.weight": [[0.0]]}, x, before, r"'head\.weight' is a list, not a tensor")
    _refused(lowered, "weights.pt", x, before, "takes a model or a state dict, got str")


class ConvBnNetElsewise(ConvBnNet):
    """The same weights, another computation: its state dict fits, its outputs do not."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) * 1.5


def test_an_update_that_does_not_match_eager_is_rolled_back(backend: str) -> None:
    model, x = ConvBnNet().eval(), torch.randn(2, 3, 8, 8)
    lowered = _lower(model, x, backend)
    before = _outputs(lowered, x)
    impostor = ConvBnNetElsewise().eval()
    impostor.load_state_dict(finetuned(model).state_dict())
    engines = {name: lowered.get_submodule(name) for name in lowered.segments}
    _refused(lowered, impostor, x, before, r"does not match eager PyTorch on the example inputs")
    assert all(lowered.get_submodule(name) is module for name, module in engines.items())
    # A refused update leaves nothing behind: the next one works.
    new = finetuned(model, seed=2)
    lowered.update_weights(new)
    torch.testing.assert_close(_outputs(lowered, x), _outputs(new, x), rtol=1e-4, atol=1e-4)


class Gather(torch.nn.Module):
    """Reads its input at indices held in a buffer: an int64 initializer, part of the graph."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(6, 6)
        self.register_buffer("index", torch.tensor([0, 2, 4]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x)).index_select(1, self.index) * 2.0


def test_a_weight_built_into_the_graph_is_refused() -> None:
    model, x = Gather().eval(), torch.randn(3, 6)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime")
    before = _outputs(lowered, x)
    state = {**model.state_dict(), "index": torch.tensor([1, 3, 5])}
    _refused(
        lowered,
        state,
        x,
        before,
        r"engine_0 cannot take the new weights: initializer '\w+' \(INT64\) is derived "
        "from the weights but is not a weight TensorRT refits",
    )
    # New float weights with the same indices are fine.
    new = finetuned(model)
    lowered.update_weights(new)
    torch.testing.assert_close(_outputs(lowered, x), _outputs(new, x), rtol=1e-4, atol=1e-4)


def test_fp16_engines_take_their_weights_cast_again() -> None:
    model, x = ConvBnNet().eval(), torch.randn(2, 3, 8, 8)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", precision="fp16")
    new = finetuned(model)
    lowered.update_weights(new)
    torch.testing.assert_close(_outputs(lowered, x), _outputs(new, x), rtol=1e-2, atol=1e-2)


def test_an_engine_built_without_refittable_is_refused(trt_double: ModuleType) -> None:
    model, x = ConvBnNet().eval(), torch.randn(2, 3, 8, 8)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="tensorrt")
    before = _outputs(lowered, x)
    _refused(lowered, finetuned(model), x, before, r"engine_0 is a TensorRT engine built without refittable=True")
    assert trt_double.state.last_build is not None and not trt_double.state.last_build.builder_flags & (1 << 4)


def test_a_refit_failing_on_one_engine_leaves_every_engine_as_it_was(
    trt_double: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, x = ConvBnNet().eval(), torch.randn(2, 3, 8, 8)
    lowered = _lower(model, x, "tensorrt")
    before = _outputs(lowered, x)
    refit = trt_double.Refitter.refit_cuda_engine
    calls = []

    def second_fails(self: Any) -> bool:
        calls.append(self)
        if len(calls) == 2:
            trt_double._error(self._logger, "IRefitter::refitCudaEngine: out of device memory")
            return False
        return bool(refit(self))

    monkeypatch.setattr(trt_double.Refitter, "refit_cuda_engine", second_fails)
    _refused(
        lowered, finetuned(model), x, before, r"could not refit engine_\d: IRefitter::refitCudaEngine: out of device"
    )
    assert len(calls) == 2


def test_a_loaded_module_points_at_weight_files(tmp_path: Any) -> None:
    model, x = ConvBnNet().eval(), torch.randn(2, 3, 8, 8)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime")
    trt_lower.save(lowered, tmp_path / "m.trtl")
    loaded = trt_lower.load(tmp_path / "m.trtl", backend="onnxruntime")
    _refused(loaded, finetuned(model), x, _outputs(loaded, x), r"trt_lower\.load\(path, weights=\.\.\.\)")


# -- the double's refitter, as strict as TensorRT's --------------------------------------------
def _plan(trt: ModuleType, refit: bool) -> bytes:
    """A plan of y = x @ W + b (W 4x4, b 4), refittable or not."""
    from onnx import TensorProto, helper, numpy_helper

    w, b = numpy_helper.from_array(torch.ones(4, 4).numpy(), "W"), numpy_helper.from_array(torch.zeros(4).numpy(), "b")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["xw"], name="mm/MatMul"),
            helper.make_node("Add", ["xw", "b"], ["y"], name="add/Add"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [w, b],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    logger = _Logger(trt)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    assert trt.OnnxParser(network, logger).parse(model.SerializeToString())
    config = builder.create_builder_config()
    if refit:
        config.set_flag(trt.BuilderFlag.REFIT)
    return bytes(builder.build_serialized_network(network, config))


def _Logger(trt: ModuleType) -> Any:
    class Logger(trt.ILogger):  # type: ignore[name-defined, misc]
        def __init__(self) -> None:
            super().__init__()
            self.errors: list[str] = []

        def log(self, severity: Any, msg: str) -> None:
            self.errors.append(msg)

    return Logger()


def _run(trt: ModuleType, engine: Any) -> torch.Tensor:
    from trt_lower.runtime.trt_module import aligned_empty

    context = engine.create_execution_context()
    x, y = (aligned_empty((2, 4), torch.float32, torch.device("cpu")) for _ in range(2))
    x.fill_(1.0)
    assert context.set_tensor_address("x", x.data_ptr()) and context.set_tensor_address("y", y.data_ptr())
    assert context.execute_async_v3(0)
    trt.synchronize(0)
    return y


def test_the_doubles_refitter_takes_every_weight_checked(trt_double: ModuleType) -> None:
    trt = trt_double
    logger = _Logger(trt)
    plain = trt.Runtime(logger).deserialize_cuda_engine(_plan(trt, refit=False))
    with pytest.raises(TypeError):
        trt.Refitter(plain, logger)
    assert "not built refittable" in logger.errors[-1]

    engine = trt.Runtime(logger).deserialize_cuda_engine(_plan(trt, refit=True))
    refitter = trt.Refitter(engine, logger)
    assert sorted(refitter.get_all_weights()) == ["W", "b"] and sorted(refitter.get_missing_weights()) == ["W", "b"]
    import numpy as np

    assert not refitter.set_named_weights("V", trt.Weights(np.ones((4, 4), np.float32)))
    assert not refitter.set_named_weights("W", trt.Weights(np.ones((4, 4), np.float16)))  # dtype
    assert not refitter.set_named_weights("W", trt.Weights(np.ones((3, 4), np.float32)))  # count
    assert refitter.set_named_weights("W", trt.Weights(np.full((4, 4), 2.0, np.float32)))
    assert refitter.get_missing_weights() == ["b"]
    assert not refitter.refit_cuda_engine() and "missing weights ['b']" in logger.errors[-1]
    torch.testing.assert_close(_run(trt, engine), torch.full((2, 4), 4.0))  # the engine as it was
    assert refitter.set_named_weights("b", trt.Weights(np.ones(4, np.float32)))
    assert refitter.refit_cuda_engine()
    torch.testing.assert_close(_run(trt, engine), torch.full((2, 4), 9.0))
    again = trt.Runtime(logger).deserialize_cuda_engine(bytes(engine.serialize()))
    torch.testing.assert_close(_run(trt, again), torch.full((2, 4), 9.0))  # serialized with its new weights


@pytest.mark.parametrize("trt_double", ["10.13.0"], indirect=True)
def test_the_doubles_onnx_refitter_needs_every_weight(trt_double: ModuleType) -> None:
    from onnx import helper, numpy_helper

    trt, logger = trt_double, _Logger(trt_double)
    engine = trt.Runtime(logger).deserialize_cuda_engine(_plan(trt, refit=True))
    parser = trt.OnnxParserRefitter(trt.Refitter(engine, logger), logger)
    partial = helper.make_model(
        helper.make_graph([], "g", [], [], [numpy_helper.from_array(torch.zeros(4, 4).numpy(), "W")]), ir_version=8
    )
    assert not parser.refit_from_bytes(partial.SerializeToString())
    assert parser.num_errors == 1 and "['b']" in parser.get_error(0).desc()


@pytest.mark.parametrize("trt_double", ["8.6.1"], indirect=True)
def test_tensorrt_8_6_refits_by_name(trt_double: ModuleType) -> None:
    with pytest.raises(AttributeError, match="OnnxParserRefitter"):
        trt_double.OnnxParserRefitter(None, _Logger(trt_double))
    model, x = ConvBnNet().eval(), torch.randn(2, 3, 8, 8)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="tensorrt", refittable=True, trt_version="8.6")
    new = finetuned(model)
    lowered.update_weights(new)
    torch.testing.assert_close(_outputs(lowered, x), _outputs(new, x), rtol=1e-4, atol=1e-4)
