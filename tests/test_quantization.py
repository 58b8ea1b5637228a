"""Quantized models (int8 Q/DQ): what TensorRT cannot take is refused with its reason (and runs
eagerly, still right), the TensorRT double refuses it as TensorRT does, and the engines a
quantized model lowers to are audited and built as explicit quantization."""
from __future__ import annotations

from types import ModuleType
from typing import Any, Callable

import onnx
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper

import converters.ops.quantize  # noqa: F401  (quantized_decomposed)
import trt_lower
from converters.passes import trt_support
from harness import Fn, check_onnx

qd = torch.ops.quantized_decomposed
aten = torch.ops.aten
S = 2.0**-4
W = torch.randn(4, 2, 3, 3)
W_SCALES, W_ZEROS = torch.full((4,), 2.0**-5), torch.zeros(4, dtype=torch.int32)


def _qdq(x: torch.Tensor, zero_point: int = 0, low: int = -128, high: int = 127,
         dtype: torch.dtype = torch.int8) -> torch.Tensor:
    q = qd.quantize_per_tensor.default(x, S, zero_point, low, high, dtype)
    return qd.dequantize_per_tensor.default(q, S, zero_point, low, high, dtype)


def _eager_reason(fn: Callable[..., Any], inputs: tuple[torch.Tensor, ...], op: str, **kwargs: Any) -> str:
    """Lower `fn`, check it still matches eager, and return why `op` stayed eager."""
    lowered = trt_lower.lower_to_trt(Fn(fn), inputs, backend="onnxruntime", min_block_size=1, **kwargs)
    torch.testing.assert_close(lowered(*inputs), fn(*inputs))
    reasons = [f.reason for f in lowered.report.fallbacks if f.op == op]
    assert reasons, f"{op} ran in an engine: {lowered.report}"
    return reasons[0]


@pytest.mark.parametrize("fn, op, reason", [
    (lambda x: _qdq(x + 1, zero_point=3), "quantized_decomposed.quantize_per_tensor.default",
     "asymmetric quantization (zero point 3"),
    (lambda x: _qdq(x + 1, zero_point=128, low=0, high=255, dtype=torch.uint8),
     "quantized_decomposed.quantize_per_tensor.default", "uint8 quantization"),
    (lambda x: torch.fake_quantize_per_tensor_affine(x + 1, S, 5, -128, 127),
     "aten.fake_quantize_per_tensor_affine_cachemask.default", "asymmetric quantization (zero point 5"),
    (lambda x: torch.fake_quantize_per_tensor_affine(x + 1, S, 128, 0, 255),
     "aten.fake_quantize_per_tensor_affine_cachemask.default", "uint8 quantization"),
    (lambda x: torch.fake_quantize_per_tensor_affine(x + 1, S, 0, -127, 127),
     "aten.fake_quantize_per_tensor_affine_cachemask.default", "range [-127, 127] on an activation"),
    (lambda x: F.conv2d(x, torch.fake_quantize_per_channel_affine(W, torch.full((3,), S), torch.zeros(3, dtype=torch.int32),
                                                                  2, -128, 127)),
     "aten.fake_quantize_per_channel_affine_cachemask.default", "per-channel axis 2"),
    (lambda x: torch.fake_quantize_per_channel_affine(x + 1, torch.full((2,), S), torch.zeros(2, dtype=torch.int32),
                                                      1, -128, 127),
     "aten.fake_quantize_per_channel_affine_cachemask.default", "per-channel quantization of an activation"),
], ids=["asymmetric", "uint8", "fake-asymmetric", "fake-uint8", "fake-narrow-activation", "axis", "activation"])
def test_what_tensorrt_cannot_quantize_is_refused(fn: Callable[..., Any], op: str, reason: str) -> None:
    assert reason in _eager_reason(fn, (torch.randn(1, 2, 5, 5),), op)


