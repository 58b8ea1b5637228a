"""What models return beside their result: the features a Linear reads, views of them, the same
tensor twice, an input, nested tuples and dicts. Each lowers whole (require_full) and matches eager.

The first cases made invalid ONNX Runtime graphs (`Node input 'relu_relu' is not a graph input`,
the segment then ran eagerly): an engine output that a Gemm over a transposed weight also read,
taken apart by ONNX Runtime's own graph optimizers."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
from harness import lower_and_compare


class Head(torch.nn.Module):
    """A Linear over features that are also returned, after `returned` rewrites them."""

    def __init__(self, returned: Callable[[torch.Tensor, torch.Tensor], Any]) -> None:
        super().__init__()
        self.body, self.fc = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)
        self.returned = returned

    def forward(self, x: torch.Tensor) -> Any:
        feat = torch.relu(self.body(x))
        return self.returned(self.fc(feat), feat)


CASES: dict[str, Callable[[torch.Tensor, torch.Tensor], Any]] = {
    "features": lambda y, f: (y, f),
    "features_first": lambda y, f: (f, y),
    "a_view_of_them": lambda y, f: (y, f.view(2, 4, 4)),
    "a_reshape_of_them": lambda y, f: (y, f.reshape(-1)),
    "them_twice": lambda y, f: (y, f, f),
    "the_result_twice": lambda y, f: (y, y, f),
    "nested": lambda y, f: {"logits": y, "pair": (f, (f.flatten(), y)), "list": [f]},
    "a_dict": lambda y, f: {"logits": y, "features": f},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_features_returned_beside_the_linear_that_reads_them(case: str) -> None:
    lowered = lower_and_compare(Head(CASES[case]).eval(), (torch.randn(2, 8),))
    assert lowered.report.coverage == 1.0, str(lowered.report)


def test_a_cloned_feature_is_returned_too() -> None:
    fc = torch.nn.Linear(8, 4).eval()

    def head(x: torch.Tensor) -> Any:
        feat = torch.relu(x).clone()
        return fc(feat), feat

    lower_and_compare(head, (torch.randn(2, 8),))


class TransposedInput(torch.nn.Module):
    """The structural fuzzer's graph: `x.t()` returned beside a linear of it (constant weights)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = x.t()
        weight = torch.arange(3.0 * x.shape[0]).reshape(3, x.shape[0]) / 8
        return torch.nn.functional.linear(t, weight, torch.tensor([0.5, 0.25, 0.0])), t


@pytest.mark.parametrize("shape", [(1, 1), (2, 3)])
def test_a_transposed_input_returned_beside_a_linear_of_it(shape: tuple[int, int]) -> None:
    """ONNX Runtime's Gemm/Transpose fusion folded the returned Transpose into the Gemm too and
    dropped the node making that output: the session failed to load, with verify=False too
    (trt_lower/engine/ort_session.py disables the fusion)."""
    lower_and_compare(TransposedInput(), (torch.randn(*shape),), verify=False)


def test_an_input_passed_through_beside_a_linear() -> None:
    fc = torch.nn.Linear(8, 4).eval()
    lower_and_compare(lambda x: (fc(x), x, x), (torch.randn(2, 8),))


class PooledHead(torch.nn.Module):
    """A CNN classifier that also returns its pooled, flattened features (metric learning,
    distillation)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pooled = torch.nn.functional.adaptive_avg_pool2d(torch.relu(self.conv(x)), 1)
        feat = torch.flatten(pooled, 1)
        return self.fc(feat), feat


def test_a_pooled_head_returning_its_features_lowers_whole() -> None:
    lowered = lower_and_compare(
        PooledHead().eval(), (torch.randn(2, 3, 16, 16),), min_block_size=3, require_full=False, atol=1e-5, rtol=1e-5
    )
    assert lowered.report.coverage == 1.0 and len(lowered.report.engines) == 1, str(lowered.report)
