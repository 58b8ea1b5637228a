"""Accuracy debugging: a planted converter bug is traced to its node, module and source line;
fp16_sensitive repairs an fp16 overflow; the repro directory runs in ONNX Runtime to its outputs."""

from __future__ import annotations

import inspect
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import numpy as np
import onnxruntime as ort
import pytest
import torch
import torchvision
from onnx import TensorProto
from polygraphy.comparator import RunResults
from polygraphy.json import load_json
from transformers import BertConfig, BertModel
from transformers.activations import GELUActivation

import trt_lower
from converters.core import registry
from converters.core.builder import GraphBuilder, Value
from converters.passes.onnx_types import elem_types
from trt_lower.cli import commands as cli
from trt_lower.debug import first_divergence, fp16_sensitive
from trt_lower.debug.repro import write_repro
from trt_lower.testing import LoweredMismatch, assert_lowered_close

aten = torch.ops.aten
TOL = {"rtol": 1e-3, "atol": 1e-3}


def plant(monkeypatch: pytest.MonkeyPatch, op: Any, node: str, wrong: Callable[[GraphBuilder, Value], Value]) -> None:
    """Make `op`'s registered converter emit `wrong` for FX node `node` only (a converter bug)."""
    right = registry.lookup(op)
    assert right is not None

    def converter(b: GraphBuilder, x: Value, *args: Any, **kwargs: Any) -> Value:
        assert b.node is not None
        return wrong(b, x) if b.node.name == node else right.fn(b, x, *args, **kwargs)

    monkeypatch.setitem(registry._REGISTRY, op, registry.Converter(op, converter, right.capability))


def line_of(fn: Callable[..., Any], code: str) -> str:
    """'file:line' of the first line of `fn` containing `code`."""
    lines, start = inspect.getsourcelines(fn)
    return f"{inspect.getsourcefile(fn)}:{start + next(i for i, s in enumerate(lines) if code in s)}"


def test_resnet_planted_relu_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """relu_3 (block layer1.1's first relu; the block calls the same ReLU module twice, so only
    the source line tells the two apart) is converted to a LeakyRelu."""
    plant(monkeypatch, aten.relu.default, "relu_3", lambda b, x: b.op("LeakyRelu", x, alpha=0.1, dtype=x.dtype))
    model, x = torchvision.models.resnet18().eval(), torch.randn(1, 3, 32, 32)
    # verify=False: build-time verification would find and repair the planted bug.
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", verify=False)
    assert len(lowered.report.engines) == 1

    found = first_divergence(model, lowered, (x,), **TOL)
    assert found is not None
    assert (found.engine, found.node, found.op) == ("engine_0", "relu_3", "aten.relu.default")
    assert found.onnx_nodes == ["relu_3/LeakyRelu"]
    assert (found.module_path, found.module_type) == ("layer1.1.relu", "torch.nn.modules.activation.ReLU")
    source = line_of(torchvision.models.resnet.BasicBlock.forward, "out = self.relu(out)")
    assert found.source.startswith(source + " in forward: out = self.relu(out)")
    assert found.nodes == ["relu_3"] and found.max_abs > 1e-2
    # The table: the whole engine (its output addmm) failed first; the last check was relu_3 alone.
    assert (found.table[0].node, found.table[0].passed) == ("addmm", False)
    assert (found.table[-1].segment, found.table[-1].passed) == ("relu_3", False)
    assert any(row.passed for row in found.table)

    with pytest.raises(AssertionError) as failure:
        assert_lowered_close(model, lowered, (x,), **TOL)
    message = str(failure.value)
    for part in (
        "differs from eager PyTorch in output",
        "max abs err",
        "node relu_3",
        "layer1.1.relu",
        source,
        "relu_3/LeakyRelu",
    ):
        assert part in message, part


def tiny_bert() -> tuple[BertModel, torch.Tensor]:
    config = BertConfig(
        vocab_size=100,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=32,
    )
    return BertModel(config).eval(), torch.randint(0, 100, (2, 16))


