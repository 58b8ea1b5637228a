"""Captured-graph nodes as verification and debugging see them: every node's eager value, the
units a node set is cut into, and where in the model's source a node comes from."""

from __future__ import annotations

import operator
import os
import re
from typing import Any, Sequence

import torch

Node = torch.fx.Node

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)')
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


class Recorder(torch.fx.Interpreter):
    """Runs the graph in eager PyTorch and keeps every node's value."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self.values: dict[Node, Any] = {}

    def run_node(self, n: Node) -> Any:
        self.values[n] = super().run_node(n)
        return self.values[n]


def units(nodes: Sequence[Node]) -> list[list[Node]]:
    """The nodes grouped so that a multi-output node and its getitems are never split apart, nor
    a quantize and the dequantizes reading its int8 or FP8 (no engine takes or gives them)."""
    groups: dict[Node, list[Node]] = {}
    group_of: dict[Node, Node] = {}
    for n in nodes:
        base = n.args[0] if n.target is operator.getitem and n.args[0] in groups else n
        codes = [a for a in n.all_input_nodes if a in group_of and is_quantized(a)]
        base = group_of[codes[0]] if codes else base
        groups.setdefault(base, []).append(n)  # type: ignore[arg-type]
        group_of[n] = base  # type: ignore[assignment]
    return list(groups.values())


def is_quantized(node: Node) -> bool:
    """Whether `node` gives quantized codes (int8, FP8 E4M3)."""
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and val.dtype in (torch.int8, torch.float8_e4m3fn)


def source_line(node: Node) -> str:
    """The innermost frame of the node's stack trace outside torch's own code: the model's line."""
    frames = _FRAME.findall(node.meta.get("stack_trace") or "")
    if not frames:
        return "<no stack trace>"
    path, line, fn, code = ([f for f in frames if not f[0].startswith(_TORCH_DIR)] or frames)[-1]
    return f"{path}:{line} in {fn}: {code.strip()}"


def module_of(node: Node) -> tuple[str, str]:
    """The submodule that called the node's op (nn_module_stack): its path ("" for the top
    module) and its class."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return "", ""
    path, kind = list(stack.values())[-1]
    return str(path), kind if isinstance(kind, str) else f"{kind.__module__}.{kind.__qualname__}"


_aten = torch.ops.aten
# Outputs with no single right value to compare: memory left uninitialised, and the indices an op
# may pick among equal values (ties: the values output is compared instead).
_UNINITIALISED = frozenset(
    {
        _aten.empty.memory_format,
        _aten.empty_like.default,
        _aten.new_empty.default,
        _aten.empty_strided.default,
        _aten.empty_permuted.default,
    }
)
_TIED_INDICES = frozenset(
    {
        _aten.topk.default,
        _aten.kthvalue.default,
        _aten.sort.default,
        _aten.sort.stable,
        _aten.max.dim,
        _aten.min.dim,
        _aten.mode.default,
        _aten.median.dim,
        _aten.nanmedian.dim,
    }
)
_TIED_ARGS = frozenset({_aten.argmax.default, _aten.argmin.default})


def ambiguous(node: Node) -> bool:
    """Whether eager's value of `node` is one of several right answers (it is not compared)."""
    if node.target in _UNINITIALISED or node.target in _TIED_ARGS:
        return True
    if node.target is operator.getitem and node.args[1] == 1 and isinstance(node.args[0], Node):
        return node.args[0].target in _TIED_INDICES
    return False
