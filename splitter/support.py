"""The support oracle: for each node, supported inside an engine or a human reason why not."""

from __future__ import annotations

import functools
import operator
from typing import Iterable, Mapping, Optional

import torch
from torch.fx.passes.operator_support import OperatorSupportBase

import converters
from converters.core.dtypes import CAST_ONLY_DTYPES, ENGINE_DTYPES, FP8, FP8_DTYPES
from converters.core.quantized import FP4_DTYPES, INT8_OPS, fp8_dequantizes, fp8_quantizes, nvfp4_reason, quantized_op
from converters.core.target import TrtTarget
from splitter.index_check import check_indices

# Slicing clamps its bounds anyway, so 8.6 clamping end=INT64_MAX to int32 changes nothing; the
# slice_scatter converter clamps start and end itself (or hands them to a Slice).
_CLAMPED_ARGS: dict[object, tuple[int, ...]] = {
    torch.ops.aten.slice.Tensor: (2, 3),
    torch.ops.aten.slice_scatter.default: (3, 4),
}


def target_label(target: object) -> str:
    """How reports name a call target: 'aten.add.Tensor' for an ATen op, 'cond' for a
    higher-order op, else its qualified name ('operator.mul', 'torch.sym_float'), never a repr
    with an address."""
    if isinstance(target, (str, torch._ops.OperatorBase)):
        return str(target)
    try:
        return torch.fx.node._get_qualified_name(target).replace("_operator.", "operator.")  # type: ignore[arg-type]
    except (AttributeError, RuntimeError):
        return str(target)


# Namespaces of the ops torch itself defines: a user writes converters for the others.
BUILT_IN = frozenset({"aten", "prims", "quantized_decomposed", "higher_order"})


# torch.distributed's functional collectives (and their waits), as torch.export leaves a
# tensor-parallel model: they run between engines through the rank's process group, unless
# lowered with collectives="engine" (TensorRT 11's DistCollective layers: converters/ops/collectives.py).
COLLECTIVE_NAMESPACES = frozenset({"_c10d_functional", "c10d_functional"})
COLLECTIVE_REASON = "collective: runs in torch.distributed"


# Ops that read a Python number out of a tensor's data (`x.item()`): no engine computes one.
DATA_READS = frozenset({torch.ops.aten._local_scalar_dense.default, torch.ops.aten.item.default})
_SCALARS = (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)


# What torch.export leaves in the graph for `torch._check(n.item() <= 4)` and `_check_is_size`.
RUNTIME_CHECKS = frozenset({torch.ops.aten._assert_scalar.default, torch.ops.aten.sym_constrain_range_for_size.default})


def is_check(node: torch.fx.Node) -> bool:
    """A runtime check on a Python number, or a number only such checks read (`n.item() <= 4`):
    eager, like the number it checks, and no compute."""
    if node.op != "call_function":
        return False
    if node.target in RUNTIME_CHECKS or node.target is check_indices:
        return True
    return isinstance(node.meta.get("val"), _SCALARS) and bool(node.users) and all(is_check(u) for u in node.users)


def is_size(node: torch.fx.Node) -> bool:
    """A size computed at run time from tensors' shapes (sym_size, int arithmetic on sizes): an
    int, not a tensor, which an engine recomputes from its own inputs' shapes, where a
    converter computes each step (else a Python int that only eager ops take)."""
    return (
        node.op == "call_function"
        and isinstance(node.meta.get("val"), (int, torch.SymInt))
        and node.target not in DATA_READS
        and converters.lookup(node.target) is not None
        and all(is_size(a) for a in node.all_input_nodes if isinstance(a.meta.get("val"), _SCALARS))
    )


def _scalar_reason(node: torch.fx.Node) -> Optional[str]:
    """Engines exchange tensors and recompute sizes: any other Python number computed at run time
    (a float, a bool, an int read from data by `x.item()`) can neither come in nor be made inside."""
    for arg in [node, *node.all_input_nodes]:
        val = arg.meta.get("val")
        if isinstance(val, _SCALARS) and not is_size(arg):
            kind = type(val).__name__.removeprefix("Sym").lower()
            made = "read from a tensor's data (item())" if arg.target in DATA_READS else "computed at run time"
            if arg is node:
                return f"its result is a Python {kind} {made}, which an engine cannot produce"
            return f"takes {arg.name}, a Python {kind} {made}, which an engine cannot receive"
    return None


def _tensor_vals(node: torch.fx.Node) -> Iterable[tuple[str, object]]:
    for i, arg in enumerate(node.all_input_nodes):
        yield f"input {i} ({arg.name})", arg.meta.get("val")
    val = node.meta.get("val")
    for i, v in enumerate(val if isinstance(val, (tuple, list)) else (val,)):
        yield f"output {i}", v


