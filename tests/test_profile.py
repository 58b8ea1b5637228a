"""LoweredModule.profile on ONNX Runtime: rows per engine layer and eager node, mapped to the FX
nodes and the model's source lines, adding up to the measured call; its table, JSON and Chrome
trace; a saved file profiled in a fresh process without the model's code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torchvision
import transformers

import trt_lower
from trt_lower.profile import ort_layers
from trt_lower.profile.measure import ProfileError
from trt_lower.profile.profile import Profile

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def resnet() -> tuple[trt_lower.LoweredModule, torch.Tensor]:
    torch.manual_seed(0)
    x = torch.randn(1, 3, 64, 64)
    return trt_lower.lower_to_trt(torchvision.models.resnet18().eval(), (x,), backend="onnxruntime"), x


@pytest.fixture(scope="module")
def bert() -> tuple[trt_lower.LoweredModule, torch.Tensor]:
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=100, hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256
    )
    ids = torch.randint(0, 100, (2, 64))
    return trt_lower.lower_to_trt(transformers.BertModel(config).eval(), (ids,), backend="onnxruntime"), ids


def _with_source(profile: Profile, file: str) -> float:
    """The share of the rows with a source line in `file` (of rows, not of time: where other
    work shares the cores, one row can take a stall of tens of ms)."""
    return sum(any(file in n.source for n in r.nodes) for r in profile.rows) / len(profile.rows)


def _adds_up(profile: Profile) -> None:
    assert sum(r.seconds for r in profile.rows) + profile.glue_seconds == pytest.approx(profile.call_seconds)


def test_resnet_layers_name_their_fx_nodes_and_torchvision_lines(resnet: Any) -> None:
    lowered, x = resnet
    profile = lowered.profile(x, iterations=5, warmup=1)
    _adds_up(profile)
    # How much of the call the rows cover is a timing: bench/bench_profile.py measures it.
    assert all(r.kind == "layer" and r.engine == "engine_0" and r.nodes for r in profile.rows)
    assert _with_source(profile, "torchvision/models/resnet.py") == 1
    # ONNX Runtime fuses convolution, batch norm, the residual add and relu into one Conv: one row, four nodes.
    fused = max(profile.rows, key=lambda r: len(r.nodes))
    assert {n.op for n in fused.nodes} >= {"aten.convolution.default", "aten.relu.default"}
    assert all(n.module.startswith("layer") for n in fused.nodes if n.op == "aten.convolution.default")


def test_bert_layers_name_transformers_lines(bert: Any) -> None:
    lowered, ids = bert
    profile = lowered.profile(ids, iterations=5, warmup=1)
    _adds_up(profile)
    assert all(r.nodes for r in profile.rows)
    # The rest: gelu (transformers/activations.py), and the embedding's index check trt_lower adds (no line).
    assert _with_source(profile, "transformers/models/bert/modeling_bert.py") > 0.8
    assert all("/transformers/" in n.source for r in profile.rows for n in r.nodes if n.source)
    assert any("encoder.layer.1" in n.module for r in profile.top(10) for n in r.nodes)


def test_layer_rows_are_onnx_runtimes_own_profile_of_a_run(resnet: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows are one measured run of ONNX Runtime's profiler output, node for node."""
    lowered, x = resnet
    recorded: list[Any] = []
    real = ort_layers.run_times

    def record(events: list[Any]) -> list[dict[str, float]]:
        recorded.append(events)
        return real(events)

    monkeypatch.setattr(ort_layers, "run_times", record)
    profile = lowered.profile(x, iterations=3, warmup=1)
    runs: dict[int, dict[str, float]] = {}
    model_runs = sorted((e for e in recorded[0] if e["name"] == "model_run"), key=lambda e: e["ts"])
    for e in recorded[0]:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            run = next(i for i, r in enumerate(model_runs) if r["ts"] <= e["ts"] <= r["ts"] + r["dur"])
            runs.setdefault(run, {})[e["name"].removesuffix("_kernel_time")] = e["dur"] * 1e-6
    rows = {r.name: r.seconds for r in profile.rows}
    assert any(rows == pytest.approx(run) for i, run in runs.items() if i >= 1)  # not the warm-up run


def test_eager_nodes_are_rows_with_their_line() -> None:
    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.a(x)) * 2 + 1
            y = torch.cumsum(y, 1)  # kept eager below
            return torch.sigmoid(self.b(y)) - 1

    x = torch.randn(4, 8)
    lowered = trt_lower.lower_to_trt(
        Model().eval(), (x,), backend="onnxruntime", fallback_ops=["aten.cumsum.default"], min_block_size=1
    )
    profile = lowered.profile(x, iterations=3, warmup=1)
    _adds_up(profile)
    (eager,) = [r for r in profile.rows if r.kind == "eager"]
    assert eager.name == "cumsum" and eager.engine is None
    assert eager.nodes[0].source.startswith(f"{__file__}:") and "torch.cumsum(y, 1)" in eager.nodes[0].source
    assert [r.engine for r in profile.rows if r.kind == "layer"] == sorted(r.engine for r in profile.rows if r.engine)


def test_profiling_leaves_the_module_as_it_was(resnet: Any) -> None:
    lowered, x = resnet
    session, forward, expected = lowered.engine_0._session, type(lowered).forward, lowered(x)
    lowered.profile(x, iterations=1, warmup=0)
    assert lowered.engine_0._session is session and type(lowered).forward is forward
    torch.testing.assert_close(lowered(x), expected)


@pytest.mark.parametrize("iterations, warmup", [(0, 1), (3, -1)])
def test_refuses_iterations_out_of_range(resnet: Any, iterations: int, warmup: int) -> None:
    lowered, x = resnet
    with pytest.raises(ProfileError, match=f"iterations={iterations}, warmup={warmup}"):
        lowered.profile(x, iterations=iterations, warmup=warmup)
