"""Per-rank artifacts: a module whose graph calls torch.distributed's collectives, or whose engines
run them inside (collectives="engine"), is saved on one rank of a job, and loads only on that rank
of a job of the same size (docs/distributed.md).

The manifest's `distributed` field records the rank, the world size, the backend and each
process group the collectives run over (its name in the graph and its ranks). On load the rank
and world size must be the current process's; the backend is a record only (a file saved on CPUs
with gloo runs on GPUs with NCCL). The group a collective names in the file is never looked up:
it must be one the field records, and the node is bound to the current job's group of the same
ranks. Only collectives over the whole world are saved (a part of it, one dimension of a 2-D
mesh, is refused by name): the world is the one group every rank of the loading job has.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from trt_lower.deploy.container import ArtifactError
from trt_lower.deploy.manifest import FieldError, field, items, need
from trt_lower.deploy.safe_ops import COLLECTIVES

DISTRIBUTED = "distributed"
# The placeholder save and load replace by the process's rank ("model.rank{rank}.trtl").
RANK = "{rank}"
_MAX_WORLD = 2**16


class RankMismatchError(ArtifactError):
    """A per-rank artifact loaded where torch.distributed is not as it was saved: another rank,
    another world size, or no process group at all. Names the field, the file's value and the
    current one."""


def collective(node: torch.fx.Node) -> bool:
    """Whether `node` calls one of the collectives an artifact holds."""
    return node.op == "call_function" and str(node.target) in COLLECTIVES


def _collectives(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    return [n for n in graph.nodes if collective(n)]


def _names(node: torch.fx.Node) -> list[str]:
    assert isinstance(node.target, torch._ops.OpOverload)  # a collective's node
    return [a.name for a in node.target._schema.arguments]


def _arguments(node: torch.fx.Node) -> dict[str, Any]:
    return {**dict(zip(_names(node), node.args)), **node.kwargs}


def _group(node: torch.fx.Node) -> Any:
    """The group argument of a collective node (None for a wait: it has none)."""
    return _arguments(node).get("group_name")


def _world() -> tuple[int, int]:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise LookupError("no torch.distributed process group is initialized in this process")
    return dist.get_rank(), dist.get_world_size()


def record(graph: torch.fx.Graph, in_engines: bool = False) -> dict[str, Any] | None:
    """The `distributed` field of a module whose graph calls collectives, or whose engines run
    them inside (`in_engines`: collectives="engine", over the whole world); None for neither."""
    nodes = [n for n in _collectives(graph) if _group(n) is not None]
    if not nodes and not in_engines:
        return None
    import torch.distributed as dist
    from torch._C._distributed_c10d import _resolve_process_group

    try:
        rank, world = _world()
    except LookupError as e:
        where = (
            f"node '{nodes[0].name}' ({nodes[0].target}) runs over process group '{_group(nodes[0])}'"
            if nodes
            else "its engines run collectives"
        )
        raise ArtifactError(
            f"cannot save this module: {where} ({e}); save it on its rank, while the group it was lowered in exists"
        ) from None
    groups: dict[str, list[int]] = {}
    for node in nodes:
        name = _group(node)
        try:
            ranks = dist.get_process_group_ranks(_resolve_process_group(name))
        except (LookupError, RuntimeError) as e:  # no process group, or not this one any more
            raise ArtifactError(
                f"cannot save this module: node '{node.name}' ({node.target}) runs over process group "
                f"'{name}' ({e}); save it on its rank, while the group it was lowered in exists"
            ) from None
        if ranks != list(range(world)):
            raise ArtifactError(
                f"cannot save this module: node '{node.name}' ({node.target}) runs over process group "
                f"'{name}' of ranks {ranks[:16]}, a part of the world of {world}; an artifact holds "
                "collectives over the whole world only"
            )
        groups[name] = ranks
    return {
        "rank": rank,
        "world_size": world,
        "backend": str(dist.get_backend()),
        "groups": [{"name": name, "ranks": ranks} for name, ranks in groups.items()],
    }


def check(manifest: dict[str, Any], path: os.PathLike[str] | str) -> dict[str, list[int]]:
    """The groups the file's `distributed` field records ({} for a file without one), after
    checking its rank and world size against this process's: RankMismatchError otherwise."""
    data = manifest.get(DISTRIBUTED)
    if data is None:
        return {}
    rank = field(data, "rank", int, DISTRIBUTED)
    world = field(data, "world_size", int, DISTRIBUTED)
    if not 0 <= rank < world <= _MAX_WORLD:
        raise FieldError(f"field '{DISTRIBUTED}': rank {rank} of world size {world} is not a rank of it")
    field(data, "backend", str, DISTRIBUTED)
    try:
        current = dict(zip(("rank", "world_size"), _world()))
    except LookupError as e:
        raise RankMismatchError(
            f"{path}: was saved on rank {rank} of {world} (field '{DISTRIBUTED}'), and {e}: launch with "
            "torchrun and call torch.distributed.init_process_group before trt_lower.load"
        ) from None
    for key, saved in (("world_size", world), ("rank", rank)):
        if saved != current[key]:
            raise RankMismatchError(
                f"{path}: field '{DISTRIBUTED}.{key}' is {saved}, but this process's {key} is {current[key]}: "
                "load each rank's own file, saved on that rank of a job of the same size"
            )
    groups = {}
    for at, group in items(data, "groups", DISTRIBUTED):
        ranks = [need(r, int, f"{at}.ranks[{k}]") for k, r in enumerate(field(group, "ranks", list, at))]
        if ranks != list(range(world)):
            raise FieldError(f"field '{at}.ranks' must be the world's ranks 0..{world - 1}, got {str(ranks)[:80]}")
        groups[field(group, "name", str, at)] = ranks
    return groups


def bind(graph: torch.fx.Graph, groups: dict[str, list[int]]) -> None:
    """Each collective of a loaded graph bound to the current job's group: the group it names must
    be one of `groups` (the file's `distributed` field), and the size it allocates for that group's."""
    for node in _collectives(graph):
        name = _group(node)
        if name is None:
            continue
        if name not in groups:
            raise FieldError(
                f"field 'graph': node '{node.name}' ({node.target}) runs over process group {str(name)[:80]!r}, "
                f"which field '{DISTRIBUTED}' does not record"
            )
        size = _arguments(node).get("group_size", len(groups[name]))
        if size != len(groups[name]):
            raise FieldError(
                f"field 'graph': node '{node.name}' ({node.target}) gives group_size {size}; its group has "
                f"{len(groups[name])} ranks"
            )
        _set_group(node)


def _set_group(node: torch.fx.Node) -> None:
    """The node's group: the world of the current job (check() found one)."""
    import torch.distributed as dist

    assert dist.group.WORLD is not None
    if "group_name" in node.kwargs:
        node.update_kwarg("group_name", dist.group.WORLD.group_name)
    else:
        node.update_arg(_names(node).index("group_name"), dist.group.WORLD.group_name)


def expand(path: os.PathLike[str] | str) -> os.PathLike[str] | str:
    """`path` with `{rank}` replaced by this process's rank; as it is when it has none."""
    text = os.fspath(path)
    if RANK not in text:
        return path
    try:
        rank, _ = _world()
    except LookupError as e:
        raise ArtifactError(f"{text} holds {RANK}, and {e}: initialize it first") from None
    return text.replace(RANK, str(rank))
