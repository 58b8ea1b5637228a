"""The quantized ops as sets: what the splitter, the converters and the report need to know of
them, without importing the op families."""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch.ao.quantization.fx._decomposed import quantized_decomposed_lib  # noqa: F401  (defines the ops)

from converters.core.target import TrtTarget

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed

# A computed scale or zero point is per tensor or per channel, made in a few ops.
_MAX_PARAMS, _MAX_NODES = 1 << 16, 16

DEQUANTIZE = frozenset(
    {qd.dequantize_per_tensor.default, qd.dequantize_per_tensor.tensor, qd.dequantize_per_channel.default}
)
# The ops whose inputs or outputs may be int8 (the splitter allows int8 nowhere else).
INT8_OPS = DEQUANTIZE | {qd.quantize_per_tensor.default, qd.quantize_per_tensor.tensor, qd.quantize_per_channel.default}
# Group-wise dequantizes of INT4 weights held in int8 (converters/ops/int4.py), by name: torchao's
# op exists only where torchao is loaded. The layers reading them compute in float on INT4 weights.
INT4_DEQUANTIZE = frozenset(
    {"quantized_decomposed.dequantize_per_channel_group.default", "torchao.dequantize_affine.default"}
)
# TensorRT's INT4 block quantization: groups of these many input channels (its quantized-types
# documentation), in ONNX from this opset (INT4, DequantizeLinear's block_size).
INT4_BLOCK_SIZES, INT4_OPSET = (64, 128), 21
INT4: torch.dtype = getattr(torch, "int4")  # noqa: B009  (a torch dtype its type stubs leave out)
# FLOAT4E2M1 (NVFP4's values) in ONNX from this opset.
FP4_OPSET = 23
FP4_DTYPES = frozenset({torch.float4_e2m1fn_x2})
# Ops whose result is dequantized int8: TensorRT fuses the DequantizeLinear into the layer reading
# it, which then computes in int8 (the report names those layers).
DEQUANTIZED = DEQUANTIZE | {
    aten.fake_quantize_per_tensor_affine_cachemask.default,
    aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams.default,
    aten.fake_quantize_per_channel_affine_cachemask.default,
}


def quantized_op(target: object) -> bool:
    """Whether `target` may read or write int8 (quantized codes): the splitter allows int8 nowhere else."""
    return target in INT8_OPS or str(target) in INT4_DEQUANTIZE


def nvfp4_reason(trt_target: TrtTarget) -> str:
    """Why no engine takes NVFP4 (FP4 E2M1 weights held two a byte as float4_e2m1fn_x2, FP8 block
    scales of 16, a float32 global scale): TensorRT reads it as FLOAT4E2M1 DequantizeLinear (ONNX
    opset 23) from 10.8 on Blackwell GPUs, but ONNX Runtime has no FLOAT4E2M1 DequantizeLinear
    kernel, so trt_lower could not check such an engine against eager on any machine."""
    if trt_target.opset < FP4_OPSET:
        return (
            f"NVFP4 (float4_e2m1fn_x2) needs FLOAT4E2M1 DequantizeLinear (ONNX opset {FP4_OPSET}), and "
            f"trt_lower writes opset {trt_target.opset} for {trt_target.label}"
        )
    return (
        "NVFP4 (float4_e2m1fn_x2): ONNX Runtime has no FLOAT4E2M1 DequantizeLinear kernel, so trt_lower "
        "cannot check an NVFP4 engine against eager and keeps it eager"
    )


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
        if (
            n.op != "call_function"
            or not isinstance(n.target, torch._ops.OpOverload)
            or torch.Tag.nondeterministic_seeded in n.target.tags
            or len(seen) == _MAX_NODES
            or not isinstance(val, torch.Tensor)
            or val.numel() > _MAX_PARAMS
        ):
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
    return str(node.target) == FP8_QUANTIZE_OP or (
        node.target is aten._to_copy.default and _dtype(node) == torch.float8_e4m3fn
    )


def fp8_dequantizes(node: torch.fx.Node) -> bool:
    """Whether `node` reads float8_e4m3fn values back as floats: torchao's float8 dequantize, or a
    cast from float8_e4m3fn."""
    return str(node.target) == FP8_DEQUANTIZE_OP or (
        node.target is aten._to_copy.default and bool(node.args) and _dtype(node.args[0]) == torch.float8_e4m3fn
    )
