"""Inputs declared with TensorSpec(min, opt, max): one lowering serves every shape in range."""

from __future__ import annotations

import logging
import math

import onnx
import pytest
import torch
import torchvision
from harness import Fn, check_onnx, engine_ops
from test_pipeline import mystery  # noqa: F401  (registers an op without converter)

import trt_lower
from trt_lower.capture import conditions as capture_conditions

aten = torch.ops.aten


def _check_sizes(model: torch.nn.Module, lowered: torch.nn.Module, shapes: list[tuple[int, ...]], make: object) -> None:
    with torch.no_grad():
        for shape in shapes:
            x = make(shape)  # type: ignore[operator]
            torch.testing.assert_close(lowered(x), model(x), rtol=1e-4, atol=1e-4, msg=lambda m: f"{shape}: {m}")


def test_bert_with_dynamic_batch_and_sequence() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=500
    )
    model = transformers.BertModel(config).eval()
    spec = trt_lower.TensorSpec(min_shape=(1, 4), opt_shape=(4, 16), max_shape=(16, 32), dtype=torch.int64)
    lowered = trt_lower.lower_to_trt(model, (spec,), backend="onnxruntime")
    assert len(lowered.report.engines) == 1 and lowered.report.coverage >= 0.95, str(lowered.report)
    assert lowered.report.engines[0].input_shapes == [(-1, -1)]
    _check_sizes(
        model, lowered, [(1, 4), (4, 16), (16, 32), (3, 7), (16, 5)], lambda s: torch.randint(0, config.vocab_size, s)
    )
    with pytest.raises(
        trt_lower.EngineInputError,
        match=r"input 'input_ids' was lowered for the range \(1\.\.16, 4\.\.32\) int64, got \(17, 8\)",
    ):
        lowered(torch.randint(0, 500, (17, 8)))
    with pytest.raises(trt_lower.EngineInputError, match=r"got \(2, 3\)"):
        lowered(torch.randint(0, 500, (2, 3)))


def test_cnn_with_dynamic_batch() -> None:
    model = torchvision.models.resnet18(weights=None).eval()
    spec = trt_lower.TensorSpec((1, 3, 32, 32), (4, 3, 32, 32), (16, 3, 32, 32))
    lowered = trt_lower.lower_to_trt(model, (spec,), backend="onnxruntime")
    assert len(lowered.report.engines) == 1 and lowered.report.coverage == 1.0
    _check_sizes(model, lowered, [(1, 3, 32, 32), (5, 3, 32, 32), (16, 3, 32, 32)], torch.randn)
    with pytest.raises(trt_lower.EngineInputError, match=r"\(1\.\.16, 3, 32, 32\) float32, got \(2, 3, 64, 64\)"):
        lowered(torch.randn(2, 3, 64, 64))


def test_a_given_tensor_beside_a_spec_is_static() -> None:
    model = Fn(lambda x, bias: torch.relu(x @ x.transpose(0, 1)) + bias.sum())
    spec = trt_lower.TensorSpec((2, 4), (8, 4), (32, 4))
    lowered = trt_lower.lower_to_trt(model, (spec, torch.randn(3)), backend="onnxruntime", min_block_size=1)
    bias = torch.randn(3)
    for n in (2, 9, 32):
        x = torch.randn(n, 4)
        torch.testing.assert_close(lowered(x, bias), model(x, bias))
    with pytest.raises(trt_lower.EngineInputError, match="input 'args_1' was lowered for \\(3,\\) float32"):
        lowered(torch.randn(2, 4), torch.randn(4))


