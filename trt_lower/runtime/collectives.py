"""torch.distributed's collectives between engines, failing by name.

A tensor-parallel forward calls functional collectives (`_c10d_functional.all_reduce`, ...) in
eager between its engines. When another rank has died, or a collective outlasts the process
group's timeout (`init_process_group(timeout=...)`), torch.distributed raises an error naming a
socket or a gloo/NCCL source line; the generated forward calls each collective node through a
wrapper that raises CollectiveError naming the node and its op instead. One Python frame a call.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch

from converters.core.errors import TrtLowerError
from trt_lower.runtime.retarget import retargeted

NAMESPACE = "_c10d_functional"


class CollectiveError(TrtLowerError, RuntimeError):
    """A collective between engines failed on this rank (another rank died or the process group's
    timeout passed); names the graph node, its op and what torch.distributed said."""


def _named(op: torch._ops.OpOverload, node: torch.fx.Node, ops: dict[torch.fx.Node, Any]) -> Callable[..., Any]:
    """`op` called as `node` calls it, its failures raised as CollectiveError naming the node (and
    for a wait, the collective it completes, of `ops`: the collective nodes' ops)."""
    waited = node.args[0] if node.args else None
    what = f"node '{node.name}' ({op})"
    if isinstance(waited, torch.fx.Node) and waited in ops:
        what += f", completing node '{waited.name}' ({ops[waited]})"

    def collective(*args: Any, **kwargs: Any) -> Any:
        try:
            return op(*args, **kwargs)
        except RuntimeError as e:  # torch.distributed's errors (DistError and gloo's) are RuntimeErrors
            raise CollectiveError(f"collective {what} failed: {e}") from e

    collective.__name__ = collective.__qualname__ = f"collective_{node.name}"
    return collective


def collectives_named(graph: torch.fx.Graph) -> contextlib.AbstractContextManager[None]:
    """Inside: every collective node of `graph` targets its wrapper (for the code generated
    inside); after: the graph as it was (the artifact and the report read the ops)."""
    ops = {
        node: node.target
        for node in graph.nodes
        if node.op == "call_function"
        and isinstance(node.target, torch._ops.OpOverload)
        and node.target.namespace == NAMESPACE
    }
    return retargeted(graph, lambda node: _named(ops[node], node, ops) if node in ops else None)
