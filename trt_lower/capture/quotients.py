"""Rounded quotients of sizes as integer division (part of stage 1, capture).

Models round a quotient of sizes through Python floats: `math.ceil(h / patch)` (timm's MobileViT
pads its feature map to whole patches so). Traced with dynamic dims, that is a float-valued node
between two sizes, and floats computed at run time stay eager, with every op that takes the
rounded size. For integers the rounding is exact integer arithmetic: floor(a / b) is `a // b`,
ceil(a / b) is `-(-a // b)`, and trunc is floor where neither side is negative. The float
quotient rounds the same way for |a| < 2**53, any size: a quotient that is not an integer lies at
least 1 / |b| from one, more than the float's rounding error, |a / b| * 2**-53.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable

import torch

from converters.core.dims import never_negative, never_zero, value_of


def _integer(arg: object) -> bool:
    val = value_of(arg)
    return isinstance(val, (int, torch.SymInt)) and not isinstance(val, bool)


def _floor(graph: torch.fx.Graph, a: Any, b: Any) -> torch.fx.Node:
    return graph.call_function(operator.floordiv, (a, b))


def _ceil(graph: torch.fx.Graph, a: Any, b: Any) -> torch.fx.Node:
    return graph.call_function(operator.neg, (_floor(graph, graph.call_function(operator.neg, (a,)), b),))


def _trunc(graph: torch.fx.Graph, a: Any, b: Any) -> torch.fx.Node | None:
    return _floor(graph, a, b) if never_negative(a) and never_negative(b) else None


# Rounding of a float -> the same rounding of a / b as integer arithmetic (None: not rewritten).
_ROUNDINGS: dict[Callable[..., Any], Callable[[torch.fx.Graph, Any, Any], torch.fx.Node | None]] = {
    math.floor: _floor,
    math.ceil: _ceil,
    math.trunc: _trunc,
    torch.sym_int: _trunc,
}


def _set_values(node: torch.fx.Node) -> None:
    """Each new node's value from its inputs', as tracing would have recorded it."""
    for arg in node.all_input_nodes:
        if "val" not in arg.meta:
            _set_values(arg)
    args = [value_of(a) for a in node.args]
    node.meta["val"] = node.target(*args)  # type: ignore[operator]


def integer_quotients(gm: torch.fx.GraphModule) -> None:
    """Rewrite floor/ceil/trunc of `a / b`, a and b integers (sizes, literals), as integer
    division, in place; the float quotient is left for dead code elimination. Only where b is
    known not to be 0: Python raises there, an engine's integer division by 0 is undefined."""
    graph = gm.graph
    for rounding, rewrite in _ROUNDINGS.items():
        for node in graph.find_nodes(op="call_function", target=rounding):
            quotient = node.args[0] if len(node.args) == 1 and not node.kwargs else None
            if not (
                isinstance(quotient, torch.fx.Node)
                and quotient.target is operator.truediv
                and all(_integer(a) for a in quotient.args)
                and never_zero(quotient.args[1])
            ):
                continue
            with graph.inserting_before(node):
                exact = rewrite(graph, *quotient.args)
            if exact is None:
                continue
            _set_values(exact)
            node.replace_all_uses_with(exact)
            graph.erase_node(node)