def test_sizes_cross_an_eager_fallback() -> None:
    """Sizes used on both sides of an eager op are recomputed on each side."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        y = torch.sigmoid(x).reshape(x.shape[0], -1) * 2
        z = torch.ops.trt_lower_test.mystery(y)
        return (z + 1).reshape(x.shape[0], x.shape[1], -1).sum(-1) + torch.arange(x.shape[1])

    model = Fn(fn)
    spec = trt_lower.TensorSpec((1, 2, 4), (3, 5, 4), (8, 9, 4))
    lowered = trt_lower.lower_to_trt(model, (spec,), backend="onnxruntime", min_block_size=1)
    assert len(lowered.report.engines) == 2, str(lowered.report)
    assert [f.op for f in lowered.report.fallbacks] == ["trt_lower_test.mystery.default"]
    _check_sizes(model, lowered, [(1, 2, 4), (3, 5, 4), (8, 9, 4)], torch.randn)


def test_a_float_computed_from_a_size_runs_eager() -> None:
    """x.shape[0] * 0.5 is a Python float computed at run time: engines exchange tensors and
    recompute only integer sizes, so the float and its users stay eager (this once crashed)."""
    model = Fn(lambda x: (x * 2 + 1) * (x.shape[0] * 0.5) - 3)
    spec = trt_lower.TensorSpec((1, 4), (3, 4), (8, 4))
    lowered = trt_lower.lower_to_trt(model, (spec,), backend="onnxruntime", min_block_size=1)
    reasons = {f.op: f.reason for f in lowered.report.fallbacks}
    assert "a Python float computed at run time, which an engine cannot receive" in reasons["aten.mul.Tensor"]
    # Python targets are named as code names them, not by their repr's address.
    assert "its result is a Python float" in reasons["operator.mul"]
    assert "no converter for torch.sym_float" in reasons["torch.sym_float"]
    _check_sizes(model, lowered, [(1, 4), (3, 4), (8, 4)], torch.randn)


def test_size_floor_division_and_remainder_follow_python_below_zero() -> None:
    """(s0 - 5) // 2 is negative for small batches: ONNX's integer Div truncates (-3 // 2 gave -1,
    not -2), so a size that can go below 0 is floor-divided as (x - x % y) / y."""
    model = Fn(lambda x: x * ((x.shape[0] - 5) // 2) + (x.shape[0] - 7) % 3 + x.shape[0] // 2)
    spec = trt_lower.TensorSpec((1, 4), (6, 4), (9, 4))
    lowered = trt_lower.lower_to_trt(model, (spec,), backend="onnxruntime", min_block_size=1)
    assert len(lowered.report.engines) == 1 and not lowered.report.fallbacks, str(lowered.report)
    check_onnx(lowered)
    # One floor division needs the exact form; x.shape[0] // 2 keeps the plain Div.
    ops = [n.op_type for n in onnx.load_from_string(lowered.engine_0.onnx_bytes).graph.node]
    assert ops.count("Div") == 2 and ops.count("Mod") == 2, ops
    _check_sizes(model, lowered, [(n, 4) for n in range(1, 10)], torch.randn)


class _WholePatches(torch.nn.Module):
    """Resizes its input up to whole 4x4 patches, as timm's MobileViT does, then averages each
    patch; the rounded quotients of its sizes go through Python floats."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2:]
        nh, nw = math.ceil(h / 4), math.floor((w + 3) / 4)
        y = torch.nn.functional.interpolate(x, size=(nh * 4, nw * 4), mode="bilinear", align_corners=False)
        shift = math.ceil((h - 24) / 5) + math.trunc(w / 3)  # below zero for small h
        return y.reshape(x.shape[0], x.shape[1], nh, 4, nw, 4).mean((3, 5)) * 2 + shift


@pytest.mark.parametrize("trt_version", ["8.6", "10.4", "latest"])
def test_rounded_quotients_of_sizes_are_integer_division(trt_version: str) -> None:
    """math.ceil/floor/trunc of a quotient of sizes traced as Python floats, which
    kept the resize and everything it feeds eager (MobileViT at a dynamic resolution: 5 engines);
    they are exact integer division, computed in the engine, below zero too."""
    model = _WholePatches()
    spec = trt_lower.TensorSpec((1, 3, 9, 9), (1, 3, 30, 33), (2, 3, 48, 48))
    lowered = trt_lower.lower_to_trt(model, (spec,), backend="onnxruntime", trt_version=trt_version)
    assert len(lowered.report.engines) == 1 and not lowered.report.fallbacks, str(lowered.report)
    assert "aten.upsample_bilinear2d.vec" in engine_ops(lowered)
    check_onnx(lowered)
    _check_sizes(
        model, lowered, [(1, 3, 9, 9), (2, 3, 48, 48), (1, 3, 30, 33), (2, 3, 23, 10), (1, 3, 13, 41)], torch.randn
    )


