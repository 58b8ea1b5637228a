"""precision="fp16" and the engine dtypes narrower than the model's (README "Precision and dtypes").

fp16 tolerances, measured on ONNX Runtime CPU against eager fp32 (seed 0): resnet18 at
1x3x64x64 max |err| 1.2e-3 (outputs up to 2.8); BERT (hidden 64, 2 layers) at (2, 16) max |err|
1.4e-3 (outputs up to 3.2). The tests assert atol = rtol = 5e-3.
"""

from __future__ import annotations

from types import ModuleType

import onnx
import pytest
import torch
import torchvision
from harness import Fn, check_onnx
from onnx import TensorProto
from trt_models import bert

import trt_lower
from converters.passes.onnx_types import elem_types
from converters.passes.precision import KEEP_FP32

FP16_TOL = {"rtol": 5e-3, "atol": 5e-3}


def _engine_onnx(lowered: trt_lower.LoweredModule) -> onnx.ModelProto:
    assert [e.name for e in lowered.report.engines] == ["engine_0"]
    return onnx.load_from_string(lowered.engine_0.onnx_bytes)


def _input_types(model: onnx.ModelProto, op_type: str) -> set[int]:
    types = elem_types(model)
    return {types[n.input[0]] for n in model.graph.node if n.op_type == op_type}


def _lower_fp16(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> trt_lower.LoweredModule:
    lowered = trt_lower.lower_to_trt(
        model, inputs, backend="onnxruntime", precision="fp16", require_full=True, min_block_size=1
    )
    check_onnx(lowered)
    assert lowered.report.precision == "fp16"
    return lowered


def _assert_fp16_weights_and_fp32_boundary(model: onnx.ModelProto, compute: str) -> None:
    types = elem_types(model)
    graph_io = [*model.graph.input, *model.graph.output]
    assert all(v.type.tensor_type.elem_type != TensorProto.FLOAT16 for v in graph_io)
    weights = {i.name for i in model.graph.initializer}
    compute_nodes = [n for n in model.graph.node if n.op_type == compute]
    assert compute_nodes
    for node in compute_nodes:
        assert {types[name] for name in node.input if name} == {TensorProto.FLOAT16}, node.name
        assert any(name in weights for name in node.input), f"{node.name} has no fp16 weight"
    for node in model.graph.node:
        # Float ops only: an integer reduction (the index checks' "all in range") has no fp16 form.
        if node.op_type in KEEP_FP32 and types[node.input[0]] in (TensorProto.FLOAT, TensorProto.FLOAT16):
            assert types[node.input[0]] == TensorProto.FLOAT, f"{node.name} does not run in fp32"


def test_resnet18_fp16() -> None:
    model, x = torchvision.models.resnet18().eval(), torch.randn(1, 3, 64, 64)
    lowered = _lower_fp16(model, (x,))
    onnx_model = _engine_onnx(lowered)
    _assert_fp16_weights_and_fp32_boundary(onnx_model, "Conv")
    # Batch norm: fp16 activations, fp32 statistics (see converters/passes/precision.py).
    types = elem_types(onnx_model)
    for node in (n for n in onnx_model.graph.node if n.op_type == "BatchNormalization"):
        assert types[node.input[0]] == TensorProto.FLOAT16
        assert {types[name] for name in node.input[1:]} == {TensorProto.FLOAT}
    with torch.no_grad():
        out = lowered(x)
        assert out.dtype == torch.float32
        torch.testing.assert_close(out, model(x), **FP16_TOL)


def test_bert_fp16() -> None:
    model, (ids,) = bert()
    lowered = _lower_fp16(model, (ids,))
    onnx_model = _engine_onnx(lowered)
    _assert_fp16_weights_and_fp32_boundary(onnx_model, "Gemm")
    assert _input_types(onnx_model, "MatMul") == {TensorProto.FLOAT16}  # attention scores
    assert _input_types(onnx_model, "Softmax") == {TensorProto.FLOAT}
    assert _input_types(onnx_model, "LayerNormalization") == {TensorProto.FLOAT}
    with torch.no_grad():
        out, expected = lowered(ids), model(ids)
    assert out.last_hidden_state.dtype == torch.float32
    torch.testing.assert_close(out.last_hidden_state, expected.last_hidden_state, **FP16_TOL)
    torch.testing.assert_close(out.pooler_output, expected.pooler_output, **FP16_TOL)


def test_fp16_shares_constants_and_casts_correctly() -> None:
    """A constant read by a kept-fp32 op (Pow's exponent) and an fp16 op (Mul) gets one copy per
    precision; Cast(int -> float) makes fp16; integer and bool tensors are untouched; a float32
    result feeding only float32 consumers (Exp -> ReduceSum) is not round-tripped through fp16."""

    def fn(x: torch.Tensor, i: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y = torch.pow(x.abs(), 0.5) + x * 0.5 + i.float()
        return y, x.exp().sum(-1), (i * 3 > 4)

    inputs = (torch.randn(3, 4), torch.arange(12).reshape(3, 4))
    lowered = _lower_fp16(Fn(fn), inputs)
    onnx_model = _engine_onnx(lowered)
    types = elem_types(onnx_model)
    producers = {out: n for n in onnx_model.graph.node for out in n.output}
    for node in onnx_model.graph.node:
        if node.op_type == "ReduceSum":
            assert producers[node.input[0]].op_type == "Exp"
    out = lowered(*inputs)
    assert [t.dtype for t in out] == [torch.float32, torch.float32, torch.bool]
    torch.testing.assert_close(out, fn(*inputs), **FP16_TOL)
    assert TensorProto.FLOAT16 in types.values()


def test_fp16_ops_without_a_float16_form_run_in_fp32() -> None:
    """IsInf (a vector norm's test for an inf in the slice) and a float Range take no float16 at
    opset 17: they run in float32 (the segments failed ONNX type inference: XCiT, EdgeNeXt,
    wav2vec2's weight norm)."""

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.linalg.vector_norm(x * 2, dim=-1), x[0] * torch.arange(0.5, x.shape[1], 0.5)[::2] + 1

    spec = trt_lower.TensorSpec((3, 2), (3, 4), (3, 8))  # a size known at run time: a Range, not a constant
    lowered = trt_lower.lower_to_trt(
        Fn(fn), (spec,), backend="onnxruntime", precision="fp16", require_full=True, min_block_size=1
    )
    check_onnx(lowered)
    onnx_model = _engine_onnx(lowered)
    assert _input_types(onnx_model, "IsInf") == {TensorProto.FLOAT}
    assert _input_types(onnx_model, "Range") == {TensorProto.FLOAT}
    for x in (torch.randn(3, 4), torch.randn(3, 7)):
        torch.testing.assert_close(lowered(x), fn(x), **FP16_TOL)


@pytest.mark.parametrize("trt_double", ["10.4.0", "11.0.0"], indirect=True)
def test_fp16_engine_on_tensorrt(trt_double: ModuleType) -> None:
    """Through the TensorRT path: fp16 ONNX with float32 engine I/O, built strongly typed (10.x
    by the network flag, 11.x always), never with the FP16 builder flag."""
    model, x = Fn(lambda x: torch.softmax(torch.relu(x @ x.T) * 2, -1)), torch.randn(4, 8)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="tensorrt", precision="fp16", min_block_size=1)
    assert not trt_double.state.last_build.builder_flags & 1
    strongly_typed = trt_double.state.last_build.network_flags == 1 << 1
    assert strongly_typed == trt_double.__version__.startswith("10.")
    torch.testing.assert_close(lowered(x), model(x), **FP16_TOL)


@pytest.mark.parametrize("trt_double", ["8.6.1"], indirect=True)
def test_fp16_engine_on_tensorrt_8_6_pins_the_float32_layers(trt_double: ModuleType) -> None:
    """8.6 types weakly: the FP16 flag, with the layers the ONNX keeps float32 (softmax, exp,
    pow, variance) held to float32 and OBEY_PRECISION_CONSTRAINTS; the double fails the build
    if one of them is left free to run in fp16."""
    model = Fn(lambda x: torch.softmax(x @ x.T, -1) + torch.exp(x).pow(2).var(-1, keepdim=True))
    x = torch.randn(4, 8)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="tensorrt", precision="fp16", require_full=True)
    flags = trt_double.state.last_build.builder_flags
    assert flags & 1 << int(trt_double.BuilderFlag.FP16)
    assert flags & 1 << int(trt_double.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)
    torch.testing.assert_close(lowered(x), model(x), **FP16_TOL)


