"""Splitting, fallbacks, options and errors of lower_to_trt."""

from __future__ import annotations

import logging

import onnx
import pytest
import torch
from harness import Fn, engine_ops

import converters
import trt_lower
from trt_lower.engine import backend
from trt_lower.values import device


@torch.library.custom_op("trt_lower_test::mystery", mutates_args=())
def mystery(x: torch.Tensor) -> torch.Tensor:
    """An op no converter will ever know."""
    return x.flip(-1) * 0.5


@mystery.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class Sandwich(torch.nn.Module):
    """conv/relu/add, then an op without converter, then matmul/gelu/add."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x)) + 1.0
        y = torch.ops.trt_lower_test.mystery(y)
        return torch.nn.functional.gelu(self.lin(y)) + y


def _inputs() -> tuple[torch.Tensor]:
    return (torch.randn(2, 3, 8, 8),)


def test_op_without_converter_splits_into_two_engines() -> None:
    model, inputs = Sandwich().eval(), _inputs()
    lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime")
    report = lowered.report
    assert [e.name for e in report.engines] == ["engine_0", "engine_1"]
    assert len(report.fallbacks) == 1
    assert report.fallbacks[0].op == "trt_lower_test.mystery.default"
    assert "no converter for trt_lower_test.mystery.default" in report.fallbacks[0].reason
    assert "mystery" in str(report)
    torch.testing.assert_close(lowered(*inputs), model(*inputs))


def test_require_full_lists_unsupported_nodes() -> None:
    with pytest.raises(trt_lower.UnsupportedOpsError, match=r"mystery.*no converter for trt_lower_test\.mystery"):
        trt_lower.lower_to_trt(Sandwich(), _inputs(), backend="onnxruntime", require_full=True)


@pytest.mark.parametrize("spec", [torch.ops.aten.relu.default, torch.ops.aten.relu, "aten.relu.default", "aten.relu"])
def test_fallback_ops_forces_eager(spec: object) -> None:
    model, inputs = Sandwich().eval(), _inputs()
    lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", fallback_ops=[spec], min_block_size=1)
    relu = [f for f in lowered.report.fallbacks if f.op == "aten.relu.default"]
    assert relu and relu[0].reason == "forced to eager by fallback_ops"
    assert "aten.relu.default" not in engine_ops(lowered)
    torch.testing.assert_close(lowered(*inputs), model(*inputs))


def test_min_block_size_keeps_small_segments_eager() -> None:
    model = Fn(lambda x: torch.ops.trt_lower_test.mystery(torch.sigmoid(x)) * 2)
    inputs = (torch.randn(3, 5),)
    lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", min_block_size=2)
    assert lowered.report.engines == []
    reasons = {f.op: f.reason for f in lowered.report.fallbacks}
    assert "fewer than min_block_size=2" in reasons["aten.sigmoid.default"]
    assert lowered.report.coverage == 0.0
    torch.testing.assert_close(lowered(*inputs), model(*inputs))


def test_float64_runs_as_float32_with_a_note() -> None:
    model = Fn(lambda x, y: ((x.double() * 3).sin().float() + 1, y * 2 + 0.1))
    inputs = (torch.randn(4), torch.randn(3, dtype=torch.float64))
    lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", min_block_size=1, require_full=True)
    notes = " ".join(lowered.report.notes)
    assert "computes float64 as float32" in notes and "sin" in notes, lowered.report.notes
    onnx_types = {v.type.tensor_type.elem_type for v in onnx.load_from_string(lowered.engine_0.onnx_bytes).graph.input}
    assert onnx.TensorProto.DOUBLE not in onnx_types
    first, second = lowered(*inputs)
    assert second.dtype == torch.float64  # the boundary keeps the model's dtypes
    torch.testing.assert_close((first, second), model(*inputs), rtol=1e-6, atol=1e-6)


def test_converter_failure_falls_back_with_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    entry = converters.lookup(torch.ops.aten.sigmoid.default)
    assert entry is not None

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("simulated converter bug")

    monkeypatch.setitem(
        converters.core.registry._REGISTRY, entry.target, converters.core.registry.Converter(entry.target, broken, None)
    )
    model = Fn(lambda x: torch.sigmoid(x * 2 + 1) - 3)
    inputs = (torch.randn(4),)
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", min_block_size=1)
    fallback = [f for f in lowered.report.fallbacks if f.op == "aten.sigmoid.default"]
    assert fallback and "simulated converter bug" in fallback[0].reason
    assert "simulated converter bug" in caplog.text
    torch.testing.assert_close(lowered(*inputs), model(*inputs))
    with pytest.raises(trt_lower.UnsupportedOpsError, match="require_full=True but .*simulated converter bug") as e:
        trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", require_full=True)
    assert isinstance(e.value.__cause__, trt_lower.ConversionError)  # the converter's own error, chained


def test_onnx_that_onnx_runtime_refuses_falls_back_with_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An engine ONNX Runtime cannot load (here: fp16 IsInf, which opset 17 does not define, as
    the precision pass once wrote it) runs eagerly with a warning instead of failing lowering."""
    from converters.passes import precision

    monkeypatch.setattr(precision, "KEEP_FP32", precision.KEEP_FP32 - {"IsInf"})
    model = Fn(lambda x: torch.linalg.vector_norm(x * 2, dim=-1) + 1)
    inputs = (torch.randn(3, 4),)
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", precision="fp16", min_block_size=1)
    assert not lowered.report.engines
    reasons = {f.op: f.reason for f in lowered.report.fallbacks}
    assert reasons["aten.linalg_vector_norm.default"].startswith("ONNX Runtime could not build engine_0: InvalidGraph")
    assert "ONNX Runtime could not build engine_0" in caplog.text
    torch.testing.assert_close(lowered(*inputs), model(*inputs))


