"""Build-time verification: planted miscompiles of each kind, on the TensorRT double and on ONNX
Runtime, are found, traced to their node and source line, and repaired so that the lowered module
matches eager PyTorch; with verify=False the same lowering is wrong."""

from __future__ import annotations

import inspect
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from trt_double import miscompile

import trt_lower
from splitter.index_check import IndexOutOfRangeError
from trt_lower.capture.aten_graph import CapturedGraph
from trt_lower.verify.stage import VerificationError

BACKENDS = ["onnxruntime", "tensorrt"]


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Linear(16, 32)
        self.outer = torch.nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.inner(x))  # the fused layer of the Wrong("Tanh") plant
        return torch.relu(self.outer(h)) + x


def _line(text: str) -> int:
    lines, start = inspect.getsourcelines(Block.forward)
    return start + next(i for i, line in enumerate(lines) if text in line)


def _plant(backend: str, monkeypatch: pytest.MonkeyPatch, double: ModuleType | None, *plants: Any) -> None:
    if backend == "onnxruntime":
        miscompile.on_onnxruntime(monkeypatch, *plants)
    else:
        assert double is not None
        double.state.miscompiles = list(plants)


@pytest.fixture
def double(request: pytest.FixtureRequest) -> ModuleType | None:
    """The TensorRT double for backend="tensorrt" tests, nothing for ONNX Runtime's."""
    if request.node.callspec.params["backend"] == "tensorrt":
        return request.getfixturevalue("trt_double")  # type: ignore[no-any-return]
    return None