def test_precision_is_validated() -> None:
    with pytest.raises(ValueError, match=r"precision must be one of \('fp32', 'fp16'\)"):
        trt_lower.lower_to_trt(torch.nn.ReLU(), (torch.ones(1),), precision="bf16")


# -- float64 -------------------------------------------------------------------------------------
@pytest.mark.parametrize("trt_double", ["10.4.0"], indirect=True)
def test_float64_engine_on_tensorrt_casts_at_the_boundary(trt_double: ModuleType) -> None:
    model, x = Fn(lambda x: (x.sin() * 2).sum(-1)), torch.randn(3, 5, dtype=torch.float64)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="tensorrt", min_block_size=1, require_full=True)
    out = lowered(x)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, model(x), rtol=1e-6, atol=1e-6)
    assert any("float64 as float32" in n for n in lowered.report.notes)


def test_float64_constant_beyond_float32_is_narrowed_to_inf() -> None:
    """Documented truncation: 1e300 becomes inf in the engine (here harmlessly, under a min)."""
    model, x = Fn(lambda x: torch.minimum(x * 1e300, torch.ones_like(x))), torch.rand(3, dtype=torch.float64) + 1
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", min_block_size=1, require_full=True)
    torch.testing.assert_close(lowered(x), model(x))


@pytest.mark.parametrize(
    "dtype, reason",
    [
        (torch.bfloat16, "dtype bfloat16 unsupported"),
        (torch.int8, "dtype int8 unsupported"),
        (torch.int16, "dtype int16 unsupported"),
    ],
)
def test_dtypes_engines_do_not_carry_fall_back(dtype: torch.dtype, reason: str) -> None:
    """On 10.4 (bfloat16 engines need "latest": tests/test_bfloat16.py), whichever TensorRT is installed."""
    model, x = Fn(lambda x: (x + x) * 2), torch.ones(4, dtype=dtype)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", min_block_size=1, trt_version="10.4")
    assert lowered.report.engines == []
    assert all(reason in f.reason for f in lowered.report.fallbacks), lowered.report.fallbacks


def test_uint8_only_crosses_the_boundary() -> None:
    """An image as uint8: the cast runs in the engine, arithmetic on uint8 stays eager."""
    model, x = Fn(lambda x: (x + 1).float() / 255 * 2), torch.randint(0, 255, (2, 3), dtype=torch.uint8)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", min_block_size=1)
    reasons = {f.op: f.reason for f in lowered.report.fallbacks}
    assert "only crosses the engine boundary" in reasons["aten.add.Tensor"]
    assert "aten._to_copy.default" in {op for e in lowered.report.engines for op in e.ops}
    check_onnx(lowered)
    torch.testing.assert_close(lowered(x), model(x))
