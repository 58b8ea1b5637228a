"""The quantized ops as sets: what the splitter, the converters and the report need to know of
them, without importing the op families."""
from __future__ import annotations

import functools
from typing import Any

import torch
from torch.ao.quantization.fx._decomposed import quantized_decomposed_lib  # noqa: F401  (defines the ops)

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed

# A computed scale or zero point is per tensor or per channel, made in a few ops.
_MAX_PARAMS, _MAX_NODES = 1 << 16, 16

DEQUANTIZE = frozenset({qd.dequantize_per_tensor.default, qd.dequantize_per_tensor.tensor,
                         qd.dequantize_per_channel.default})
# The ops whose inputs or outputs may be int8 (the splitter allows int8 nowhere else).
INT8_OPS = DEQUANTIZE | {qd.quantize_per_tensor.default, qd.quantize_per_tensor.tensor,
                          qd.quantize_per_channel.default}
# Ops whose result is dequantized int8: TensorRT fuses the DequantizeLinear into the layer reading
# it, which then computes in int8 (the report names those layers).
DEQUANTIZED = DEQUANTIZE | {aten.fake_quantize_per_tensor_affine_cachemask.default,
                             aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams.default,
                             aten.fake_quantize_per_channel_affine_cachemask.default}


def constant_of(node: torch.fx.Node, arg: Any) -> torch.Tensor | None:
    """The value of a constant quantization parameter: what a get_attr node reads (a weight, a
    scale), or a small tensor a few ATen ops compute from those alone (`zero_point.int()`); else
    None."""
    if not isinstance(arg, torch.fx.Node):
        return None
    seen: set[torch.fx.Node] = set()
    pending = [arg]
    while pending:  # only a few ops, on constants only
        n = pending.pop()
        if n in seen or n.op == "get_attr":
            continue
        val = n.meta.get("val")
        if (n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload)
                or torch.Tag.nondeterministic_seeded in n.target.tags or len(seen) == _MAX_NODES
                or not isinstance(val, torch.Tensor) or val.numel() > _MAX_PARAMS):
            return None
        seen.add(n)
        pending.extend(n.all_input_nodes)
    values: dict[torch.fx.Node, Any] = {}

    def evaluate(n: torch.fx.Node) -> Any:
        if n not in values:
            if n.op == "get_attr":
                values[n] = functools.reduce(getattr, str(n.target).split("."), node.graph.owning_module)
            else:
                args, kwargs = torch.fx.node.map_arg((n.args, n.kwargs), evaluate)
                values[n] = n.target(*args, **kwargs)  # type: ignore[operator]
        return values[n]

    result = evaluate(arg)
    return result if isinstance(result, torch.Tensor) else None


# torchao's float8 quantize / dequantize (its PT2E float8 ops; what
# trt_lower.quantization.quantize(dtype="fp8") writes), by name: importing the converters must not
# import torchao.
FP8_QUANTIZE_OP = "torchao.quantize_affine_float8_non_decomposed.default"
FP8_DEQUANTIZE_OP = "torchao.dequantize_affine_float8_non_decomposed.default"


def _dtype(node: Any) -> torch.dtype | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return val.dtype if isinstance(val, torch.Tensor) else None


def fp8_quantizes(node: torch.fx.Node) -> bool:
    """Whether `node` makes float8_e4m3fn values of float ones: torchao's float8 quantize, or a
    cast to float8_e4m3fn (ModelOpt-style fake quantization, with the scales around it)."""
    return str(node.target) == FP8_QUANTIZE_OP or (node.target is aten._to_copy.default
                                                   and _dtype(node) == torch.float8_e4m3fn)


def fp8_dequantizes(node: torch.fx.Node) -> bool:
    """Whether `node` reads float8_e4m3fn values back as floats: torchao's float8 dequantize, or a
    cast from float8_e4m3fn."""
    return str(node.target) == FP8_DEQUANTIZE_OP or (node.target is aten._to_copy.default and bool(node.args)
                                                     and _dtype(node.args[0]) == torch.float8_e4m3fn)
