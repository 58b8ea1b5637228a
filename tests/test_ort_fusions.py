"""The ONNX forms that make ONNX Runtime run our engines as cheaply as the exporter's whole graph
(bench/onnx_opdiff.py prints the op-type difference per real model). Untimed: they pin the
structure, and compare with eager like every converter test."""

from __future__ import annotations

import collections
import os
import tempfile
from typing import Callable

import onnx
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F
from harness import Fn, lower_and_compare

import trt_lower


def _raw_ops(lowered: trt_lower.LoweredModule) -> collections.Counter[str]:
    return collections.Counter(n.op_type for _, m in _engines(lowered) for n in onnx.load_from_string(m).graph.node)


def _engines(lowered: trt_lower.LoweredModule) -> list[tuple[str, bytes]]:
    engines = [(name, m.onnx_bytes) for name, m in lowered.named_children() if name.startswith("engine_")]
    assert engines, "nothing was lowered"
    return engines


def _optimized_ops(lowered: trt_lower.LoweredModule) -> collections.Counter[str]:
    """Op types after ONNX Runtime's optimizer, at the level create_session uses."""
    counts: collections.Counter[str] = collections.Counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in _engines(lowered):
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3
            options.optimized_model_filepath = os.path.join(tmp, f"{name}.onnx")
            ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
            model = onnx.load(options.optimized_model_filepath, load_external_data=False)
            counts.update(n.op_type for n in model.graph.node)
    return counts


class _Gelu(torch.nn.Module):
    def __init__(self, approximate: str) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)
        self.approximate = approximate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # A Relu after it: ONNX Runtime fuses no Gelu whose output is a graph output.
        return F.gelu(self.linear(x), approximate=self.approximate).relu()


@pytest.mark.parametrize(("approximate", "fused"), [("none", "Gelu"), ("tanh", "FastGelu")])
def test_gelu_runs_as_one_fused_kernel(approximate: str, fused: str) -> None:
    lowered = lower_and_compare(_Gelu(approximate).eval(), (torch.randn(4, 8) * 3,), ops=[torch.ops.aten.gelu.default])
    ops = _optimized_ops(lowered)
    assert ops[fused] == 1 and not ops["Erf"] and not ops["Tanh"], ops


def test_spatial_mean_is_global_average_pool() -> None:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()).eval()
    ops = _raw_ops(lower_and_compare(model, (torch.randn(1, 3, 12, 12),)))
    assert ops["GlobalAveragePool"] == 1 and not ops["ReduceMean"], ops


def _ones(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool)


def _causal(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return _ones(q, k).tril()


def _first_row_blind(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    mask = _ones(q, k)
    mask[0] = False
    return mask


# (mask built in forward from constants, the ops the converter must have left out / kept)
@pytest.mark.parametrize(
    ("mask", "absent", "present"),
    [
        (_ones, {"Where", "ReduceMax"}, set()),  # transformers' mask of torch.ones: no masking at all
        (_causal, {"ReduceMax"}, {"Where"}),  # every query sees a key: no fully-masked-row guard
        (_first_row_blind, set(), {"Where", "ReduceMax"}),  # a query sees nothing: eager gives zeros
    ],
    ids=["all-true", "causal", "blind-row"],
)
def test_constant_attention_mask_costs_only_what_it_can_change(
    mask: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], absent: set[str], present: set[str]
) -> None:
    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask(q, k))

    q, k, v = torch.randn(1, 2, 4, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    ops = _raw_ops(lower_and_compare(attend, (q, k, v), ops=[torch.ops.aten.scaled_dot_product_attention.default]))
    assert not absent & set(ops) and present <= set(ops), ops


@pytest.mark.parametrize("causal", ["mask", "is_causal"])
def test_a_constant_boolean_mask_is_added_as_a_bias_onnx_runtime_folds(causal: str) -> None:
    # torch adds a boolean mask as 0 / -inf; built from constants, only that Add is left to run.
    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if causal == "is_causal":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=_causal(q, k))

    q, k, v = torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8)
    ops = _optimized_ops(
        lower_and_compare(attend, (q, k, v), ops=[torch.ops.aten.scaled_dot_product_attention.default])
    )
    assert not ops["Where"] and ops["Add"] == 1, ops


def test_attention_mask_from_an_input_keeps_the_blind_row_guard() -> None:
    mask = torch.ones(4, 5, dtype=torch.bool)
    mask[2] = False
    lowered = lower_and_compare(
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        (torch.randn(1, 4, 8), torch.randn(1, 5, 8), torch.randn(1, 5, 8), mask),
    )
    assert _raw_ops(lowered)["ReduceMax"] == 1


