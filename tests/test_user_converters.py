"""trt_lower.converter: a user's converter for their own torch.library op runs inside an engine; a
TensorRT plugin converter stays eager on ONNX Runtime; artifacts name user converters, which
must be registered again before load."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import onnx
import pytest
import torch
from harness import Fn, check_onnx

import converters
import trt_lower
from converters.core import registry
from converters.core.builder import PLUGIN_DOMAIN
from converters.core.target import VERSIONS
from converters.passes import trt_support


@torch.library.custom_op("trt_lower_test::scaled_tanh", mutates_args=())
def scaled_tanh(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.tanh(x) * scale


@scaled_tanh.register_fake
def _(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.empty_like(x)


OP = torch.ops.trt_lower_test.scaled_tanh.default
MODEL = Fn(lambda x: torch.ops.trt_lower_test.scaled_tanh(x + 1, 3.0) * 2)
X = torch.randn(2, 5)


@pytest.fixture(autouse=True)
def unregistered() -> Iterator[None]:
    """Each test registers the converter it needs; none is left behind."""
    yield
    registry._REGISTRY.pop(OP, None)


def _register(capability: Callable[[torch.fx.Node], Optional[str]] | None = None) -> None:
    @trt_lower.converter(torch.ops.trt_lower_test.scaled_tanh, capability=capability)
    def convert(b: trt_lower.GraphBuilder, x: trt_lower.Value, scale: float) -> Any:
        return b.op("Mul", b.op("Tanh", x), b.const(scale, x.dtype))


def _register_plugin() -> None:
    @trt_lower.converter(torch.ops.trt_lower_test.scaled_tanh, plugin="ScaledTanh")
    def convert(b: trt_lower.GraphBuilder, x: trt_lower.Value, scale: float) -> Any:
        (out,) = b.plugin("ScaledTanh", x, scale=scale)
        return out


def _lower(**kwargs: Any) -> trt_lower.LoweredModule:
    return trt_lower.lower_to_trt(MODEL, (X,), backend="onnxruntime", min_block_size=1, **kwargs)


def test_without_a_converter_the_op_falls_back_naming_the_api() -> None:
    lowered = _lower()
    (fallback,) = [f for f in lowered.report.fallbacks if f.op == str(OP)]
    assert "register one with trt_lower.converter(torch.ops.trt_lower_test.scaled_tanh)" in fallback.reason
    torch.testing.assert_close(lowered(X), MODEL(X))


def test_a_user_converter_runs_inside_an_engine() -> None:
    _register()
    lowered = _lower(require_full=True)
    assert len(lowered.report.engines) == 1 and str(OP) in lowered.report.engines[0].ops
    check_onnx(lowered)
    torch.testing.assert_close(lowered(X), MODEL(X))


def test_the_capability_check_keeps_a_node_eager_with_its_reason() -> None:
    _register(capability=lambda node: "scale above 2 is not supported" if float(node.args[1]) > 2 else None)  # type: ignore[arg-type]
    lowered = _lower()
    (fallback,) = [f for f in lowered.report.fallbacks if f.op == str(OP)]
    assert fallback.reason == "scale above 2 is not supported"
    torch.testing.assert_close(lowered(X), MODEL(X))


def test_what_cannot_be_registered_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"aten.relu.default has a built-in converter"):
        trt_lower.converter(torch.ops.aten.relu.default)(lambda b, x: x)
    with pytest.raises(TypeError, match=r"takes an op \(torch.ops.mylib.op or one of its overloads\), got str"):
        trt_lower.converter("trt_lower_test::scaled_tanh")
    relu = converters.lookup(torch.ops.aten.relu.default)
    assert relu is not None and not relu.user


def test_a_plugin_converter_stays_eager_on_onnxruntime_with_the_reason() -> None:
    _register_plugin()
    lowered = _lower()
    (fallback,) = [f for f in lowered.report.fallbacks if f.op == str(OP)]
    assert "TensorRT plugin 'ScaledTanh'" in fallback.reason and "onnxruntime" in fallback.reason
    torch.testing.assert_close(lowered(X), MODEL(X))


def test_a_plugin_converter_emits_a_node_tensorrt_parses_for_every_target() -> None:
    _register_plugin()
    program = torch.export.export(Fn(lambda x: torch.ops.trt_lower_test.scaled_tanh(x, 3.0)), (X,))
    model = converters.segment_to_onnx(program.graph_module, "plugin", {}).model
    (node,) = [n for n in model.graph.node if n.domain == PLUGIN_DOMAIN]
    assert node.op_type == "ScaledTanh"
    assert {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute} == {
        "plugin_version": b"1",
        "plugin_namespace": b"",
        "scale": 3.0,
    }
    assert PLUGIN_DOMAIN in {o.domain for o in model.opset_import}
    onnx.checker.check_model(model)
    for version in VERSIONS:
        assert trt_support.violations(model, version) == []


def test_an_artifact_needs_its_user_converters_registered_again_before_load(tmp_path: Path) -> None:
    _register()
    lowered = _lower(require_full=True)
    path = tmp_path / "custom.trtl"
    trt_lower.save(lowered, path)
    registry._REGISTRY.pop(OP)
    with pytest.raises(
        trt_lower.ArtifactError,
        match=r"trt_lower_test.scaled_tanh.default, converted by .*"
        r"trt_lower.converter; import the code",
    ):
        trt_lower.load(path, backend="onnxruntime")
    _register()
    torch.testing.assert_close(trt_lower.load(path, backend="onnxruntime")(X), MODEL(X))
