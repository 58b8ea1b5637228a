"""torch.cond as ONNX If: both branches inside the engine, chosen at run time by the predicate.

TensorRT parses If into its conditional layer (every target: the branches' outputs must have
broadcastable shapes and distinct names, which torch.cond's equal branch outputs and our fresh
names give). A branch is a subgraph that reads the cond's operands from the enclosing graph (ONNX's
outer scope); its constants are initializers of the enclosing graph.
"""

from __future__ import annotations

import operator
from typing import Any, Optional, Sequence

import torch
from onnx import helper

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.dtypes import ENGINE_DTYPES
from converters.core.interpreter import convert_nodes
from converters.core.registry import converter, lookup
from converters.core.target import TrtTarget

cond_op = torch.ops.higher_order.cond


# float64 (and bfloat16, on ONNX Runtime) are retyped by passes that do not reach into subgraphs.
_BRANCH_DTYPES = ENGINE_DTYPES - {torch.float64}


def _dtype_reason(node: torch.fx.Node) -> Optional[str]:
    vals = [node.meta.get("val"), *(a.meta.get("val") for a in node.all_input_nodes)]
    for val in vals:
        for v in val if isinstance(val, (tuple, list)) else (val,):
            if isinstance(v, torch.Tensor) and v.dtype not in _BRANCH_DTYPES:
                return f"{node.name}: dtype {v.dtype} in a branch"
    return None


def _branch_reason(gm: torch.fx.GraphModule, trt_target: TrtTarget) -> Optional[str]:
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        conv = lookup(node.target)
        if conv is None:
            return f"no converter for {node.target}"
        reason = _dtype_reason(node) or (conv.capability(node, trt_target) if conv.capability else None)
        if reason:
            return f"{node.name}: {reason}" if not reason.startswith(node.name) else reason
    return None


def _capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    pred = node.args[0]
    if not isinstance(pred, torch.fx.Node) or not isinstance(pred.meta.get("val"), torch.Tensor):
        return "a predicate that is not a tensor"
    reason = _dtype_reason(node)
    if reason:
        return reason
    for branch in node.args[1:3]:
        gm = getattr(node.graph.owning_module, str(getattr(branch, "target", "")), None)
        if not isinstance(gm, torch.fx.GraphModule):
            return "a branch that is not a graph"
        reason = _branch_reason(gm, trt_target)
        if reason:
            return f"branch {branch}: {reason}"
    return None


def _graph(b: GraphBuilder, gm: torch.fx.GraphModule, name: str, operands: Sequence[Any]) -> Any:
    child = b.subgraph(f"{b.converting.name}/{name}")
    env: dict[torch.fx.Node, Any] = dict(zip(gm.graph.find_nodes(op="placeholder"), operands))
    for out in convert_nodes(child, gm, env):
        val = out.meta["val"]
        child.add_output(env[out], out.name, val.dtype, val.shape)
    return helper.make_graph(child.nodes, f"{b.converting.name}_{name}", [], child.outputs)


@converter(cond_op, capability=_capability)
def cond(
    b: GraphBuilder,
    pred: Value,
    true_graph: torch.fx.GraphModule,
    false_graph: torch.fx.GraphModule,
    operands: Sequence[Any],
) -> tuple[Ref, ...]:
    """cond(Tensor pred, GraphModule true_fn, GraphModule false_fn, operands) -> Tensor[]"""
    flag = b.op("Reshape", b.cast(pred, torch.bool), b.ints([]), dtype=torch.bool, shape=())
    outputs = len(b.out)
    return b.op_outputs(
        "If",
        flag,
        outputs=outputs,
        then_branch=_graph(b, true_graph, "then", operands),
        else_branch=_graph(b, false_graph, "else", operands),
    )