@pytest.mark.parametrize("version, reason", [
    ("8.6", "TensorRT 8.6 has no FP8"),
    ("10.4", "V100 (Volta) GPUs, which have no FP8"),
    ("latest", "FP8 QuantizeLinear/DequantizeLinear need ONNX opset 19"),
])
def test_fp8_casts_are_refused_on_every_target_with_the_reason(version: str, reason: str) -> None:
    """ModelOpt-style FP8: a scaled cast to float8_e4m3fn and back. Opset 17 has no FP8 Q/DQ."""
    def fp8(x: torch.Tensor) -> torch.Tensor:
        return (x / 0.5).to(torch.float8_e4m3fn).to(torch.float32) * 0.5

    assert reason in _eager_reason(fp8, (torch.randn(2, 8),), "aten._to_copy.default", trt_version=version)


def _qdq_onnx(zero_point: int) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q/QuantizeLinear"),
         helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq/DequantizeLinear")],
        "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [helper.make_tensor("s", TensorProto.FLOAT, [], [0.1]), helper.make_tensor("z", TensorProto.INT8, [], [zero_point])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("version", ["8.6", "10.4", "latest"])
def test_support_table_takes_symmetric_int8_qdq_only(version: str) -> None:
    assert trt_support.violations(_qdq_onnx(0), version) == []
    rules = {v.rule for v in trt_support.violations(_qdq_onnx(3), version)}
    assert rules == {"QuantizeLinear's zero point must be 0 (TensorRT quantizes symmetrically)",
                     "DequantizeLinear's zero point must be 0 (TensorRT quantizes symmetrically)"}


@pytest.mark.parametrize("trt_double", ["10.4.0"], indirect=True)
def test_tensorrt_double_refuses_a_non_zero_zero_point(trt_double: ModuleType) -> None:
    from trt_lower.runtime.trt_logger import LOGGER

    builder = trt_double.Builder(LOGGER)
    parser = trt_double.OnnxParser(builder.create_network(0), LOGGER)
    assert parser.parse(_qdq_onnx(0).SerializeToString())
    parser = trt_double.OnnxParser(builder.create_network(0), LOGGER)
    assert not parser.parse(_qdq_onnx(3).SerializeToString())
    assert "TensorRT only supports symmetric quantization" in parser.get_error(0).desc()
    LOGGER.take_errors()


class QuantizedConv(torch.nn.Module):
    """conv + linear with PT2E-style int8 weights (folded) and per-tensor activations."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("w", qd.quantize_per_channel.default(W, W_SCALES, W_ZEROS, 0, -128, 127, torch.int8))
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = qd.dequantize_per_channel.default(self.w, W_SCALES, W_ZEROS, 0, -128, 127, torch.int8)
        y = torch.relu(F.conv2d(_qdq(x), w, padding=1))
        return self.lin(_qdq(y.mean((2, 3))))


@pytest.mark.parametrize("version", ["8.6", "10.4", "latest"])
def test_a_quantized_model_is_one_engine_whose_qdq_pass_every_table(version: str) -> None:
    model, inputs = QuantizedConv().eval(), (torch.randn(2, 2, 6, 6),)
    lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", require_full=True, trt_version=version)
    check_onnx(lowered)  # every Q/DQ node against `version`'s table
    ops = {n.op_type for n in onnx.load_from_string(lowered.engine_0.onnx_bytes).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    with torch.no_grad():
        torch.testing.assert_close(lowered(*inputs), model(*inputs))


@pytest.mark.parametrize("trt_double", ["10.4.0", "8.6.1"], indirect=True)
def test_tensorrt_builds_quantized_engines_with_the_int8_flag(trt_double: ModuleType) -> None:
    model, inputs = QuantizedConv().eval(), (torch.randn(2, 2, 6, 6),)
    lowered = trt_lower.lower_to_trt(model, inputs, backend="tensorrt", require_full=True)
    with torch.no_grad():
        torch.testing.assert_close(lowered(*inputs), model(*inputs))
    assert trt_double.state.last_build.builder_flags & 1 << int(trt_double.BuilderFlag.INT8)