def _dtype_reason(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    for where, val in _tensor_vals(node):
        if isinstance(val, torch.Tensor):
            if val.dtype == torch.bfloat16 and (reason := trt_target.bf16_reason()):
                return f"dtype bfloat16 unsupported ({where}): {reason}"
            if val.dtype in (torch.int8, torch.uint8) and quantized_op(node.target):
                continue  # quantized: int8 between Q and DQ; the op's capability refuses uint8
            if val.dtype == FP8 and (fp8_quantizes(node) or fp8_dequantizes(node)):
                continue  # quantized likewise: the op's capability says where it may go
            if val.dtype in FP8_DTYPES:
                return f"dtype {str(val.dtype).removeprefix('torch.')} unsupported ({where}): {_fp8_reason(node, val.dtype, trt_target)}"
            if val.dtype in CAST_ONLY_DTYPES and node.target is not torch.ops.aten._to_copy.default:
                return f"dtype {str(val.dtype).removeprefix('torch.')} only crosses the engine boundary ({where})"
            if val.dtype not in ENGINE_DTYPES | CAST_ONLY_DTYPES | {torch.bfloat16}:
                return f"dtype {str(val.dtype).removeprefix('torch.')} unsupported ({where})"
            if val.device.type != "cpu" and val.device.type != "cuda":
                return f"device {val.device} unsupported ({where})"
        elif val is not None and not isinstance(val, (int, float, bool, torch.SymInt, torch.SymFloat)):
            if not (isinstance(val, (tuple, list)) and all(isinstance(v, torch.Tensor) for v in val)):
                return f"{where} is a {type(val).__name__}, not a tensor"
    return None


def _fp8_reason(node: torch.fx.Node, dtype: torch.dtype, trt_target: TrtTarget) -> str:
    """Why an FP8 value cannot be where it is: a target without FP8, E5M2, or E4M3 outside a
    quantize or dequantize (whose capability says where FP8 may go)."""
    if reason := trt_target.fp8_reason():
        return reason
    if dtype != FP8:
        return "TensorRT's FP8 is E4M3 (float8_e4m3fn) only"
    if node.target in INT8_OPS:
        return (
            "quantized_decomposed's float8 quantize rounds x / scale to an integer before the cast, which "
            "is not FP8's rounding (no QuantizeLinear does it): quantize with torchao's float8 ops "
            "(trt_lower.quantization.quantize(dtype='fp8'))"
        )
    return (
        "TensorRT reads float8_e4m3fn only as quantized values: made by a quantize (a cast to it, "
        "torchao's float8 quantize), read by dequantizes"
    )


def _int32_reason(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    """Int arguments and int64 constants the target cannot compute as they are (8.6: int32)."""
    if trt_target.int64_native:
        return None
    clamped = _CLAMPED_ARGS.get(node.target, ())
    args = [a for i, a in enumerate(node.args) if i not in clamped] + list(node.kwargs.values())
    for arg in args:
        for value in arg if isinstance(arg, (tuple, list)) else (arg,):
            reason = None
            if isinstance(value, int) and not isinstance(value, bool):
                reason = trt_target.int32_reason(f"int value {value}", value, value)
            elif isinstance(value, torch.fx.Node) and value.op == "get_attr":
                weight = functools.reduce(getattr, str(value.target).split("."), node.graph.owning_module)
                if isinstance(weight, torch.Tensor) and weight.dtype == torch.int64 and weight.numel():
                    low, high = weight.aminmax()
                    reason = trt_target.int32_reason(f"int64 constant {value.name}", int(low), int(high))
            if reason:
                return reason
    return None


def unsupported_reason(
    node: torch.fx.Node,
    trt_target: TrtTarget,
    fallback_ops: frozenset[str],
    failed: Mapping[str, str] = {},
    collectives_in_engine: bool = False,
) -> Optional[str]:
    """None if `node` can run inside an engine built for `trt_target`, else why not. `failed` holds
    nodes whose conversion already failed once, by name, with the reason; `collectives_in_engine`:
    collectives go to their converters like any op (else they stay eager)."""
    if node.target is operator.getitem:
        return None
    if getattr(node.target, "namespace", None) in COLLECTIVE_NAMESPACES and not collectives_in_engine:
        return COLLECTIVE_REASON
    if node.name in failed:
        return failed[node.name]
    if str(node.target) in fallback_ops or str(getattr(node.target, "overloadpacket", "")) in fallback_ops:
        return "forced to eager by fallback_ops"
    if any(isinstance(val, torch.Tensor) and val.dtype in FP4_DTYPES for _, val in _tensor_vals(node)):
        return nvfp4_reason(trt_target)  # before the converters: torchao unpacks FP4 with ops that have some
    conv = converters.lookup(node.target)
    if conv is None and isinstance(node.target, torch._ops.OpOverload) and node.target.namespace not in BUILT_IN:
        return (
            f"no converter for {target_label(node.target)}: register one with "
            f"trt_lower.converter(torch.ops.{node.target.overloadpacket}) (docs/custom_converters.md)"
        )
    if conv is None:
        return f"no converter for {target_label(node.target)}"
    reason = _dtype_reason(node, trt_target) or _scalar_reason(node) or _int32_reason(node, trt_target)
    if reason is None and conv.capability is not None:
        reason = conv.capability(node, trt_target)
    return reason


class ConverterSupport(OperatorSupportBase):
    """Feeds the fx partitioner; remembers every refusal reason for the report."""

    def __init__(
        self,
        trt_target: TrtTarget,
        fallback_ops: frozenset[str],
        failed: Mapping[str, str],
        collectives_in_engine: bool = False,
    ) -> None:
        self.trt_target = trt_target
        self.fallback_ops = fallback_ops
        self.failed = failed
        self.collectives_in_engine = collectives_in_engine
        self.reasons: dict[torch.fx.Node, str] = {}

    def is_node_supported(self, submodules: Mapping[str, torch.nn.Module], node: torch.fx.Node) -> bool:
        if node.op != "call_function":
            return False
        reason = unsupported_reason(node, self.trt_target, self.fallback_ops, self.failed, self.collectives_in_engine)
        if reason is not None:
            self.reasons[node] = reason
        return reason is None