def test_max_and_min_of_sizes_run_in_the_engine() -> None:
    """max()/min() of two sizes trace to torch.sym_max/sym_min: computed in the engine."""
    model = Fn(lambda x, y: (x.new_ones(max(x.shape[0], y.shape[0]), min(x.shape[1], 3)) * 2 + 1).sigmoid() * y.sum())
    specs = (trt_lower.TensorSpec((2, 2), (4, 3), (8, 5)), trt_lower.TensorSpec((2,), (5,), (9,)))
    lowered = trt_lower.lower_to_trt(model, specs, backend="onnxruntime")
    assert len(lowered.report.engines) == 1 and not lowered.report.fallbacks, str(lowered.report)
    check_onnx(lowered)
    for a, b, c in [(2, 2, 9), (8, 5, 2), (5, 3, 5)]:
        x, y = torch.randn(a, b), torch.randn(c)
        torch.testing.assert_close(lowered(x, y), model(x, y))


def test_a_size_computed_by_an_op_without_converter_is_eager_with_its_users(monkeypatch: pytest.MonkeyPatch) -> None:
    """A size an engine cannot compute is a Python int its users take from outside: they stay
    eager with the reason (such a size was copied into the engine anyway, and lowering raised)."""
    from converters.core import registry

    monkeypatch.delitem(registry._REGISTRY, torch.sym_max)
    model = Fn(lambda x, y: (x.new_ones(max(x.shape[0], y.shape[0]), 3) * 2 + 1).sigmoid() * y.sum())
    specs = (trt_lower.TensorSpec((2, 3), (4, 3), (8, 3)), trt_lower.TensorSpec((2,), (5,), (9,)))
    lowered = trt_lower.lower_to_trt(model, specs, backend="onnxruntime")
    reasons = {f.op: f.reason for f in lowered.report.fallbacks}
    assert reasons["torch.sym_max"] == "no converter for torch.sym_max"
    assert "takes sym_max, a Python int computed at run time" in reasons["aten.new_ones.default"]
    x, y = torch.randn(3, 3), torch.randn(7)
    torch.testing.assert_close(lowered(x, y), model(x, y))


def test_a_size_divided_by_a_dim_declared_from_zero() -> None:
    """A dim's range was its expression at the ranges' min and max corners: divided by a size
    declared from 0, lowering raised ZeroDivisionError. Now bounded over the ranges; torch.export
    captures the model for divisors of 2 and up, and a call with 0 is refused by that condition."""
    model = Fn(lambda x, y: (x.new_ones(math.ceil(x.shape[0] / y.shape[0]), 3) * 2 + 1).sigmoid() * y.sum())
    specs = (trt_lower.TensorSpec((2, 3), (4, 3), (8, 3)), trt_lower.TensorSpec((0,), (3,), (9,)))
    lowered = trt_lower.lower_to_trt(model, specs, backend="onnxruntime")
    assert len(lowered.report.engines) == 1 and not lowered.report.fallbacks, str(lowered.report)
    for a, b in [(8, 3), (8, 1), (5, 2)]:
        x, y = torch.randn(a, 3), torch.randn(b)
        torch.testing.assert_close(lowered(x, y), model(x, y))
    with pytest.raises(trt_lower.EngineInputError, match=r"args_1 \(0,\) break a condition"):
        lowered(torch.randn(4, 3), torch.randn(0))