def test_bert_planted_gelu_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second layer's GELU (gelu_1) becomes a Relu; the first (same module type, same line)
    stays right, so only the node and module path tell them apart."""
    plant(monkeypatch, aten.gelu.default, "gelu_1", lambda b, x: b.op("Relu", x, dtype=x.dtype))
    model, ids = tiny_bert()
    lowered = trt_lower.lower_to_trt(model, (ids,), backend="onnxruntime", verify=False)

    # assert_lowered_close -> check_accuracy(details=True) -> first_divergence
    with pytest.raises(
        LoweredMismatch,
        match=r"(?s)output\['last_hidden_state'\], output\['pooler_output'\]\n.*"
        r"node gelu_1 \(aten\.gelu\.default\).*encoder\.layer\.1\.intermediate",
    ) as e:
        assert_lowered_close(model, lowered, (ids,), **TOL)
    result = e.value.result
    assert not result.passed and [o.passed for o in result.outputs] == [False, False]
    found = result.divergence
    assert found is not None
    assert (found.engine, found.node, found.onnx_nodes) == ("engine_0", "gelu_1", ["gelu_1/Relu"])
    assert found.module_path == "encoder.layer.1.intermediate.intermediate_act_fn"
    assert found.module_type == "transformers.activations.GELUActivation"
    assert found.source.startswith(line_of(GELUActivation.forward, "return self.act(input)"))


@pytest.mark.parametrize("name", ["resnet18", "bert"])
def test_correct_model_has_no_divergence(name: str) -> None:
    model, inputs = tiny_bert() if name == "bert" else (torchvision.models.resnet18().eval(), torch.randn(1, 3, 32, 32))
    lowered = assert_lowered_close(model, None, (inputs,), backend="onnxruntime", **TOL)
    assert first_divergence(model, lowered, (inputs,), **TOL) is None
    result = trt_lower.check_accuracy(model, lowered, (inputs,), **TOL, details=True)
    assert result.passed and result.divergence is None


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.sigmoid(self.conv(x)) * 2
        return self.fc(y.mean((2, 3)))


def test_first_divergence_on_tensorrt(trt_double: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """On the TensorRT backend the checked segments are TensorRT engines too (here the double's);
    the culprit sits in the second engine, behind an eager node."""
    plant(monkeypatch, aten.mean.dim, "mean", lambda b, x: b.op("ReduceMax", x, axes=[2, 3], keepdims=0, dtype=x.dtype))
    model, x = Block().eval(), torch.randn(2, 3, 8, 8)
    lowered = trt_lower.lower_to_trt(
        model, (x,), backend="tensorrt", fallback_ops=["aten.mul.Tensor"], min_block_size=1, verify=False
    )
    assert [e.name for e in lowered.report.engines] == ["engine_0", "engine_1"]
    builds = trt_double.state.builds
    found = first_divergence(model, lowered, (x,), **TOL)
    assert found is not None and (found.engine, found.node, found.module_path) == ("engine_1", "mean", "")
    assert found.source.startswith(line_of(Block.forward, "y.mean((2, 3))"))
    assert trt_double.state.builds > builds  # the checked segments were built by "TensorRT"
    assert [r.passed for r in found.table if r.engine == "engine_0"] == [True]


class Overflow(torch.nn.Module):
    """A scale beyond fp16's range: `fc(x) * 1e5` exceeds 65504. (ONNX Runtime's CPU provider
    computes fp16 activations in float32, so there the overflow shows through the constant,
    which the fp16 pass saturates to 65504; on TensorRT the product itself becomes inf.)"""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        big = self.fc(x) * 1e5
        return torch.tanh(big * 1e-5)


def test_fp16_sensitive_repairs_an_overflow() -> None:
    model, x = Overflow().eval(), torch.randn(8, 16)
    tol = {"rtol": 1e-2, "atol": 1e-2}
    fp16 = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", precision="fp16", verify=False)
    assert not trt_lower.check_accuracy(model, fp16, (x,), **tol)
    keep = fp16_sensitive(model, (x,), backend="onnxruntime", **tol)
    assert keep == ["mul"]  # fc(x) * 1e5
    repaired = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", precision="fp16", keep_fp32=keep)
    assert trt_lower.check_accuracy(model, repaired, (x,), **tol)
    assert repaired.report.keep_fp32 == sorted(keep)
    graph = repaired.engine_0.segment.model
    types = elem_types(graph)
    (mul,) = [n for n in graph.graph.node if n.name == "mul/Mul"]
    assert {types[i] for i in mul.input} == {TensorProto.FLOAT}  # kept float32, its constant 1e5 too
    assert TensorProto.FLOAT16 in types.values()  # the rest is still fp16
    # By op: every multiplication float32.
    by_op = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", precision="fp16", keep_fp32=["aten.mul.Tensor"])
    assert trt_lower.check_accuracy(model, by_op, (x,), **tol)


def test_keep_fp32_is_validated() -> None:
    model, x = Overflow().eval(), torch.randn(8, 16)
    with pytest.raises(ValueError, match="keep_fp32 applies to precision='fp16' only"):
        trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", keep_fp32=["mul"])
    with pytest.raises(ValueError, match="keep_fp32 names no node of the captured graph: mull"):
        trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", precision="fp16", keep_fp32=["mull"])


def _check_repro(out: Path, expected: list[torch.Tensor]) -> None:
    """The directory reads back with Polygraphy's JSON reader, and its ONNX run by ONNX Runtime
    on the saved inputs gives the saved outputs, which are eager's."""
    (feeds,) = load_json(str(out / "inputs.json"))
    ((runner, (saved,)),) = RunResults.load(str(out / "eager_outputs.json"))
    session = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    ran = session.run(None, feeds)
    assert [o.name for o in session.get_outputs()] == list(saved.keys())
    for got, want, eager in zip(ran, saved.values(), expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(want, eager.numpy(), rtol=1e-4, atol=1e-4)
        assert np.abs(want).max() > 0


def test_repro_runs_in_onnxruntime_to_the_saved_outputs(tmp_path: Path) -> None:
    model, ids = tiny_bert()
    lowered = trt_lower.lower_to_trt(model, (ids,), backend="onnxruntime")
    command = write_repro(model, lowered, (ids,), "engine_0", tmp_path, **TOL)
    assert command.startswith(f"polygraphy run {tmp_path}/model.onnx --trt --onnxrt --load-inputs ")
    with torch.no_grad():
        eager = model(ids)
    # The engine's first output: its embedding's index check (all token ids in range).
    _check_repro(tmp_path, [torch.tensor(True), eager.last_hidden_state, eager.pooler_output])
    with pytest.raises(ValueError, match=r"no engine 'engine_7'; the lowered module has \['engine_0'\]"):
        write_repro(model, lowered, (ids,), "engine_7", tmp_path)


def test_repro_cli_from_a_saved_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`trt-lower repro FILE`: a file written by trt_lower.save, read back by trt_lower.load."""
    model, x = Block().eval(), torch.randn(2, 3, 8, 8)
    trt_lower.save(trt_lower.lower_to_trt(model, (x,), backend="onnxruntime"), tmp_path / "model.trtl")
    out = tmp_path / "repro"
    assert cli.main(["repro", str(tmp_path / "model.trtl"), "--engine", "engine_0", "-o", str(out)]) == 0
    assert f"polygraphy run {out}/model.onnx --trt --onnxrt" in capsys.readouterr().out
    (feeds,) = load_json(str(out / "inputs.json"))
    with torch.no_grad():
        expected = model(torch.from_numpy(feeds["x"]))
    _check_repro(out, [expected])
    with pytest.raises(SystemExit, match=r"trt-lower repro: ValueError: engine_3: not an ONNX Runtime engine"):
        cli.main(["repro", str(tmp_path / "model.trtl"), "--engine", "engine_3", "-o", str(out)])
