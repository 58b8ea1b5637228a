"""FP8 (E4M3) for TensorRT: the places TensorRTQuantizer picks (with these specs), observed for their largest
absolute values (amax calibration: a scale of amax / 448 maps the largest value seen to FP8's
largest), then converted to torchao's float8 quantize/dequantize ops: one scale per tensor on
activations, one per output channel on weights, symmetric (FP8 has no zero point).

Why not convert_pt2e: its float8 path rounds x / scale to an integer before the cast (not FP8's
rounding), and fails on per-channel float8 weights (torch 2.14, torchao 0.18: "Promotion for
Float8 Types is not supported").
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torchao.quantization.quant_primitives  # noqa: F401  (defines torchao's float8 ops)
from torchao.quantization.pt2e.observer import MinMaxObserver, PerChannelMinMaxObserver
from torchao.quantization.pt2e.quantizer import QuantizationSpec

FP8 = torch.float8_e4m3fn
FP8_MAX = float(torch.finfo(FP8).max)  # 448
# A tensor seen all zero still gets a positive scale (TensorRT needs one).
_MIN_SCALE = 2.0**-24
_RANGE = {"dtype": FP8, "quant_min": -int(FP8_MAX), "quant_max": int(FP8_MAX)}
ACTIVATION = QuantizationSpec(observer_or_fake_quant_ctr=MinMaxObserver, qscheme=torch.per_tensor_symmetric, **_RANGE)
# Axis 0: the output channels of conv and linear weights (TensorRT's per-channel axis for them).
WEIGHT = QuantizationSpec(
    observer_or_fake_quant_ctr=PerChannelMinMaxObserver, qscheme=torch.per_channel_symmetric, ch_axis=0, **_RANGE
)


_QUANTIZE = torch.ops.torchao.quantize_affine_float8_non_decomposed.default
_DEQUANTIZE = torch.ops.torchao.dequantize_affine_float8_non_decomposed.default


def _attribute(module: torch.nn.Module, path: str) -> torch.Tensor:
    return functools.reduce(getattr, path.split("."), module)  # type: ignore[return-value]


def convert(prepared: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Each observer of `prepared` (calibrated) replaced by a float8 quantize and dequantize of
    the value it observed, with the scale it saw as a buffer; a weight's quantize done here, its
    FP8 values kept as a buffer (as convert_pt2e keeps int8 weights)."""
    graph = prepared.graph
    observers = [
        n
        for n in graph.nodes
        if n.op == "call_module"
        and isinstance(prepared.get_submodule(str(n.target)), (MinMaxObserver, PerChannelMinMaxObserver))
    ]
    for node in observers:
        observer: Any = prepared.get_submodule(str(node.target))  # torchao has no types
        amax = torch.maximum(observer.min_val.abs(), observer.max_val.abs())
        scale = (amax / FP8_MAX).clamp(min=_MIN_SCALE)
        (x,) = node.args
        value = x.meta["val"]
        if scale.ndim:  # per channel: one scale per slice of axis 0, shaped to broadcast
            scale = scale.reshape(-1, *[1] * (value.ndim - 1))
        prepared.register_buffer(f"{node.target}_scale", scale)
        with graph.inserting_before(node):
            s = graph.get_attr(f"{node.target}_scale")
            if x.op == "get_attr":
                weight = _attribute(prepared, str(x.target)).detach()
                prepared.register_buffer(f"{node.target}_fp8", _QUANTIZE(weight, scale, FP8))
                q = graph.get_attr(f"{node.target}_fp8")
            else:
                q = graph.call_function(_QUANTIZE, (x, s, FP8))
            dq = graph.call_function(_DEQUANTIZE, (q, s, value.dtype))
        node.replace_all_uses_with(dq)
        graph.erase_node(node)
        prepared.delete_submodule(str(node.target))
    graph.eliminate_dead_code()
    prepared.delete_all_unused_submodules()
    prepared.recompile()
    return prepared