class _Stem(torch.nn.Module):
    """ResNet's stem and a residual block: convolution, max pooling, convolution plus identity."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.block = torch.nn.Conv2d(16, 16, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.max_pool2d(torch.relu(self.conv(x)), 3, 2, 1)
        return torch.relu(self.block(y) + y)


def test_max_pool_with_nan_windows_stays_in_the_blocked_layout() -> None:
    stem = _Stem().eval()
    lowered = lower_and_compare(stem, (torch.randn(1, 3, 16, 16),))
    ops = _optimized_ops(lowered)
    # One reorder back to NCHW, for the output: none around the pool, the Add+Relu fused.
    assert ops["ReorderOutput"] == 1 and not ops["Where"] and not ops["IsNaN"] and not ops["Add"], ops
    x = torch.randn(1, 3, 16, 16)
    x[0, 1, 5, 6] = float("nan")  # the convolution spreads it over part of some pooling windows: NaN there
    with torch.no_grad():
        torch.testing.assert_close(lowered(x), stem(x), equal_nan=True)


@pytest.mark.parametrize(
    "pool",
    [
        lambda t: F.max_pool2d(t, 2),
        lambda t: F.max_pool2d(t, 3, 2, 1, ceil_mode=True),
        lambda t: F.max_pool2d(t, 3, 1, 1),
    ],
    ids=["k2", "k3s2p1_ceil", "k3s1p1"],
)
def test_max_pool_gives_nan_inf_and_negative_zero_as_eager(pool: Callable[[torch.Tensor], torch.Tensor]) -> None:
    nan, inf = float("nan"), float("inf")
    x = torch.randn(1, 16, 8, 8)
    x[0, 0, 0, :2] = torch.tensor([nan, inf])  # NaN beside +inf: NaN
    x[0, 1, 0, :2] = torch.tensor([inf, -inf])  # +inf beside -inf (their mean is NaN): +inf
    x[0, 2, :2, :2] = -0.0  # a window of -0.0 only (k2): -0.0
    x[0, 3, 2:4, 2:4] = torch.tensor([[-inf, -0.0], [-inf, -inf]])  # -0.0
    x[0, 4, 7, 7] = nan  # in the last window only
    lowered = lower_and_compare(pool, (torch.randn(1, 16, 8, 8),))
    actual, expected = lowered(x), pool(x)
    torch.testing.assert_close(actual, expected, equal_nan=True)
    assert torch.equal(actual.signbit() & ~actual.isnan(), expected.signbit() & ~expected.isnan())


@pytest.mark.parametrize(
    "pool, after_relu",
    [
        (lambda t: F.max_pool2d(torch.relu(t), 2), True),
        (lambda t: F.max_pool2d(torch.relu(t), 3, 2, 1, ceil_mode=True), True),
        (lambda t: F.adaptive_max_pool2d(torch.relu(t), 1), True),
        (lambda t: F.max_pool2d(torch.cat([torch.relu(t[:, :4]), torch.relu(t[:, 4:])], 1), 2), True),
        (lambda t: F.max_pool2d(torch.cat([torch.relu(t[:, :4]), t[:, 4:]], 1), 2), False),
    ],
    ids=["k2", "k3s2p1_ceil", "global", "cat_of_relus", "cat_with_a_plain_input"],
)
def test_max_pool_of_relu_outputs_takes_tanh_of_the_pooled_mean_and_gives_eager_nan_windows(
    pool: Callable[[torch.Tensor], torch.Tensor], after_relu: bool
) -> None:
    nan, inf = float("nan"), float("inf")
    x = torch.randn(1, 8, 8, 8)
    x[0, 0, 0, :2] = torch.tensor([nan, inf])  # NaN beside +inf: NaN
    x[0, 1, 0, :2] = torch.tensor([inf, -inf])  # +inf beside a ReLU's 0: +inf
    x[0, 2, :, :] = inf  # every window +inf (their mean is +inf, its tanh 1): +inf
    x[0, 5, 0, :2] = torch.tensor([inf, -inf])  # without a ReLU: +inf beside -inf (their mean is NaN): +inf
    x[0, 6, 7, 7] = nan  # in the last window only
    lowered = lower_and_compare(pool, (torch.randn(1, 8, 8, 8),))
    nodes = [n for _, m in _engines(lowered) for n in onnx.load_from_string(m).graph.node]
    averaged = {o for n in nodes if n.op_type.endswith("AveragePool") for o in n.output}
    # Tanh on the pooled mean (a ReLU's output holds no -inf), else on the input.
    assert [n.input[0] in averaged for n in nodes if n.op_type == "Tanh"] == [after_relu], nodes
    torch.testing.assert_close(lowered(x), pool(x), equal_nan=True)


def test_max_pool_over_a_dynamic_channel_count_gives_nan_windows() -> None:
    spec = trt_lower.TensorSpec((1, 2, 8), (1, 4, 8), (1, 8, 8))
    fn = lambda t: F.max_pool1d(t, 2)  # noqa: E731
    lowered = trt_lower.lower_to_trt(Fn(fn), (spec,), backend="onnxruntime", min_block_size=1)
    assert len(lowered.report.engines) == 1 and not lowered.report.fallbacks
    x = torch.randn(1, 5, 8)
    x[0, 0, 0] = float("nan")  # beside a number: NaN
    x[0, 1, 2:4] = torch.tensor([float("inf"), -float("inf")])
    torch.testing.assert_close(lowered(x), fn(x), equal_nan=True)