def test_a_dim_that_falls_as_a_size_grows_gets_a_profile_that_holds_it(trt_double: object) -> None:
    """An engine input sized `x.shape[0] - y.shape[0]` (behind an eager op) is largest where y is
    smallest: its TensorRT profile bounds the expression over the whole box of ranges (it was
    evaluated at the min and max corners only, 3..5, and TensorRT refused the valid (8, 1) call
    with 7 rows)."""

    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        z = torch.ops.trt_lower_test.mystery(x[y.shape[0] :] * 2)
        return (z.sigmoid() * 3 + 1).sum(-1)

    model = Fn(fn)
    specs = (trt_lower.TensorSpec((4, 3), (6, 3), (8, 3)), trt_lower.TensorSpec((1,), (2,), (3,)))
    lowered = trt_lower.lower_to_trt(model, specs, backend="tensorrt", min_block_size=1)
    assert len(lowered.report.engines) == 2, str(lowered.report)
    (sig,) = lowered.engine_1.inputs
    assert sig.min_shape[0] <= 2 and sig.opt_shape[0] == 4 and sig.max_shape[0] == 7, sig
    for a, b in [(8, 1), (6, 2), (5, 3)]:
        x, y = torch.randn(a, 3), torch.randn(b)
        torch.testing.assert_close(lowered(x, y), model(x, y))


def test_einsum_over_a_dynamic_batch() -> None:
    """maxvit's attention einsums under a dynamic batch (they once all ran eager: 45 engines)."""
    model = Fn(lambda q, k: torch.einsum("B H I D, B H J D -> B H I J", q, k).softmax(-1) * 2 + 1)
    specs = [trt_lower.TensorSpec((1, 2, 5, 4), (3, 2, 5, 4), (6, 2, 5, 4))] * 2
    lowered = trt_lower.lower_to_trt(model, specs, backend="onnxruntime")
    assert "aten.einsum.default" in engine_ops(lowered) and not lowered.report.fallbacks, str(lowered.report)
    check_onnx(lowered)
    with torch.no_grad():
        for n in (1, 4, 6):
            q, k = torch.randn(n, 2, 5, 4), torch.randn(n, 2, 5, 4)
            torch.testing.assert_close(lowered(q, k), model(q, k))


def test_as_strided_that_reshapes_a_dynamic_batch() -> None:
    """as_strided reading a contiguous input in order is a reshape, dynamic sizes and all
    (convnext's head: (N, C, 1, 1) viewed with channels-last strides); one that reorders a
    dynamic batch's elements stays eager, saying so."""

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        n = x.shape[0]
        pooled = (x * 2).mean((2, 3), keepdim=True)
        head = torch.as_strided(pooled, (n, 6, 1, 1), (6, 1, 6, 6)).permute(0, 2, 3, 1) + 1
        flat = torch.as_strided(x.relu(), (n, 6 * 12), (6 * 12, 1)) - 1
        return head, flat, torch.as_strided(x.sigmoid(), (n, 2), (72, 2)) * 3

    model = Fn(fn)
    lowered = trt_lower.lower_to_trt(
        model,
        (trt_lower.TensorSpec((1, 6, 3, 4), (3, 6, 3, 4), (5, 6, 3, 4)),),
        backend="onnxruntime",
        min_block_size=1,
    )
    assert [(f.op, f.reason) for f in lowered.report.fallbacks] == [
        ("aten.as_strided.default", "as_strided with a dynamic shape, stride or offset, other than a reshape")
    ]
    assert len(lowered.report.engines) == 2, str(lowered.report)
    check_onnx(lowered)
    _check_sizes(model, lowered, [(1, 6, 3, 4), (4, 6, 3, 4), (5, 6, 3, 4)], torch.randn)


