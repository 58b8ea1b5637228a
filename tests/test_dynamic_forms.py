"""Op forms whose bounds, shifts or pair counts come from sizes known at run time, inside one
engine on TensorRT 10.4 and latest (the TensorRT double, whose engines are ONNX Runtime sessions;
conversion audits the ONNX against that version's parser table)."""

from __future__ import annotations

from types import ModuleType
from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F
from harness import Fn, engine_ops

import trt_lower

Spec = trt_lower.TensorSpec

FORMS = [
    # F.pad(mode="circular") copies the wrapped edges with slice_scatter at bounds read from sizes.
    pytest.param(
        lambda x: F.pad(x * 2, (1, 2, 2, 1), mode="circular"),
        Spec((1, 3, 4, 4), (2, 3, 8, 8), (2, 3, 16, 16)),
        [(1, 3, 4, 4), (2, 3, 5, 7), (2, 3, 16, 9)],
        torch.randn,
        "aten.slice_scatter.default",
        id="circular-pad",
    ),
    pytest.param(
        lambda x: torch.roll(x * 2, x.shape[1] // 2, 1),
        Spec((2, 2), (2, 8), (2, 16)),
        [(2, 2), (2, 7), (2, 16)],
        torch.randn,
        "aten.roll.default",
        id="roll-by-a-size",
    ),
    pytest.param(
        lambda x: torch.roll(x * 2, x.shape[0] - 1),
        Spec((1, 3), (4, 3), (6, 3)),
        [(1, 3), (5, 3), (6, 3)],
        torch.randn,
        "aten.roll.default",
        id="roll-flat-by-a-size",
    ),
    pytest.param(
        F.pdist,
        Spec((3, 3), (5, 3), (40, 3)),
        [(3, 3), (4, 3), (7, 3), (40, 3)],
        torch.randn,
        "aten._pdist_forward.default",
        id="pdist",
    ),
    pytest.param(
        lambda x: F.pdist(x, p=1),
        Spec((3, 4), (5, 4), (9, 4)),
        [(3, 4), (9, 4)],
        torch.randn,
        "aten._pdist_forward.default",
        id="pdist-p1",
    ),
    pytest.param(
        lambda x: F.pixel_shuffle(x * 2, 2),
        Spec((1, 3, 8, 2, 2), (2, 3, 8, 4, 5), (4, 3, 8, 8, 8)),
        [(1, 3, 8, 2, 2), (3, 3, 8, 3, 6)],
        torch.randn,
        "aten.pixel_shuffle.default",
        id="pixel_shuffle-rank-5",
    ),
    pytest.param(
        lambda x: F.pixel_shuffle(x * 2, 2),
        Spec((2, 1, 3, 8, 2, 2), (2, 1, 3, 8, 4, 5), (2, 1, 3, 8, 8, 8), dtype=torch.int64),
        [(2, 1, 3, 8, 3, 6)],
        lambda s: torch.randint(-9, 9, s),
        "aten.pixel_shuffle.default",
        id="pixel_shuffle-rank-6-int",
    ),
    pytest.param(
        lambda x: F.pixel_unshuffle(x * 2, 2),
        Spec((1, 3, 2, 2, 2), (2, 3, 2, 4, 6), (4, 3, 2, 8, 8)),
        [(1, 3, 2, 4, 4), (3, 3, 2, 6, 8)],
        torch.randn,
        "aten.pixel_unshuffle.default",
        id="pixel_unshuffle-rank-5",
    ),
]


@pytest.mark.parametrize(
    ("trt_double", "trt_version"), [("10.4.0", "10.4"), ("10.15.0", "latest")], indirect=["trt_double"]
)
@pytest.mark.parametrize("fn, spec, shapes, make, op", FORMS)
def test_a_dynamic_form_runs_in_an_engine(
    trt_double: ModuleType,
    trt_version: str,
    fn: Callable[..., Any],
    spec: trt_lower.TensorSpec,
    shapes: list[tuple[int, ...]],
    make: Callable[[tuple[int, ...]], torch.Tensor],
    op: str,
) -> None:
    model = Fn(fn)
    lowered = trt_lower.lower_to_trt(model, (spec,), backend="tensorrt", require_full=True, min_block_size=1)
    assert lowered.report.trt_version == trt_version and lowered.report.coverage == 1.0
    assert op in engine_ops(lowered) and -1 in lowered.report.engines[0].input_shapes[0], str(lowered.report)
    for shape in shapes:
        x = make(shape)
        torch.testing.assert_close(lowered(x), model(x), msg=lambda m: f"{shape}: {m}")


class _GroupNormOf(torch.nn.Module):
    """GroupNorm(groups, 4) of the input, its dims first put in `order` (channels-last layouts)."""

    def __init__(self, groups: int, order: tuple[int, ...] | None = None) -> None:
        super().__init__()
        self.norm, self.order = torch.nn.GroupNorm(groups, 4), order

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x.permute(self.order) if self.order else x)


@pytest.mark.parametrize(
    "model, spec, shapes",
    [
        (_GroupNormOf(1), Spec((1, 4, 2), (5, 4, 4), (8, 4, 16)), [(1, 4, 2), (7, 4, 9)]),
        (_GroupNormOf(2), Spec((5, 4, 1, 1), (5, 4, 2, 2), (5, 4, 16, 16)), [(5, 4, 1, 1), (5, 4, 7, 3)]),
        (_GroupNormOf(1, (0, 3, 1, 2)), Spec((1, 2, 2, 4), (5, 4, 4, 4), (8, 9, 9, 4)), [(1, 2, 2, 4), (6, 9, 5, 4)]),
        (_GroupNormOf(4), Spec((2, 4, 1, 2, 2), (2, 4, 2, 2, 2), (2, 4, 9, 9, 9)), [(2, 4, 1, 2, 2), (2, 4, 3, 9, 5)]),
    ],
    ids=["ncl", "nchw", "nhwc-permuted", "ncdhw"],
)
def test_group_norm_over_dynamic_spatial_sizes(
    model: torch.nn.Module, spec: trt_lower.TensorSpec, shapes: list[tuple[int, ...]]
) -> None:
    """torch.export captures GroupNorm with its batch and spatial sizes symbolic, in each layout
    (the issue's `shape '[5, 1, 4, 4]' is invalid` did not reproduce on torch 2.14)."""
    lowered = trt_lower.lower_to_trt(model.eval(), (spec,), backend="onnxruntime", require_full=True, min_block_size=1)
    assert "aten.group_norm.default" in engine_ops(lowered)
    for shape in shapes:
        x = torch.randn(shape)
        torch.testing.assert_close(lowered(x), model(x), rtol=1e-4, atol=1e-4, msg=lambda m: f"{shape}: {m}")
