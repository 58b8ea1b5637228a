"""Per-rank artifacts: a module whose graph calls torch.distributed's collectives, or whose engines
run them inside (collectives="engine"), is saved on one rank of a job, and loads only on that rank
of a job of the same size (docs/distributed.md).

The manifest's `distributed` field records the rank, the world size, the backend and each
process group the collectives run over (its name in the graph and its ranks: the whole world, or
a part of it such as one dimension of a 2-D device mesh). On load the rank and world size must be
the current process's; the backend is a record only (a file saved on CPUs with gloo runs on GPUs
with NCCL). The group a collective names in the file is never looked up by that name (names are
counters, which differ from rank to rank): it must be one the field records, and the node is
bound to the loading job's group of the same ranks, the world or one the job has created (its
device mesh) before loading.
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
            groups[name] = dist.get_process_group_ranks(_resolve_process_group(name))
        except (LookupError, RuntimeError) as e:  # no process group, or not this one any more
            raise ArtifactError(
                f"cannot save this module: node '{node.name}' ({node.target}) runs over process group "
                f"'{name}' ({e}); save it on its rank, while the group it was lowered in exists"
            ) from None
    return {
        "rank": rank,
        "world_size": world,
        "backend": str(dist.get_backend()),
        "groups": [{"name": name, "ranks": ranks} for name, ranks in groups.items()],
    }


def check(manifest: dict[str, Any], path: os.PathLike[str] | str) -> dict[str, Any]:
    """The loading job's process group for each group the file's `distributed` field records, by
    the name its collectives give ({} for a file without one), after checking its rank and world
    size against this process's: RankMismatchError otherwise, or where the job has no group of a
    recorded group's ranks."""
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
        if rank not in ranks or len(set(ranks)) != len(ranks) or not all(0 <= r < world for r in ranks):
            raise FieldError(
                f"field '{at}.ranks' must be distinct ranks of 0..{world - 1}, rank {rank} among them, "
                f"got {str(ranks)[:80]}"
            )
        found = _job_group(ranks)
        if found is None:
            raise RankMismatchError(
                f"{path}: field '{at}' records a process group of ranks {str(ranks)[:80]}, and this job has none: "
                "create it (the device mesh the model was sharded on, or dist.new_group) before trt_lower.load"
            )
        groups[field(group, "name", str, at)] = found
    return groups


def _job_group(ranks: list[int]) -> Any:
    """The process group of exactly `ranks` (in group rank order) this job has created, or None: the
    world, else the first one created. Every rank creates its groups in the same order, so every
    rank of the group picks the same one."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d

    if ranks == list(range(dist.get_world_size())):
        return dist.group.WORLD
    for group in distributed_c10d._world.pg_group_ranks:
        # A group this rank is no member of is held as a sentinel, not a ProcessGroup.
        if isinstance(group, dist.ProcessGroup) and dist.get_process_group_ranks(group) == ranks:
            return group
    return None


def bind(graph: torch.fx.Graph, groups: dict[str, Any]) -> None:
    """Each collective of a loaded graph bound to the loading job's group: the group it names must
    be one of `groups` (check's, by the file's names), and the size it allocates for that group's."""
    import torch.distributed as dist

    for node in _collectives(graph):
        name = _group(node)
        if name is None:
            continue
        if name not in groups:
            raise FieldError(
                f"field 'graph': node '{node.name}' ({node.target}) runs over process group {str(name)[:80]!r}, "
                f"which field '{DISTRIBUTED}' does not record"
            )
        group = groups[name]
        members = dist.get_world_size(group)
        size = _arguments(node).get("group_size", members)
        if size != members:
            raise FieldError(
                f"field 'graph': node '{node.name}' ({node.target}) gives group_size {size}; its group has "
                f"{members} ranks"
            )
        if "group_name" in node.kwargs:
            node.update_kwarg("group_name", group.group_name)
        else:
            node.update_arg(_names(node).index("group_name"), group.group_name)


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