def test_repeat_and_tile_by_a_dynamic_count() -> None:
    """Counts read from a dynamic dim (BLOOM's ALiBi repeated over the batch) run in the engine."""

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        row = (x[0] * 2).sigmoid()
        return x + row.repeat(x.shape[0], 1), torch.tile(row, (x.shape[0] // 2, 2)) - 1

    model = Fn(fn)
    # (torch.export guards x.shape[0] // 2 != 1, so the range starts at 4.)
    lowered = trt_lower.lower_to_trt(model, (trt_lower.TensorSpec((4, 5), (4, 5), (7, 5)),), backend="onnxruntime")
    assert {"aten.repeat.default"} <= engine_ops(lowered) and not lowered.report.fallbacks, str(lowered.report)
    check_onnx(lowered)
    _check_sizes(model, lowered, [(4, 5), (5, 5), (7, 5)], torch.randn)


def test_resize_to_a_size_known_only_at_run_time() -> None:
    """A segmentation head resized back to the input's dynamic size (DeepLab, LR-ASPP) and an
    upsampling by a scale factor both run in the engine."""

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        F = torch.nn.functional
        small = F.avg_pool2d(x.relu(), 2) * 3
        head = F.interpolate(small, size=x.shape[-2:], mode="bilinear", align_corners=False)
        return (
            head + x,
            F.interpolate(small, scale_factor=2, mode="nearest") - 1,
            F.interpolate(small, size=(x.shape[2] + 1, 5), mode="bicubic", align_corners=True),
        )

    model = Fn(fn)
    spec = trt_lower.TensorSpec((1, 2, 4, 4), (2, 2, 8, 10), (3, 2, 16, 16))
    lowered = trt_lower.lower_to_trt(model, (spec,), backend="onnxruntime")
    assert not lowered.report.fallbacks and len(lowered.report.engines) == 1, str(lowered.report)
    check_onnx(lowered)
    _check_sizes(model, lowered, [(1, 2, 4, 4), (2, 2, 10, 6), (3, 2, 16, 16)], torch.randn)


def test_size_tests_the_model_branches_on_are_kept() -> None:
    """torch.export captures the branch the example sizes take; a test no range expresses was
    dropped with export's own guards, and a call on the other branch got that branch's result.
    Now a test on one size that holds on an interval narrows that size's range, and any other
    is checked on every call, naming it."""

    class Branches(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            padded = x.shape[1] + (7 - x.shape[1] % 7) % 7  # swin pads to whole windows
            if padded > 7:
                x = x * 2
            if x.shape[0] % 2 == 0:
                x = x + 1
            if x.shape[0] * y.shape[0] > 12:
                return (x.sum(1, keepdim=True) + y.sum()).relu()
            return x - y.mean()

    model = Branches()
    specs = (trt_lower.TensorSpec((1, 4), (4, 10), (6, 20)), trt_lower.TensorSpec((1,), (5,), (9,)))
    lowered = trt_lower.lower_to_trt(model, specs, backend="onnxruntime", min_block_size=1)
    notes = lowered.report.notes
    assert any("x.shape[1]: asked for 4..20, the captured graph holds for 8..20" in n for n in notes), notes
    assert lowered._input_guard.inputs[0].describe() == "(1..6, 8..20) float32"
    assert lowered._input_guard.conditions.texts == ("(x.shape[0] % 2) == 0", "x.shape[0]*y.shape[0] > 12")
    for _ in range(2):  # the second time, shapes that met the conditions are remembered
        for a, b, c in [(4, 10, 5), (6, 8, 9), (2, 20, 7)]:
            x, y = torch.randn(a, b), torch.randn(c)
            torch.testing.assert_close(lowered(x, y), model(x, y))
        for (a, b, c), broken in [
            ((4, 7, 5), r"range \(1\.\.6, 8\.\.20\)"),
            ((3, 10, 5), r"% 2\) == 0"),
            ((2, 10, 5), r"x\.shape\[0\]\*y\.shape\[0\] > 12"),
        ]:
            with pytest.raises(trt_lower.EngineInputError, match=broken):
                lowered(torch.randn(a, b), torch.randn(c))


@pytest.mark.parametrize("trt_version", ["10.4", "8.6"])
def test_padding_to_whole_windows_of_a_dynamic_size(trt_version: str) -> None:
    """swin and twins pad a dynamic map to whole windows: pads computed from sizes run in the
    engine where the target TensorRT takes run-time pads (10.4 on); 8.6 keeps them eager."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        right = (4 - x.shape[2] % 4) % 4
        return torch.nn.functional.pad(x.sigmoid() * 2, (0, right, 0, 1)).cumsum(2) + 1

    model = Fn(fn)
    spec = trt_lower.TensorSpec((1, 3, 5), (2, 3, 6), (3, 3, 13))
    lowered = trt_lower.lower_to_trt(model, (spec,), backend="onnxruntime", trt_version=trt_version, min_block_size=1)
    reasons = {f.op: f.reason for f in lowered.report.fallbacks}
    if trt_version == "8.6":
        assert reasons == {
            "aten.constant_pad_nd.default": "pads computed at run time (TensorRT 8.6 takes constant pads only)"
        }
    else:
        assert not reasons and "aten.constant_pad_nd.default" in engine_ops(lowered), str(lowered.report)
    check_onnx(lowered)
    _check_sizes(model, lowered, [(1, 3, 5), (2, 3, 8), (3, 3, 13)], torch.randn)


def test_a_size_test_that_cannot_be_checked_is_noted_and_warned(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A guard printed with something a condition may not hold is kept out of the input guard,
    said in the report and a warning (not a failed lowering)."""
    monkeypatch.setattr(capture_conditions, "_checkable", lambda expr: False)
    model = Fn(lambda x: x * 2 if x.shape[1] % 2 == 0 else x - 1)
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        lowered = trt_lower.lower_to_trt(
            model, (trt_lower.TensorSpec((1, 2), (2, 6), (3, 12)),), backend="onnxruntime", min_block_size=1
        )
    assert lowered._input_guard.conditions is None
    assert any(n.startswith("not checked: (args_0.shape[1] % 2) == 0") for n in lowered.report.notes)
    assert "cannot be checked per call: (args_0.shape[1] % 2) == 0" in caplog.text


def test_shape_ops_under_dynamic_dims() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a, b = x.split([2, x.shape[1] - 2], dim=1)
        first, rest = x.split([3, x.shape[0] - 3], dim=0)
        full = torch.full((x.shape[0], 2), 1.5) + torch.zeros(x.shape[0], 1) + x.new_ones(x.shape[0], 1)
        return a.expand(x.shape[0], 2, 3) * 2, b[:, -1:], first.flatten(), rest[-1].unsqueeze(0), full

    model = Fn(fn)
    spec = trt_lower.TensorSpec((4, 3, 3), (6, 5, 3), (10, 7, 3))
    lowered = trt_lower.lower_to_trt(model, (spec,), backend="onnxruntime", require_full=True, min_block_size=1)
    # torch.export traced the split pieces as sizes other than 1: the graph holds from 4 and 5 on.
    assert lowered._input_guard.inputs[0].describe() == "(5..10, 4..7, 3) float32", str(lowered.report)
    assert "args_0.shape[0]: asked for 4..10, the captured graph holds for 5..10" in str(lowered.report)
    ran = engine_ops(lowered)
    assert {"aten.split_with_sizes.default", "aten.full.default", "aten.zeros.default", "aten.new_ones.default"} <= ran
    # Sizes are computed inside the engine, not handed to it from Python.
    engine = onnx.load_from_string(lowered.engine_0.onnx_bytes)
    assert any(n.name.startswith("sym_size") for n in engine.graph.node)
    assert not any(n.target is aten.sym_size.int for n in lowered.graph.nodes)
    for shape in [(5, 4, 3), (6, 5, 3), (10, 7, 3)]:
        x = torch.randn(shape)
        torch.testing.assert_close(lowered(x), model(x))
    with pytest.raises(trt_lower.EngineInputError, match=r"lowered for the range \(5\.\.10, 4\.\.7, 3\)"):
        lowered(torch.randn(4, 3, 3))


@pytest.mark.parametrize(
    "pool",
    [
        lambda x: torch.nn.functional.max_pool2d(x, 3, 2, ceil_mode=True),
        lambda x: torch.nn.functional.max_pool2d(x, 3, 2, padding=1, ceil_mode=True),
        lambda x: torch.nn.functional.avg_pool2d(x, 3, 2, ceil_mode=True, count_include_pad=False),
        lambda x: torch.nn.functional.max_pool2d(x, 3, 1, padding=1, ceil_mode=True),
        lambda x: torch.nn.functional.adaptive_avg_pool2d(x, (2, 3)),
        lambda x: torch.nn.functional.adaptive_max_pool2d(x, 7),
    ],
    ids=[
        "max_pool2d",
        "max_pool2d-padding",
        "avg_pool2d",
        "max_pool2d-stride-1",
        "adaptive_avg_pool2d",
        "adaptive_max_pool2d",
    ],
)
def test_pooling_over_dynamic_spatial_dims(pool: object) -> None:
    """Where padding + stride <= kernel, ONNX's ceil_mode window count is torch's for every size
    (googlenet's pools); adaptive windows are computed from the run-time size (VGG's 7 x 7 head,
    here also from fewer rows than windows): the pool runs in the engine, odd and even sizes alike."""
    model = Fn(lambda x: torch.relu(pool(x)) + 1)  # type: ignore[operator]
    spec = trt_lower.TensorSpec((1, 2, 5, 5), (2, 2, 9, 12), (3, 2, 12, 12))
    lowered = trt_lower.lower_to_trt(model, (spec,), backend="onnxruntime", min_block_size=1)
    assert not lowered.report.fallbacks and len(lowered.report.engines) == 1, str(lowered.report)
    check_onnx(lowered)
    _check_sizes(
        model, lowered, [(n, 2, h, w) for n, h, w in ((1, 5, 5), (2, 6, 11), (3, 12, 12), (1, 7, 8))], torch.randn
    )


@pytest.mark.parametrize(
    "pool",
    [
        lambda x: torch.nn.functional.max_pool2d(x, 2, 2, padding=1, ceil_mode=True),
        lambda x: torch.nn.functional.avg_pool2d(x, 3, 2, ceil_mode=True),
    ],
    ids=["max_pool2d-ceil", "avg_pool2d-ceil"],
)
def test_pooling_that_needs_static_spatial_sizes_refuses_dynamic_ones(
    pool: object, request: pytest.FixtureRequest
) -> None:
    """ceil_mode's dropped last window (possible where padding + stride > kernel) and the padding
    an average counts are computed from the spatial sizes."""
    model = Fn(lambda x: torch.relu(pool(x)) + 1)  # type: ignore[operator]
    spec = trt_lower.TensorSpec((1, 2, 6, 6), (2, 2, 9, 12), (4, 2, 12, 12))
    lowered = trt_lower.lower_to_trt(model, (spec,), backend="onnxruntime", min_block_size=1)
    reasons = [f.reason for f in lowered.report.fallbacks if "pool" in f.op]
    assert reasons and all("ceil_mode over dynamic" in r for r in reasons), str(lowered.report)
    _check_sizes(model, lowered, [(1, 2, 9, 12), (4, 2, 7, 6)], torch.randn)
    assert bool(lowered._input_guard.conditions) == ("max_pool2d" in request.node.name)
    if lowered._input_guard.conditions:
        # Whether torch drops the last window is a branch in its output size, taken for the
        # example's odd height and even width: calls on the other branch are refused, named.
        with pytest.raises(trt_lower.EngineInputError, match="break a condition torch.export captured"):
            lowered(torch.randn(1, 2, 8, 12))


@pytest.mark.parametrize(
    "args, message",
    [
        (((1, 2), (2,), (3, 2)), "one rank"),
        (((4, 2), (2, 2), (8, 2)), "min <= opt <= max"),
        (((1, 2), (2, 2), (3, 2), "float"), "dtype must be a torch.dtype"),
    ],
)
def test_bad_tensor_spec_is_named(args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        trt_lower.TensorSpec(*args)


def test_model_that_forces_a_declared_dynamic_dim_static_says_so() -> None:
    model = Fn(lambda x: x.reshape(4, 2) * 2)
    with pytest.raises(
        trt_lower.CaptureError,
        match=r"dim 0: asked for the range 1\.\.8, but torch.export "
        r"inferred the static size 4; no range works \(torch.export could not capture",
    ):
        trt_lower.lower_to_trt(model, (trt_lower.TensorSpec((1, 2), (4, 2), (8, 2)),), backend="onnxruntime")


def test_a_range_torch_narrows_is_lowered_narrowed_and_reported() -> None:
    """A branch on a size narrows the range the graph is valid for; a size outside it must not
    run the captured branch (that would be a silently wrong answer)."""
    model = Fn(lambda x: torch.relu(x * 2) + 1 if x.shape[0] > 2 else x)
    lowered = trt_lower.lower_to_trt(
        model, (trt_lower.TensorSpec((1, 4), (4, 4), (8, 4)),), backend="onnxruntime", min_block_size=1
    )
    assert any("dim 0: asked for 1..8, torch.export inferred 3..8" in n for n in lowered.report.notes), str(
        lowered.report
    )
    for n in (3, 8):
        x = torch.randn(n, 4)
        torch.testing.assert_close(lowered(x), model(x))
    with pytest.raises(trt_lower.EngineInputError, match=r"range \(3\.\.8, 4\)"):
        lowered(torch.randn(2, 4))


def test_dims_the_model_forces_equal_take_the_common_range() -> None:
    model = Fn(lambda x, y: (x + y) * 2)
    specs = (trt_lower.TensorSpec((1, 4), (4, 4), (8, 4)), trt_lower.TensorSpec((2, 4), (4, 4), (6, 4)))
    lowered = trt_lower.lower_to_trt(model, specs, backend="onnxruntime", min_block_size=1)
    for n in (2, 6):
        x, y = torch.randn(n, 4), torch.randn(n, 4)
        torch.testing.assert_close(lowered(x, y), model(x, y))
    with pytest.raises(trt_lower.EngineInputError):
        lowered(torch.randn(7, 4), torch.randn(7, 4))


def test_dynamic_engine_on_tensorrt_gets_one_profile_per_input(trt_double: object) -> None:
    """Against the TensorRT double: the profile is the spec's range, any shape in it runs."""
    model = Fn(lambda x: torch.softmax(x @ x.transpose(-1, -2), dim=-1).reshape(x.shape[0], -1).sum(-1))
    spec = trt_lower.TensorSpec((1, 2, 4), (4, 6, 4), (8, 9, 4))
    lowered = trt_lower.lower_to_trt(model, (spec,), backend="tensorrt", min_block_size=1)
    assert lowered.report.backend == "tensorrt" and len(lowered.report.engines) == 1, str(lowered.report)
    for shape in [(1, 2, 4), (4, 6, 4), (8, 9, 4), (3, 3, 4)]:
        x = torch.randn(shape)
        torch.testing.assert_close(lowered(x), model(x))
    with pytest.raises(trt_lower.EngineInputError, match=r"\(1\.\.8, 2\.\.9, 4\) float32, got \(9, 2, 4\)"):
        lowered(torch.randn(9, 2, 4))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.roll(x * 2, 3, 0),
        lambda x: torch.roll(x * 2, (-1, 2), (0, 1)),
        lambda x: torch.roll(x * 2, 5),
        lambda x: torch.slice_scatter(x, x[:, :2] * 2, 1, 1, 3),
        lambda x: torch.slice_scatter(x, x[1:-1] * 2, 0, 1, -1),
        lambda x: torch.slice_scatter(x, x[-3:] * 2, 0, -3),
        lambda x: torch.slice_scatter(x, x[1::2] * 2, 0, 1, None, 2),
    ],
    ids=[
        "roll",
        "roll-two-dims",
        "roll-flat",
        "slice_scatter-static-dim",
        "slice_scatter-dynamic-dim",
        "slice_scatter-negative-start",
        "slice_scatter-step",
    ],
)
def test_roll_and_slice_scatter_over_a_dynamic_dim(fn: object, request: pytest.FixtureRequest) -> None:
    """The split point (roll) and the slice's place (slice_scatter) come from sizes read at run time."""
    model = Fn(fn)  # type: ignore[arg-type]
    spec = trt_lower.TensorSpec((3, 4), (5, 4), (9, 4))
    lowered = trt_lower.lower_to_trt(model, (spec,), backend="onnxruntime", require_full=True, min_block_size=1)
    assert engine_ops(lowered) & {"aten.roll.default", "aten.slice_scatter.default"}, str(lowered.report)
    assert lowered.report.engines[0].input_shapes == [(-1, 4)]
    check_onnx(lowered)
    # x[1:-1] and x[1::2] traced as more than one row: those graphs hold from 4 rows on.
    low = lowered._input_guard.inputs[0].min_shape[0]
    assert low == (4 if "slice_scatter-dynamic-dim" in request.node.name or "step" in request.node.name else 3)
    _check_sizes(model, lowered, [(n, 4) for n in (3, 4, 5, 9) if n >= low], torch.randn)