def test_a_failure_that_keeping_eager_does_not_cure_is_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each retry keeps the failed node eager; if the same node fails again (the split put it
    in an engine anyway), lowering raises instead of retrying for ever."""
    node_name = "sigmoid"

    class Stuck:
        name, target = node_name, torch.ops.aten.sigmoid.default

    def convert(*args: object, **kwargs: object) -> None:
        raise converters.core.interpreter.ConversionError(Stuck(), KeyError("fails however often it is retried"))

    monkeypatch.setattr(trt_lower.api, "convert", convert)
    model = Fn(lambda x: torch.sigmoid(x * 2 + 1) - 3)
    with pytest.raises(converters.core.interpreter.ConversionError, match="fails however often"):
        trt_lower.lower_to_trt(model, (torch.randn(4),), backend="onnxruntime", min_block_size=1)


def test_pytree_outputs_are_preserved() -> None:
    model = Fn(lambda x, y: {"sum": x + y, "pair": (x * y, torch.relu(x))})
    inputs = (torch.randn(2, 3), torch.randn(2, 3))
    lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", min_block_size=1)
    out = lowered(*inputs)
    assert isinstance(out, dict) and isinstance(out["pair"], tuple)
    torch.testing.assert_close(out, model(*inputs))


def test_report_and_accuracy_are_readable() -> None:
    model, inputs = Sandwich().eval(), _inputs()
    lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime")
    report = lowered.report
    assert 0.0 < report.coverage < 1.0
    assert report.engines[0].input_shapes == [(2, 3, 8, 8)]
    assert report.engines[0].ops["aten.convolution.default"] == 1
    text = str(report)
    assert "coverage=" in text and "engine_0" in text and "eager fallbacks" in text
    result = trt_lower.check_accuracy(model, lowered, inputs)
    assert result.passed and len(result.outputs) == 1
    assert result.outputs[0].max_abs < 1e-4
    assert "PASS" in str(result)


def test_check_accuracy_flags_a_wrong_result() -> None:
    model = Fn(lambda x: x * 2)
    wrong = Fn(lambda x: x * 2.01)
    result = trt_lower.check_accuracy(model, wrong, (torch.ones(3),), rtol=1e-3, atol=1e-3)
    assert not result.passed and "FAIL" in str(result)


# -- bad input -------------------------------------------------------------------------------
def test_non_tensor_input_is_named() -> None:
    with pytest.raises(ValueError, match=r"inputs\[1\] must be a torch.Tensor or trt_lower.TensorSpec, got str"):
        trt_lower.lower_to_trt(Fn(lambda x, y: x), (torch.ones(1), "y"), backend="onnxruntime")


def test_wrong_arity_is_named() -> None:
    with pytest.raises(ValueError, match="inputs has 2 tensor"):
        trt_lower.lower_to_trt(torch.nn.ReLU(), (torch.ones(1), torch.ones(1)), backend="onnxruntime")


def test_model_must_be_a_module() -> None:
    with pytest.raises(ValueError, match="model must be a torch.nn.Module"):
        trt_lower.lower_to_trt(lambda x: x, (torch.ones(1),))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"backend": "cuda"}, "backend must be one of"),
        ({"precision": "int4"}, "precision must be one of"),
        ({"min_block_size": 0}, "min_block_size must be a positive int"),
    ],
)
def test_bad_options_are_named(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        trt_lower.lower_to_trt(torch.nn.ReLU(), (torch.ones(1),), **kwargs)


def test_call_with_other_shape_names_input_and_shapes() -> None:
    model = Sandwich().eval()
    lowered = trt_lower.lower_to_trt(model, _inputs(), backend="onnxruntime")
    with pytest.raises(
        trt_lower.EngineInputError,
        match=r"input 'x' was lowered for \(2, 3, 8, 8\) float32, got \(1, 3, 8, 8\) float32",
    ):
        lowered(torch.randn(1, 3, 8, 8))
    with pytest.raises(trt_lower.EngineInputError, match=r"got \(2, 3, 8, 8\) float64"):
        lowered(torch.randn(2, 3, 8, 8, dtype=torch.float64))


def test_uncapturable_model_says_so() -> None:
    class DataDependent(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2 if x.sum() > 0 else x - 1

    with pytest.raises(trt_lower.CaptureError, match="torch.export could not capture DataDependent"):
        trt_lower.lower_to_trt(DataDependent(), (torch.randn(3),), backend="onnxruntime")


def test_a_data_dependent_capture_error_names_the_torch_compile_route() -> None:
    """A detector's `if boxes.numel() == 0` on a nonzero's result: torch.export refuses it; the
    error says, before torch's long message, how to lower it instead, and that route works."""

    class EmptyCheck(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            boxes = (x > 0).nonzero()
            return x * 2 if boxes.numel() == 0 else x + boxes.shape[0]

    model, x = EmptyCheck(), torch.randn(3, 4)
    with pytest.raises(
        trt_lower.CaptureError,
        match=r"^torch.export could not capture EmptyCheck \(its Python code "
        r"depends on values in tensor data.*torch.compile\(model, backend=\"trt_lower\"\)",
    ):
        trt_lower.lower_to_trt(model, (x,), backend="onnxruntime")
    compiled = torch.compile(model, backend="trt_lower", options={"backend": "onnxruntime", "min_block_size": 1})
    torch.testing.assert_close(compiled(x), model(x))


def test_output_object_torch_cannot_flatten_says_what_to_do() -> None:
    class Box:
        def __init__(self, t: torch.Tensor) -> None:
            self.t = t

    class ReturnsBox(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> Box:
            return Box(x * 2)

    with pytest.raises(trt_lower.CaptureError, match=r"register it with torch.utils._pytree.register_pytree_node") as e:
        trt_lower.lower_to_trt(ReturnsBox(), (torch.randn(3),), backend="onnxruntime")
    assert "torch.compile" not in str(e.value)  # the route for data-dependent code is not said here


def test_tensorrt_backend_without_tensorrt_names_what_is_missing() -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA present: covered by the GPU suite")
    # torch's CUDA, whichever device the session's engines run on (TRT_LOWER_TEST_TENSORRT=double: the host).
    with (
        device.using(device.CudaDevice()),
        pytest.raises(RuntimeError, match="backend='tensorrt' cannot run here: no CUDA device"),
    ):
        trt_lower.lower_to_trt(torch.nn.ReLU(), (torch.ones(1),), backend="tensorrt")


def test_auto_backend_falls_back_to_onnxruntime_with_one_warning(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA present: auto may pick TensorRT")
    monkeypatch.setattr(backend, "_warned_unusable", set())  # as in a fresh process
    with device.using(device.CudaDevice()), caplog.at_level(logging.WARNING, logger="trt_lower"):
        lowered = trt_lower.lower_to_trt(Fn(lambda x: torch.relu(x) * 2 + 1), (torch.ones(3),))
    assert lowered.report.backend == "onnxruntime"
    warnings = [r for r in caplog.records if "ONNX Runtime" in r.getMessage()]
    assert len(warnings) == 1
