"""Shared test helpers: lower a callable and prove where its ops ran."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import onnx
import torch

import trt_lower
from converters.passes import trt_support


class Fn(torch.nn.Module):
    """Wraps a function of tensors as a module (the ops under test)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


def engine_ops(lowered: trt_lower.LoweredModule) -> set[str]:
    return {op for e in lowered.report.engines for op in e.ops}


def check_onnx(lowered: trt_lower.LoweredModule) -> None:
    """Each engine's ONNX passes onnx.checker and the support table of the TensorRT it targets."""
    for name, module in lowered.named_children():
        if name.startswith("engine_"):
            model = onnx.load_from_string(module.onnx_bytes)
            onnx.checker.check_model(model, full_check=True)
            problems = trt_support.violations(model, lowered.report.trt_version)
            assert not problems, f"{name}: " + "; ".join(map(str, problems))


def lower_and_compare(
    model: torch.nn.Module | Callable[..., Any],
    inputs: Sequence[torch.Tensor],
    *,
    ops: Sequence[Any] = (),
    rtol: float | None = None,
    atol: float | None = None,
    **lower_kwargs: Any,
) -> trt_lower.LoweredModule:
    """Lower with every node required inside an engine, check each op in `ops` ran in one,
    the ONNX is checker-clean, and the result matches eager PyTorch."""
    module = model if isinstance(model, torch.nn.Module) else Fn(model)
    lower_kwargs = {"backend": "onnxruntime", "require_full": True, "min_block_size": 1, **lower_kwargs}
    lowered = trt_lower.lower_to_trt(module, inputs, **lower_kwargs)
    ran = engine_ops(lowered)
    for op in ops:
        assert str(op) in ran, f"{op} did not run inside an engine (engines ran {sorted(ran)})"
    check_onnx(lowered)
    with torch.no_grad():
        expected = module.eval()(*inputs)
        actual = lowered(*inputs)
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)
    return lowered