# plant, precision, the culprit FX node, its source line's text, the repair that fixes it
CASES = {
    "wrong fused op": (miscompile.Wrong("Tanh"), "fp32", "tanh", "torch.tanh", "split"),
    "NaN layer": (miscompile.NaN("relu"), "fp32", "relu", "torch.relu", "eager"),
    "fp16 overflow": (miscompile.Fp16Overflow("addmm"), "fp16", "addmm", "self.inner(x)", "fp32"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_planted_miscompile_is_found_and_repaired(
    backend: str, case: str, double: ModuleType | None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plant, precision, culprit, text, action = CASES[case]
    torch.manual_seed(0)
    model, x = Block().eval(), torch.randn(8, 16)
    expected = model(x)
    tol = {"atol": 1e-2, "rtol": 1e-2} if precision == "fp16" else {}
    _plant(backend, monkeypatch, double, plant)

    lowered = trt_lower.lower_to_trt(model, (x,), backend=backend, precision=precision, min_block_size=1)
    torch.testing.assert_close(lowered(x), expected, **tol)
    (repair, *more) = [r for r in lowered.report.repairs if r.action == action]
    assert repair.node == culprit and not more
    assert repair.source.endswith(text) or text in repair.source
    assert f"test_verify.py:{_line(text)}" in repair.source
    assert repair.module_path == ("inner" if culprit == "addmm" else "")
    assert (repair.error_before is None) == (case == "NaN layer") and (repair.error_before or 2.0) > 1
    assert repair.error_after is not None and repair.error_after <= 1
    assert repair.built_by.startswith("TensorRT" if backend == "tensorrt" else "ONNX Runtime")
    assert all(e <= 1 for e in lowered.report.verify_errors.values())
    assert "repaired" in str(lowered.report)
    trt_lower.save(lowered, tmp_path / "repaired.trtl")  # the report's repairs travel with it
    assert trt_lower.load(tmp_path / "repaired.trtl", backend=backend).report.repairs == lowered.report.repairs

    unverified = trt_lower.lower_to_trt(
        model, (x,), backend=backend, precision=precision, min_block_size=1, verify=False
    )
    with pytest.raises(AssertionError):
        torch.testing.assert_close(unverified(x), expected, **tol)


@pytest.mark.parametrize("backend", BACKENDS)
def test_require_full_raises_with_the_evidence(
    backend: str, double: ModuleType | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, x = Block().eval(), torch.randn(8, 16)
    _plant(backend, monkeypatch, double, miscompile.NaN("relu"))
    with pytest.raises(VerificationError, match=r"culprit relu \(aten.relu.default\) in <model> at .*test_verify.py"):
        trt_lower.lower_to_trt(model, (x,), backend=backend, min_block_size=1, require_full=True)


@pytest.mark.parametrize("backend", ["tensorrt"])
@pytest.mark.parametrize("options", [{}, {"refittable": True}, {"optimization_level": 1}])
def test_the_engine_cache_keeps_the_repaired_plan(
    backend: str, double: ModuleType, tmp_path: Any, options: dict[str, Any]
) -> None:
    """The broken plan is dropped from the cache: a later lowering without verification (and
    without the plant) must not load it, whatever build options made it (they are in its key)."""
    model, x = Block().eval(), torch.randn(8, 16)
    double.state.miscompiles = [miscompile.Wrong("Tanh")]
    repaired = trt_lower.lower_to_trt(model, (x,), backend=backend, min_block_size=1, **options)
    assert [r.action for r in repaired.report.repairs] == ["split"]
    double.state.miscompiles = []
    again = trt_lower.lower_to_trt(model, (x,), backend=backend, min_block_size=1, verify=False, **options)
    torch.testing.assert_close(again(x), model(x))


def test_correct_engines_are_not_repaired() -> None:
    model, x = Block().eval(), torch.randn(8, 16)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", precision="fp16")
    assert lowered.report.repairs == [] and lowered.report.verify_errors
    assert lowered.report.timings["verify"] > 0


def test_verification_that_passes_makes_no_second_captured_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    """What verification reads of the nodes (which outputs have one right value) comes from the
    split graph; the captured graph unsplit, a second copy of the model's graph (0.6 s on
    BERT-base), is made only for a bisection."""
    made: list[CapturedGraph] = []
    graph_module = CapturedGraph.graph_module

    def counted(self: CapturedGraph) -> torch.fx.GraphModule:
        made.append(self)
        return graph_module(self)

    monkeypatch.setattr(CapturedGraph, "graph_module", counted)
    model, x = Block().eval(), torch.randn(8, 16)
    trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", verify=False)
    unverified = len(made)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime")
    assert len(made) == 2 * unverified and lowered.report.verify_errors and not lowered.report.repairs
    torch.testing.assert_close(lowered(x), model(x))


def test_an_example_input_eager_refuses_fails_the_lowering_from_the_background_eager_pass() -> None:
    """The eager pass runs in another thread beside the build; what it raises is still the
    lowering's error, in the caller's thread."""
    model = torch.nn.Sequential(torch.nn.Embedding(10, 16), Block()).eval()
    with pytest.raises(IndexOutOfRangeError, match="outside \\[0, 10\\)"):
        trt_lower.lower_to_trt(model, (torch.tensor([[1, 20]]),), backend="onnxruntime")


def test_tensorspec_inputs_are_verified_on_samples_only() -> None:
    model = Block().eval()
    spec = trt_lower.TensorSpec((1, 16), (4, 16), (8, 16))
    skipped = trt_lower.lower_to_trt(model, (spec,), backend="onnxruntime")
    assert not skipped.report.verify_errors
    assert any("verification skipped" in n and "verify_inputs" in n for n in skipped.report.notes)
    checked = trt_lower.lower_to_trt(model, (spec,), backend="onnxruntime", verify_inputs=(torch.randn(3, 16),))
    assert checked.report.verify_errors and not any("skipped" in n for n in checked.report.notes)
    with pytest.raises(ValueError, match=r"verify_inputs\[0\] is \(9, 16\) float32, outside its input's"):
        trt_lower.lower_to_trt(model, (spec,), backend="onnxruntime", verify_inputs=(torch.randn(9, 16),))


class TwoCumsums(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x.cumsum(0) * 2).cumsum(1) + 1


@pytest.mark.parametrize(("version", "eager"), [("8.6", []), ("10.4", ["cumsum_1"]), ("latest", ["cumsum_1"])])
def test_several_cumsum_axes_stay_out_of_engines_where_tensorrt_miscompiles_them(
    version: str, eager: list[str]
) -> None:
    """TensorRT 10.8+ (so the 10.4 target, which stands for 10.0-10.11, too) computes several
    CumSum layers over different axes wrongly: only the first axis's go into an engine."""
    x = torch.randn(4, 5)
    lowered = trt_lower.lower_to_trt(TwoCumsums(), (x,), backend="onnxruntime", trt_version=version, min_block_size=1)
    torch.testing.assert_close(lowered(x), TwoCumsums()(x))
    kept = {f.node: f.reason for f in lowered.report.fallbacks}
    assert sorted(kept) == eager
    for node in eager:
        assert "NVIDIA/TensorRT#4551" in kept[node] and "onnx/onnx-tensorrt#1034" in kept[node]


def test_the_support_table_flags_several_cumsum_axes_in_one_onnx() -> None:
    from onnx import TensorProto, helper

    from converters.passes import trt_support

    axis = [helper.make_tensor(f"axis{i}", TensorProto.INT64, [], [i]) for i in (0, 1)]
    nodes = [
        helper.make_node("CumSum", ["x", "axis0"], ["a"], name="first"),
        helper.make_node("CumSum", ["a", "axis1"], ["b"], name="second"),
        helper.make_node("CumSum", ["b", "axis0"], ["c"], name="third", reverse=1),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2, 3])],
        axis,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    assert {v.node for v in trt_support.violations(model, "latest")} == {"second", "third"}
    assert not trt_support.violations(model, "8.6")


class Counter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        return (x * 2).relu() + self.calls


def test_a_model_that_updates_its_buffers_is_not_run_for_reference() -> None:
    model = Counter()
    lowered = trt_lower.lower_to_trt(model, (torch.randn(4),), backend="onnxruntime", min_block_size=1)
    assert int(model.calls) == 0 and not lowered.report.verify_errors
    assert any("verification skipped: the model updates its inputs or buffers" in n for n in lowered.report.notes)
