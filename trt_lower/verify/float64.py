"""The float64 reference verification measures errors against: a run of captured-graph nodes in
float64, fed the eager values at their inputs (widened). Eager's own distance from it is the
rounding error eager makes in that computation, which an engine may make too (scaled to its
precision): what tells a cancellation's noise from a wrong value (tolerance.py).

Floating tensors and explicit floating dtypes (a cast, a `full`) become float64; a node that
refuses float64 (a quantize expecting float32) runs in the dtypes eager gave it, its result widened.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Collection, Sequence

import torch
import torch.utils._pytree as pytree

from trt_lower.verify.nodes import Node

_NARROW = (torch.float32, torch.float16, torch.bfloat16)


def _widen(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype in _NARROW:
        return value.to(torch.float64)
    if isinstance(value, torch.dtype) and value in _NARROW:
        return torch.float64
    return value


def widened(value: Any) -> Any:
    """`value` (a tensor, or a tuple of them) with its floating tensors in float64."""
    return pytree.tree_map(_widen, value)


def run_float64(nodes: Sequence[Node], given: Callable[[Node], Any], keep: Collection[Node]) -> dict[Node, Any]:
    """The values of `keep` among `nodes` (call_function nodes in graph order) computed in float64;
    a node outside them that one reads is `given` its eager value. Every other value is dropped
    after its last read: a float64 copy of each weight lives only while its node runs."""
    last = {a: i for i, n in enumerate(nodes) for a in n.all_input_nodes}
    values: dict[Node, Any] = {}

    def read(a: Node) -> Any:
        return values[a] if a in values else widened(given(a))

    def as_eager(a: Node) -> Any:
        value, val = read(a), a.meta.get("val")
        return value.to(val.dtype) if isinstance(value, torch.Tensor) and isinstance(val, torch.Tensor) else value

    with torch.no_grad():
        for i, n in enumerate(nodes):
            args, kwargs = widened(torch.fx.node.map_arg((n.args, n.kwargs), read))
            try:
                values[n] = n.target(*args, **kwargs)  # type: ignore[operator]
            except (RuntimeError, TypeError, NotImplementedError, AssertionError):
                args, kwargs = torch.fx.node.map_arg((n.args, n.kwargs), as_eager)
                values[n] = widened(n.target(*args, **kwargs))  # type: ignore[operator]
            del args, kwargs
            for a in n.all_input_nodes:
                if last[a] == i and a not in keep:
                    values.pop(a, None)
    return {n: values[n] for n in keep if n in values}


def graph_float64(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> list[Any]:
    """The outputs of FX graph module `gm` (an engine's subgraph) called with `inputs`, computed
    in float64."""
    fed = dict(zip((n for n in gm.graph.nodes if n.op == "placeholder"), inputs))

    def given(a: Node) -> Any:
        return fed[a] if a.op == "placeholder" else functools.reduce(getattr, str(a.target).split("."), gm)

    out = gm.graph.output_node().args[0]
    outputs: list[Node] = []
    torch.fx.node.map_arg(out, outputs.append)
    values = run_float64([n for n in gm.graph.nodes if n.op == "call_function"], given, outputs)
    results = torch.fx.node.map_arg(out, lambda a: values[a] if a in values else widened(given(a)))
    return list(results) if isinstance(results, (tuple, list)) else [results]
