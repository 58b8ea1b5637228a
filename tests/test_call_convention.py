"""One input convention for every function that runs a model: positional arguments as a tuple
(a lone tensor meaning `(x,)`), keyword arguments as `kwargs=`, one argument order
(model, lowered, inputs), and anything else a ValueError naming `inputs`."""

from __future__ import annotations

import warnings
from typing import Any, Callable

import pytest
import torch
from transformers import BertConfig, BertModel

import trt_lower
from trt_lower.benchmarking.breakdown import breakdown
from trt_lower.debug import first_divergence, fp16_sensitive
from trt_lower.testing import assert_lowered_close

TOL = {"rtol": 1e-3, "atol": 1e-3}
TINY_RUN = {"warmup": 0, "iterations": 1, "block": 1, "breakdown_calls": 1, "cv_threshold": float("inf")}


class Affine(torch.nn.Module):
    """Takes one (3, 4) tensor: called with its dim-0 rows as three arguments it fails."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x)) * 2 + 1


@pytest.fixture(scope="module")
def bert() -> tuple[BertModel, torch.Tensor, dict[str, torch.Tensor], trt_lower.LoweredModule]:
    """A tiny BertModel (random weights, built offline) called with attention_mask=, lowered."""
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=50,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=16,
    )
    model = BertModel(config).eval()
    ids = torch.randint(0, 50, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.int64)
    mask[1, 5:] = 0  # padding: the mask changes the outputs
    kwargs = {"attention_mask": mask}
    lowered = trt_lower.lower_to_trt(model, (ids,), kwargs=kwargs, backend="onnxruntime")
    return model, ids, kwargs, lowered


def test_a_model_called_with_a_keyword_runs_through_every_use(bert: Any) -> None:
    model, ids, kwargs, lowered = bert
    with torch.no_grad():
        unmasked = model(ids).last_hidden_state
    masked = lowered(ids, **kwargs).last_hidden_state
    assert not torch.allclose(masked, unmasked, atol=1e-3)  # the mask reached the engines
    result = trt_lower.check_accuracy(model, lowered, (ids,), kwargs=kwargs, **TOL)
    assert result.passed, str(result)
    assert_lowered_close(model, lowered, (ids,), kwargs=kwargs, **TOL)
    assert first_divergence(model, lowered, (ids,), kwargs=kwargs, **TOL) is None
    timed = trt_lower.benchmark(model, lowered, (ids,), kwargs=kwargs, **TINY_RUN)
    assert {r.variant for r in timed.runs} == {"eager", "lowered"}
    (run,) = [r for r in timed.runs if r.variant == "lowered"]
    assert run.breakdown and any(p.kind == "engine" for p in run.breakdown)


def test_kwargs_are_verified_with_their_samples_and_resize_with_batch_sizes(bert: Any) -> None:
    model, ids, kwargs, _ = bert
    spec = trt_lower.TensorSpec((1, 8), (2, 8), (4, 8), torch.int64)
    specs = {"attention_mask": spec}
    with pytest.raises(ValueError, match=r"verify_kwargs\['attention_mask'\] must be a tensor"):
        trt_lower.lower_to_trt(model, (spec,), kwargs=specs, backend="onnxruntime", verify_inputs=ids)
    with pytest.raises(ValueError, match=r"verify_kwargs\['attention_mask'\] is \(2, 9\) int64, outside"):
        trt_lower.lower_to_trt(
            model,
            spec,
            kwargs=specs,
            backend="onnxruntime",
            verify_inputs=ids,
            verify_kwargs={"attention_mask": ids[:, :1].repeat(1, 9)},
        )
    with pytest.raises(ValueError, match="^verify_kwargs must be a dict of keyword arguments"):
        trt_lower.lower_to_trt(model, spec, kwargs=specs, backend="onnxruntime", verify_inputs=ids, verify_kwargs=[ids])  # type: ignore[arg-type]
    dynamic = trt_lower.lower_to_trt(
        model, spec, kwargs=specs, backend="onnxruntime", verify_inputs=ids, verify_kwargs=kwargs
    )
    assert dynamic.report.verify_errors  # verified on the samples, not skipped
    timed = trt_lower.benchmark(model, dynamic, (ids,), kwargs=kwargs, batch_sizes=[3], **TINY_RUN)
    assert {r.batch_size for r in timed.runs} == {3}


@pytest.fixture(scope="module")
def affine() -> tuple[Affine, torch.Tensor, trt_lower.LoweredModule]:
    torch.manual_seed(0)
    model, x = Affine().eval(), torch.randn(3, 4)
    return model, x, trt_lower.lower_to_trt(model, x, backend="onnxruntime")


def test_a_bare_tensor_lowers_for_itself(affine: Any) -> None:
    model, x, lowered = affine
    assert lowered.report.engines[0].input_shapes == [(3, 4)]  # not dim 0 iterated into 3 inputs of (4,)
    torch.testing.assert_close(lowered(x), model(x))


def test_a_bare_tensor_is_one_argument_everywhere(affine: Any) -> None:
    model, x, lowered = affine
    assert trt_lower.check_accuracy(model, lowered, x, **TOL)
    assert_lowered_close(model, lowered, x, **TOL)
    assert first_divergence(model, lowered, x, **TOL) is None
    timed = trt_lower.benchmark(model, lowered, x, **TINY_RUN)
    assert {r.batch_size for r in timed.runs} == {3}  # x's dim 0, not its rows' 4
    assert breakdown(lowered, x, calls=1)[-1].name == "overhead"
    assert fp16_sensitive(model, x, backend="onnxruntime", rtol=1e-2, atol=1e-2) == []


def test_a_bare_tensor_is_one_sample_for_verify_inputs(affine: Any) -> None:
    model, x, _ = affine
    spec = trt_lower.TensorSpec((1, 4), (3, 4), (8, 4))
    lowered = trt_lower.lower_to_trt(model, spec, backend="onnxruntime", verify_inputs=x)
    assert lowered.report.verify_errors  # verified on x, not skipped
    with pytest.raises(ValueError, match="verify_inputs must be a tensor or a tuple or list"):
        trt_lower.lower_to_trt(model, spec, backend="onnxruntime", verify_inputs={"x": x})


def test_quantize_takes_a_bare_tensor() -> None:
    pytest.importorskip("torchao")
    from trt_lower.quantization import quantize

    torch.manual_seed(0)
    model, x = Affine().eval(), torch.randn(3, 4)
    quantized = quantize(model, x, [x])
    torch.testing.assert_close(quantized(x), model(x), rtol=0.1, atol=0.1)


class Masked(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.fc(x) if mask is None else self.fc(x) * mask


def test_fp16_sensitive_and_quantize_take_kwargs() -> None:
    torch.manual_seed(0)
    model, x, mask = Masked().eval(), torch.randn(3, 4), torch.tensor([[1.0], [0.0], [1.0]])
    assert fp16_sensitive(model, x, kwargs={"mask": mask}, backend="onnxruntime", rtol=1e-2, atol=1e-2) == []
    pytest.importorskip("torchao")
    from trt_lower.quantization import quantize

    quantized = quantize(model, x, [x], kwargs={"mask": mask})
    out = quantized(x, mask=mask)
    assert not out[1].any()  # the mask reached the quantized graph
    torch.testing.assert_close(out, model(x, mask=mask), rtol=0.1, atol=0.1)


def _uses(model: torch.nn.Module, lowered: torch.nn.Module) -> dict[str, Callable[[Any], object]]:
    """Every function of the convention, with `inputs` left to fill in."""
    return {
        "lower_to_trt": lambda i: trt_lower.lower_to_trt(model, i, backend="onnxruntime"),
        "check_accuracy": lambda i: trt_lower.check_accuracy(model, lowered, i),
        "assert_lowered_close": lambda i: assert_lowered_close(model, lowered, i, **TOL),
        "first_divergence": lambda i: first_divergence(model, lowered, i, **TOL),
        "fp16_sensitive": lambda i: fp16_sensitive(model, i, backend="onnxruntime", **TOL),
        "benchmark": lambda i: trt_lower.benchmark(model, lowered, i, **TINY_RUN),
        "breakdown": lambda i: breakdown(lowered, i, calls=1),
    }


@pytest.mark.parametrize("inputs", [{"x": 1}, 3, "x", iter([1])], ids=["dict", "int", "str", "iterator"])
def test_other_inputs_are_refused_by_name_everywhere(affine: Any, inputs: Any) -> None:
    model, x, lowered = affine
    for name, use in _uses(model, lowered).items():
        with pytest.raises(ValueError, match="^inputs must be a tensor or a tuple or list"):
            use(inputs)
            pytest.fail(f"{name} accepted {inputs!r}")


def test_kwargs_must_be_a_dict_everywhere(affine: Any) -> None:
    model, x, lowered = affine
    calls = {
        "lower_to_trt": lambda: trt_lower.lower_to_trt(model, (), kwargs=[x], backend="onnxruntime"),  # type: ignore[arg-type]
        "check_accuracy": lambda: trt_lower.check_accuracy(model, lowered, (), kwargs=[x]),  # type: ignore[arg-type]
        "benchmark": lambda: trt_lower.benchmark(model, lowered, (), kwargs=[x], **TINY_RUN),  # type: ignore[arg-type]
    }
    for call in calls.values():
        with pytest.raises(ValueError, match="kwargs must be a dict of keyword arguments, got list"):
            call()


def test_the_former_order_of_assert_lowered_close_warns_and_works(affine: Any) -> None:
    model, x, lowered = affine
    with pytest.warns(DeprecationWarning, match=r"assert_lowered_close\(model, lowered, inputs\)"):
        assert assert_lowered_close(model, (x,), lowered=lowered, **TOL) is lowered
    with pytest.warns(DeprecationWarning):
        again = assert_lowered_close(model, (x,), backend="onnxruntime", **TOL)
    assert isinstance(again, trt_lower.LoweredModule)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new order does not warn
        assert assert_lowered_close(model, lowered, (x,), **TOL) is lowered
        assert isinstance(assert_lowered_close(model, None, x, backend="onnxruntime", **TOL), trt_lower.LoweredModule)
