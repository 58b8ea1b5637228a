"""torch.cond as an ONNX If inside an engine: both branches in the engine, picked at run time."""

from __future__ import annotations

import logging
from types import ModuleType

import onnx
import pytest
import torch
from harness import Fn, lower_and_compare
from onnx import TensorProto, helper

import trt_lower
from converters.passes import trt_support


class Branchy(torch.nn.Module):
    """A data-dependent branch between two layers; the then-branch uses a weight too."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        out = torch.cond(y.sum() > 0, lambda t: self.lin(t).relu() * 2, lambda t: t.sigmoid() - 1, (y,))
        return out + 1


X = torch.randn(2, 4, generator=torch.Generator().manual_seed(0))
# Inputs that take each branch (the model is fixed by the seed fixture before it is built).
INPUTS = (X, -X, 5 * X, -5 * X)


def _branches_taken(model: torch.nn.Module) -> set[bool]:
    return {bool(model.lin(x).sum() > 0) for x in INPUTS}


def test_cond_runs_as_an_if_inside_one_engine() -> None:
    model = Branchy().eval()
    assert _branches_taken(model) == {True, False}
    lowered = lower_and_compare(model, (X,), ops=["cond"])
    assert len(lowered.report.engines) == 1
    assert "If" in {n.op_type for n in onnx.load_from_string(lowered.engine_0.onnx_bytes).graph.node}
    for x in INPUTS:
        torch.testing.assert_close(lowered(x), model(x))


@pytest.mark.parametrize("trt_double", ["8.6.1", "10.13.0"], indirect=True)
def test_cond_on_the_tensorrt_double(trt_double: ModuleType) -> None:
    model = Branchy().eval()
    lowered = trt_lower.lower_to_trt(model, (X,), backend="tensorrt", require_full=True, min_block_size=1)
    assert len(lowered.report.engines) == 1 and "cond" in lowered.report.engines[0].ops
    before = trt_double.state.executions  # build-time verification ran it once
    for x in INPUTS:
        torch.testing.assert_close(lowered(x), model(x))
    assert trt_double.state.executions == before + len(INPUTS)


def test_a_branch_without_converter_keeps_the_cond_eager() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda t: torch.special.zeta(t, t), lambda t: t - 1, (x,)) + 1

    lowered = trt_lower.lower_to_trt(Fn(fn), (X,), backend="onnxruntime", min_block_size=1)
    (fallback,) = lowered.report.fallbacks
    assert fallback.op == "cond" and "no converter for aten.special_zeta.default" in fallback.reason
    torch.testing.assert_close(lowered(X), fn(X))


def test_cond_stays_eager_under_fp16(caplog: pytest.LogCaptureFixture) -> None:
    model = Branchy().eval()
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        lowered = trt_lower.lower_to_trt(model, (X,), backend="onnxruntime", min_block_size=1, precision="fp16")
    assert [f.op for f in lowered.report.fallbacks] == ["cond"]
    assert "precision='fp16' does not rewrite torch.cond's branches" in caplog.text
    for x in INPUTS:
        torch.testing.assert_close(lowered(x), model(x), rtol=1e-2, atol=1e-2)


def test_the_support_table_reaches_into_if_branches() -> None:
    det = helper.make_node("Det", ["x"], ["d"], name="c/then/Det")
    then = helper.make_graph([det], "then", [], [helper.make_tensor_value_info("d", TensorProto.FLOAT, [])])
    other = helper.make_graph(
        [helper.make_node("ReduceMax", ["x"], ["e"], name="c/else/ReduceMax", keepdims=0)],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [])],
    )
    node = helper.make_node("If", ["p"], ["y"], name="c/If", then_branch=then, else_branch=other)
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("p", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    found = [str(v) for v in trt_support.violations(model, "latest")]
    assert found == [
        "node 'c/then/Det' (Det): Det is not in the TensorRT support table (converters/passes/trt_support.py)"
    ]
