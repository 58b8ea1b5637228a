"""The verification measure (trt_lower/verify/tolerance.py): elementwise against a float64 run, so
that outputs zero by cancellation are never repaired, while wrong small entries, a sign flipped
on a tiny output and a wrong multi-output layer are each found and repaired without a crash."""

from __future__ import annotations

from types import ModuleType
from typing import Any, Callable

import pytest
import torch
from trt_double import miscompile

import trt_lower
from trt_lower.verify.float64 import Reference, graph_float64
from trt_lower.verify.tolerance import RTOL_UNITS, Tolerance, check_output

BACKENDS = ["onnxruntime", "tensorrt"]


class Probabilities(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.logits = torch.nn.Linear(16, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.logits(x) * 2, -1)


class Tiny(torch.nn.Module):
    """An output of magnitude 1e-9 beside one of magnitude 1."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.tanh(self.inner(x))
        return h, h * 1e-9


class Features(torch.nn.Module):
    """tanh features, returned and read by the next layer."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Linear(16, 32)
        self.outer = torch.nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.tanh(self.inner(x))
        return h, self.outer(h)


class Normed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Linear(16, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.outer = torch.nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y: torch.Tensor = self.outer(self.norm(self.inner(x)))
        return y


# model, plant, the culprit node, the repair
CASES: dict[str, tuple[Callable[[], torch.nn.Module], Any, str, str]] = {
    # probabilities under 0.4% of the largest negated: no error reaches 1% of the output's scale
    "small probabilities negated": (Probabilities, miscompile.Small("_softmax", 0.004), "_softmax", "eager"),
    "tiny output sign flipped": (Tiny, miscompile.Flip("mul"), "mul", "eager"),
    "sign of features near zero flipped": (Features, miscompile.Small("tanh", 0.01), "tanh", "eager"),
    "wrong LayerNormalization": (Normed, miscompile.Wrong("LayerNormalization"), "native_layer_norm", "split"),
}


@pytest.fixture
def double(request: pytest.FixtureRequest) -> ModuleType | None:
    """The TensorRT double for backend="tensorrt" tests, nothing for ONNX Runtime's."""
    if request.node.callspec.params["backend"] == "tensorrt":
        return request.getfixturevalue("trt_double")  # type: ignore[no-any-return]
    return None


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_wrong_value_below_the_outputs_scale_is_found_and_repaired(
    backend: str, case: str, double: ModuleType | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    make, plant, culprit, action = CASES[case]
    torch.manual_seed(0)
    model, x = make().eval(), torch.randn(8, 16)
    expected = model(x)
    if double is None:
        miscompile.on_onnxruntime(monkeypatch, plant)
    else:
        double.state.miscompiles = [plant]

    unverified = trt_lower.lower_to_trt(model, (x,), backend=backend, min_block_size=1, verify=False)
    with pytest.raises(AssertionError):  # the plant is wrong, and by more than rounding
        torch.testing.assert_close(unverified(x), expected, rtol=1e-4, atol=1e-12)
    lowered = trt_lower.lower_to_trt(model, (x,), backend=backend, min_block_size=1)
    torch.testing.assert_close(lowered(x), expected, rtol=1e-4, atol=1e-12)
    (repair,) = lowered.report.repairs
    assert (repair.node, repair.action) == (culprit, action)
    assert repair.error_before is not None and repair.error_before > 1
    assert repair.error_after is not None and repair.error_after <= 1


class Cancellations(torch.nn.Module):
    """Outputs that are zero but for rounding, and so differ between any two right computations."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Linear(16, 64)
        self.norm = torch.nn.LayerNorm(64)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = self.inner(x) * 30
        centred = h - h.mean(-1, keepdim=True)
        return (torch.softmax(h, -1).sum(-1) - 1, (h + 1) - 1 - h, self.norm(h).sum(-1), centred.sum(-1), h)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_outputs_zero_by_cancellation_are_not_repaired(precision: str) -> None:
    torch.manual_seed(0)
    model = Cancellations().eval()
    for seed in range(3):
        x = torch.randn(8, 16, generator=torch.Generator().manual_seed(seed))
        lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", precision=precision, min_block_size=1)
        assert lowered.report.repairs == [], (seed, lowered.report.repairs)
        assert all(e <= 1 for e in lowered.report.verify_errors.values())


class FewSums(torch.nn.Module):
    """Two rows of four probabilities summed, less one: eager's float32 sum can be exactly 1.0
    (its error zero, by luck) where the engine's order of the same additions gives 1 - 2^-24."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.inner(x)
        return h.softmax(-1).sum(-1) - 1, h


@pytest.mark.parametrize("seed", [8, 29, 30])  # seeds where eager's error was zero and the engine was repaired
def test_an_output_eager_gets_exactly_right_by_luck_is_not_repaired(seed: int) -> None:
    torch.manual_seed(seed)
    model, x = FewSums().eval(), torch.randn(2, 4)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime")
    assert lowered.report.repairs == []
    assert len(lowered.report.engines) == 1


def test_the_measure_is_elementwise_against_the_float64_reference() -> None:
    """Without the guards: a cancellation's noise (eager's own error) would fail at its own scale,
    and a small entry's sign would pass at the output's."""
    tol = Tolerance("fp32", int8=False)
    reference = torch.tensor([5e-3, 1.0, 0.0], dtype=torch.float64)
    eager = torch.tensor([5e-3, 1.0, 3e-8])  # float32: 5e-3 rounded, the zero a cancellation's noise
    assert check_output("out", eager, eager.clone(), tol, reference).passed
    noisy = torch.tensor([5e-3, 1.0, -6e-8])  # other noise, at the size of eager's
    assert check_output("out", eager, noisy, tol, reference).passed
    flipped = torch.tensor([-5e-3, 1.0, 3e-8])
    assert not check_output("out", eager, flipped, tol, reference).passed
    tiny = torch.tensor([2e-9, -1e-9])  # every element wrong in sign, 1e-9 in size
    assert not check_output("out", tiny, -tiny, tol, tiny.double()).passed


def test_a_node_that_refuses_float64_runs_in_eagers_dtype_inside_the_reference() -> None:
    """A quantize asserts float32 input: the reference runs it so, and widens what it gives."""
    import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed)

    qd = torch.ops.quantized_decomposed

    class Quantized(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q = qd.quantize_per_tensor.default(x * 3, 0.1, 0, -128, 127, torch.int8)
            return qd.dequantize_per_tensor.default(q, 0.1, 0, -128, 127, torch.int8) + 1  # type: ignore[no-any-return]

    x = torch.randn(4, 8)
    gm = torch.export.export(Quantized(), (x,)).module()
    (out,) = graph_float64(gm, [x])
    assert out.value.dtype == torch.float64
    torch.testing.assert_close(out.value, Quantized()(x).double())


def test_an_element_a_quarter_unit_inside_its_bound_passes_and_the_next_float32_fails() -> None:
    """The verdict is decided in float64 at the bound: the engine's value is a float32 inside it by
    less than the reference's own offset from float32 (a comparison in float32 would fail it); the
    next float32 is outside."""
    tol = Tolerance("fp32", int8=False)
    unit, quarter = 2.0**-24, 2.0**-26  # float32's unit in [0.5, 1), a quarter of it
    eager = torch.tensor([1.0, 0.5, 3.0])
    value = eager.double() + torch.tensor([0.0, quarter, 0.0], dtype=torch.float64)
    at = eager.clone()
    at[1] = 0.5 + (2**13 + 64) * unit  # past eager's error allowance (2^-11) by 64 units
    distance = float(at[1]) - 0.5 - quarter
    # The magnitude that puts element 1's bound an eighth of a unit past `distance`.
    base = tol.bound((eager - value).abs(), value, torch.float32, True, torch.zeros(3, dtype=torch.float64))
    magnitude = value.abs()
    magnitude[1] = (distance + quarter / 2 - float(base[1])) / (RTOL_UNITS * tol.unit)
    reference = Reference(value, magnitude)
    inside = check_output("out", eager, at, tol, reference)
    assert inside.passed and inside.error > 0.99
    past = at.clone()
    past[1] = torch.nextafter(at[1], torch.tensor(1.0))
    assert not check_output("out", eager, past, tol, reference).passed
