"""torch.distributed's functional collectives inside an engine: TensorRT 11's DistCollective layer,
as its ONNX parser imports it (op "DistCollective" with the attributes NVIDIA's Polygraphy
`multi_device shard` writes: collective_operation, reduce_op, root, group_size, groups).

Only lower_to_trt(..., collectives="engine") sends collectives here (splitter/support.py keeps
them eager otherwise). torch's semantics, which TensorRT's layer shares: all_gather_into_tensor
concatenates the ranks' inputs along dim 0 in rank order, reduce_scatter_tensor reduces them and
gives rank i the i-th block along dim 0. The group is resolved by name through torch.distributed
while lowering: an engine's execution context takes one communicator (the world's NCCL one, see
docs/distributed-lowering.md), so only collectives over the whole world go inside.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _resolve_process_group

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.registry import converter
from converters.core.target import TrtTarget

functional = torch.ops._c10d_functional
# The collectives a wait may follow into an engine.
_COLLECTIVES = frozenset(
    {functional.all_reduce.default, functional.all_gather_into_tensor.default, functional.reduce_scatter_tensor.default}
)

# torch's reduce_op strings -> DistCollective's (TensorRT's ReduceOperation: kSUM, kAVG, kMAX, kMIN).
REDUCE_OPS = {"sum": "sum", "avg": "avg", "max": "max", "min": "min"}
# TensorRT's collectives computing in float (the dtypes this project has run them in).
_DTYPES = (torch.float32, torch.float16)


def world_ranks(group_name: Any) -> list[int] | str:
    """The ranks of the process group named `group_name`, in order, or why it cannot run inside an
    engine (no process group, or not the whole world)."""
    if not dist.is_available() or not dist.is_initialized():
        return "no torch.distributed process group to resolve its group from"
    try:
        group = _resolve_process_group(group_name)
    except (RuntimeError, ValueError) as e:
        return f"its process group {group_name!r} does not resolve: {e}"
    ranks = dist.get_process_group_ranks(group)
    if ranks != list(range(dist.get_world_size())) or len(ranks) < 2:
        return (
            f"its process group {group_name!r} has ranks {ranks}, not the whole world of {dist.get_world_size()} "
            "(2 or more): an engine runs its collectives on the world's communicator"
        )
    return list(ranks)


def _collective_reason(node: torch.fx.Node, trt_target: TrtTarget) -> str | None:
    """Only under collectives="engine" (an 11.x release, not 10.15-10.x), float32/16, over the whole world.

    The splitter sends collectives here only then; the reduction must be one DistCollective has."""
    if not trt_target.at_least("latest"):
        return f"collectives inside an engine need TensorRT 11.0 or newer, not {trt_target.label}"
    reduce_op = node.args[1] if node.target is not functional.all_gather_into_tensor.default else "sum"
    if reduce_op not in REDUCE_OPS:
        return f"reduce_op {reduce_op!r}: TensorRT's DistCollective reduces with {', '.join(REDUCE_OPS)} only"
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dtype not in _DTYPES:
        return f"collectives run inside an engine on {', '.join(map(str, _DTYPES))} only"
    ranks = world_ranks(node.args[-1])
    return ranks if isinstance(ranks, str) else None


def _wait_reason(node: torch.fx.Node, trt_target: TrtTarget) -> str | None:
    """A wait goes where its collective goes (in an engine, or eager after an eager one).

    Inside an engine it is a no-op; after an eager collective it must run in eager (an engine would
    read the tensor before the collective ends)."""
    source = node.args[0]
    if isinstance(source, torch.fx.Node) and source.target in _COLLECTIVES:
        return _collective_reason(source, trt_target)
    return "waits on a tensor no collective inside an engine makes"


def _dist_collective(b: GraphBuilder, x: Value, operation: str, reduce_op: str, group_name: Any) -> Ref:
    ranks = world_ranks(group_name)
    assert not isinstance(ranks, str), ranks  # the capability checked it
    return b.op(
        "DistCollective",
        x,
        collective_operation=operation,
        reduce_op=REDUCE_OPS[reduce_op],
        root=0,
        group_size=len(ranks),
        groups=ranks,
    )


@converter(functional.all_reduce.default, capability=_collective_reason)
def all_reduce(b: GraphBuilder, x: Value, reduce_op: str, group_name: Any) -> Ref:
    """all_reduce(Tensor input, str reduce_op, Any group_name) -> Tensor"""
    return _dist_collective(b, x, "all_reduce", reduce_op, group_name)


@converter(functional.all_gather_into_tensor.default, capability=_collective_reason)
def all_gather_into_tensor(b: GraphBuilder, x: Value, group_size: int, group_name: Any) -> Ref:
    """all_gather_into_tensor(Tensor input, int group_size, Any group_name) -> Tensor

    The ranks' inputs concatenated along dim 0, in rank order; reduce_op is unused ("sum", as
    Polygraphy writes it)."""
    return _dist_collective(b, x, "all_gather", "sum", group_name)


@converter(functional.reduce_scatter_tensor.default, capability=_collective_reason)
def reduce_scatter_tensor(b: GraphBuilder, x: Value, reduce_op: str, group_size: int, group_name: Any) -> Ref:
    """reduce_scatter_tensor(Tensor input, str reduce_op, int group_size, Any group_name) -> Tensor

    The ranks' inputs reduced, this rank's block of dim 0 (rank i: the i-th of group_size)."""
    return _dist_collective(b, x, "reduce_scatter", reduce_op, group_name)


@converter(functional.wait_tensor.default, capability=_wait_reason)
def wait_tensor(b: GraphBuilder, x: Value) -> Ref:
    """wait_tensor(Tensor tensor) -> Tensor

    Inside an engine a collective's result is ready when the next layer runs: nothing to wait for."""
    return b.op("Identity", x)
