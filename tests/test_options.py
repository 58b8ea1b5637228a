"""lower_to_trt's options are validated alike: each bad value is one ValueError naming its option;
precision takes torch dtypes, trt_version any TensorRT release (mapped to its target, the report
showing both), and an option the chosen backend ignores warns."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

import trt_lower
from trt_lower import lowering_options

OPTIONS = {
    "backend": "onnxruntime",
    "precision": "fp32",
    "min_block_size": 1,
    "fallback_ops": (),
    "require_full": False,
}


def settings(**changes: Any) -> trt_lower.lowering_options.LoweringSettings:
    return lowering_options.create(**{**OPTIONS, **changes})


@pytest.mark.parametrize("op", ["relu", "aten.rleu.default", "aten.relu.nope", torch.relu, "aten"])
def test_fallback_ops_that_name_no_op_are_refused(op: Any) -> None:
    with pytest.raises(ValueError, match="^fallback_ops names no registered op"):
        settings(fallback_ops=[op])


@pytest.mark.parametrize(
    ("op", "name"),
    [
        ("aten.relu.default", "aten.relu.default"),
        ("aten.relu", "aten.relu"),
        (torch.ops.aten.relu.default, "aten.relu.default"),
        (torch.ops.aten.relu, "aten.relu"),
        ("torch.ops.aten.add.Tensor", "aten.add.Tensor"),
    ],
)
def test_fallback_ops_take_ops_and_their_names(op: Any, name: str) -> None:
    assert settings(fallback_ops=[op]).fallback_ops == {name}


def test_keep_fp32_ops_are_checked_like_fallback_ops() -> None:
    with pytest.raises(ValueError, match="^keep_fp32 names no registered op: 'aten.mull.Tensor'"):
        settings(precision="fp16", keep_fp32=["aten.mull.Tensor"])
    # Node names are checked against the captured graph later (test_debug.py).
    assert settings(precision="fp16", keep_fp32=["mul", "aten.mul.Tensor"]).keep_fp32 == {"mul", "aten.mul.Tensor"}


@pytest.mark.parametrize(("dtype", "name"), [(torch.float16, "fp16"), (torch.float32, "fp32"), ("fp16", "fp16")])
def test_precision_takes_a_torch_dtype(dtype: Any, name: str) -> None:
    assert settings(precision=dtype).precision == name


@pytest.mark.parametrize("precision", [torch.bfloat16, torch.int8, "float16", "bf16", None])
def test_other_precisions_are_refused_by_name(precision: Any) -> None:
    with pytest.raises(ValueError, match=r"^precision must be one of \('fp32', 'fp16'\) or torch.float32"):
        settings(precision=precision)


def test_bfloat16_precision_says_what_to_do() -> None:
    with pytest.raises(ValueError, match="a bfloat16 model lowers as it is with precision='fp32'"):
        settings(precision=torch.bfloat16)


@pytest.mark.parametrize(
    ("version", "target", "release"),
    [
        ("10.13", "10.12", "10.13"),
        ("10.13.0", "10.12", "10.13.0"),
        ("10.0.1", "10.4", "10.0.1"),
        ("8.6.1.6", "8.6", "8.6.1.6"),
        ("11.2.0.1", "latest", "11.2.0.1"),
        ("10.4", "10.4", ""),
        ("latest", "latest", ""),
    ],
)
def test_trt_version_takes_a_release_and_maps_it_to_its_target(version: str, target: str, release: str) -> None:
    made = settings(trt_version=version)
    assert (made.trt_version, made.trt_release) == (target, release)


def test_the_report_shows_the_release_asked_for_and_its_target() -> None:
    lowered = trt_lower.lower_to_trt(
        torch.nn.Linear(4, 4), torch.ones(2, 4), backend="onnxruntime", trt_version="10.13"
    )
    assert (lowered.report.trt_version, lowered.report.trt_release) == ("10.12", "10.13")
    assert "trt_version=10.12 (asked 10.13)" in str(lowered.report)


@pytest.mark.parametrize("option", ["require_full", "cuda_graphs", "refittable"])
def test_flags_must_be_booleans(option: str) -> None:
    with pytest.raises(ValueError, match=f"^{option} must be True or False, got 1"):
        settings(**{option: 1})


def test_cuda_graphs_on_onnxruntime_warns_that_it_is_ignored() -> None:
    model, x = torch.nn.Linear(4, 4), torch.ones(2, 4)
    with pytest.warns(UserWarning, match="cuda_graphs=True is ignored on the onnxruntime backend"):
        trt_lower.lower_to_trt(model, x, backend="onnxruntime", cuda_graphs=True, verify=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        trt_lower.lower_to_trt(model, x, backend="onnxruntime", verify=False)
