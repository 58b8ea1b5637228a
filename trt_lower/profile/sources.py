"""Where each FX node of a lowered model comes from: its op, the submodule that called it and the
model's source line. A live module reads them from its captured graph; trt_lower.save stores them
in the artifact (field "sources"), so that a loaded file is profiled without the model's code."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch

from trt_lower.verify.nodes import module_of, source_line


@dataclass(frozen=True)
class NodeSource:
    """One FX node: its name in the captured graph, the op it calls, the submodule that called it
    (`module`: its path, "" for the top module; `module_type`: its class) and `source`, the
    model's line ("file:line in fn: code"), both "" where unknown (a file saved without them)."""

    node: str
    op: str
    module: str = ""
    module_type: str = ""
    source: str = ""

    def describe(self) -> str:
        """`node (op) module: source`, the parts known."""
        where = " ".join(p for p in (self.module, self.source) if p)
        return f"{self.node} ({self.op})" + (f" {where}" if where else "")


def captured_sources(gm: torch.fx.GraphModule) -> dict[str, NodeSource]:
    """The sources of `gm`'s call_function nodes, by node name."""
    sources = {}
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        path, kind = module_of(node)
        line = source_line(node) if node.meta.get("stack_trace") else ""
        sources[node.name] = NodeSource(node.name, _op_name(node.target), path, kind, line)
    return sources


def _op_name(target: Any) -> str:
    return str(target) if isinstance(target, torch._ops.OpOverload) else getattr(target, "__name__", str(target))


def sources_of(lowered: Any) -> dict[str, NodeSource]:
    """The sources of a LoweredModule's nodes: from its captured graph where lower_to_trt made it,
    else those its file stored (empty for a file saved before they were stored)."""
    lowering = getattr(lowered, "lowering", None)
    if lowering is not None:
        return captured_sources(lowering.captured.graph_module())
    stored = getattr(lowered, "sources", None)
    return dict(stored) if stored else {}


def to_json(sources: dict[str, NodeSource]) -> dict[str, dict[str, str]]:
    return {name: asdict(s) for name, s in sources.items()}


_FIELDS = tuple(NodeSource.__dataclass_fields__)


def from_json(data: Any) -> dict[str, NodeSource]:
    """What to_json wrote, checked: ValueError naming the first entry that is not a dict of
    strings under NodeSource's fields (a file's field is not trusted)."""
    if not isinstance(data, dict):
        raise ValueError(f"a dict by node name, got {type(data).__name__}")
    sources = {}
    for name, fields in data.items():
        if not isinstance(fields, dict) or not set(fields) <= set(_FIELDS) or {"node", "op"} - set(fields):
            raise ValueError(f"entry {str(name)[:80]!r}: a dict of {list(_FIELDS)} (node and op required)")
        if not all(isinstance(v, str) for v in fields.values()):
            raise ValueError(f"entry {str(name)[:80]!r}: every field a string")
        sources[name] = NodeSource(**fields)
    return sources
