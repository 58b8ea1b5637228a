"""The support oracle: for each node, supported inside an engine or a human reason why not."""
from __future__ import annotations

import operator
from typing import Iterable, Mapping, Optional

import torch
from torch.fx.passes.operator_support import OperatorSupportBase

import converters

# Dtypes an engine may carry. float64 has no TensorRT kernels; bf16 is not on V100.
ENGINE_DTYPES = frozenset(
    {torch.float32, torch.float16, torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool}
)


def _tensor_vals(node: torch.fx.Node) -> Iterable[tuple[str, object]]:
    for i, arg in enumerate(node.all_input_nodes):
        yield f"input {i} ({arg.name})", arg.meta.get("val")
    val = node.meta.get("val")
    for i, v in enumerate(val if isinstance(val, (tuple, list)) else (val,)):
        yield f"output {i}", v


def unsupported_reason(node: torch.fx.Node, fallback_ops: frozenset[str],
                       failed: Mapping[str, str] = {}) -> Optional[str]:
    """None if `node` can run inside an engine, else why not. `failed` holds nodes whose
    conversion already failed once, by name, with the reason."""
    if node.target is operator.getitem:
        return None
    if node.name in failed:
        return failed[node.name]
    if str(node.target) in fallback_ops or str(getattr(node.target, "overloadpacket", "")) in fallback_ops:
        return "forced to eager by fallback_ops"
    conv = converters.lookup(node.target)
    if conv is None:
        return f"no converter for {node.target}"
    for where, val in _tensor_vals(node):
        if isinstance(val, torch.Tensor):
            if val.dtype not in ENGINE_DTYPES:
                return f"dtype {str(val.dtype).removeprefix('torch.')} unsupported ({where})"
            if val.device.type != "cpu" and val.device.type != "cuda":
                return f"device {val.device} unsupported ({where})"
        elif val is not None and not isinstance(val, (int, float, bool, torch.SymInt, torch.SymFloat)):
            if not (isinstance(val, (tuple, list)) and all(isinstance(v, torch.Tensor) for v in val)):
                return f"{where} is a {type(val).__name__}, not a tensor"
    if conv.capability is not None:
        return conv.capability(node)
    return None


class ConverterSupport(OperatorSupportBase):
    """Feeds the fx partitioner; remembers every refusal reason for the report."""

    def __init__(self, fallback_ops: frozenset[str], failed: Mapping[str, str]) -> None:
        self.fallback_ops = fallback_ops
        self.failed = failed
        self.reasons: dict[torch.fx.Node, str] = {}

    def is_node_supported(self, submodules: Mapping[str, torch.nn.Module], node: torch.fx.Node) -> bool:
        if node.op != "call_function":
            return False
        reason = unsupported_reason(node, self.fallback_ops, self.failed)
        if reason is not None:
            self.reasons[node] = reason
        return reason is None
