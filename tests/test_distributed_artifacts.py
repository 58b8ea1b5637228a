"""Per-rank artifacts (deploy/ranks.py): each rank of a gloo job on 127.0.0.1 saves its own file,
which loads in fresh processes on the same rank of a job of the same size only; its collectives
run over the loading job's group, never one the file names; `trt-lower run` under torchrun."""

from __future__ import annotations

import datetime
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
import torch
from artifact_tamper import tamper
from distributed_workers import FILE, RowParallel, environment, free_port, launch

import trt_lower


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """model.rank0.trtl and model.rank1.trtl, saved by the two ranks of a job."""
    folder = tmp_path_factory.mktemp("ranks")
    outputs = launch("save", folder, 2)
    assert all(out.startswith("ok saved") for out in outputs), outputs
    return folder


def test_per_rank_files_round_trip_in_fresh_processes_and_refuse_another_rank(saved: Path) -> None:
    outputs = launch("load", saved, 2)
    assert outputs == ["ok loaded rank 0\n", "ok loaded rank 1\n"], outputs


def test_four_ranks_round_trip(tmp_path: Path) -> None:
    saved = launch("save", tmp_path, 4)
    assert all(out.startswith("ok saved") for out in saved), saved
    assert launch("load", tmp_path, 4) == [f"ok loaded rank {rank}\n" for rank in range(4)]


def test_a_collective_over_one_dimension_of_a_2d_mesh_round_trips(tmp_path: Path) -> None:
    """Tensor parallel inside data parallel: each file binds to the loading job's group of its ranks."""
    saved = launch("mesh_save", tmp_path, 4)
    assert all(out.startswith("ok saved") for out in saved), saved
    loaded = launch("mesh_load", tmp_path, 4)
    assert loaded == [f"ok loaded rank {rank}\n" for rank in range(4)], loaded


def test_a_job_of_another_size_is_refused(saved: Path) -> None:
    (output,) = launch("alone", saved, 1)
    assert output == "ok refused\n", output


def test_a_process_without_a_process_group_is_refused(saved: Path) -> None:
    with pytest.raises(trt_lower.RankMismatchError, match=r"rank0.trtl: was saved on rank 0 of 2 .*init_process_group"):
        trt_lower.load(saved / "model.rank0.trtl", backend="onnxruntime")


def test_a_rank_placeholder_needs_a_process_group(saved: Path) -> None:
    with pytest.raises(trt_lower.ArtifactError, match=r"holds \{rank\}, and no torch.distributed process group"):
        trt_lower.load(saved / FILE, backend="onnxruntime")


def test_trt_lower_run_under_torchrun_loads_each_ranks_file(saved: Path) -> None:
    env = environment(0, 1, 0)
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key)  # torchrun sets them
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1"]
    command += ["--master-port", str(free_port()), "-m", "trt_lower", "run", str(saved / FILE), "--iterations", "3"]
    command += ["--backend", "onnxruntime", "--collective-timeout", "60"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    for rank in (0, 1):
        assert f"loaded {saved / f'model.rank{rank}.trtl'}" in done.stdout, done.stdout


# -- one process's job: a file's collectives and groups ----------------------------------------
@pytest.fixture(scope="module")
def world_of_one(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, torch.Tensor, torch.Tensor]]:
    """A gloo job of this process alone, and a file saved in it, its input and eager output."""
    import torch.distributed as dist
    from torch._C._distributed_c10d import HashStore

    dist.init_process_group("gloo", store=HashStore(), rank=0, world_size=1, timeout=datetime.timedelta(seconds=60))
    try:
        torch.manual_seed(0)
        model, x = RowParallel().eval(), torch.randn(2, 8)
        path = tmp_path_factory.mktemp("one") / "model.trtl"
        trt_lower.save(trt_lower.lower_to_trt(model, (x,), min_block_size=1, backend="onnxruntime"), path)
        with torch.no_grad():
            yield path, x, model(x)
    finally:
        dist.destroy_process_group()


def _collective(manifest: dict[str, Any]) -> dict[str, Any]:
    return next(n for n in manifest["graph"]["nodes"] if n["target"] == "_c10d_functional.all_reduce.default")


def test_the_file_runs_over_the_loading_jobs_group(world_of_one: tuple[Path, torch.Tensor, torch.Tensor]) -> None:
    path, x, y = world_of_one
    loaded = trt_lower.load(path, backend="onnxruntime")
    torch.testing.assert_close(loaded(x), y)
    assert [n.args[2] for n in loaded.graph.nodes if "all_reduce" in str(n.target)] == ["0"]


def _group(name: str) -> Any:
    def change(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
        _collective(manifest)["args"][2] = name
        manifest["distributed"]["groups"][0]["name"] = name

    return change


def _other_group(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
    _collective(manifest)["args"][2] = "1"


def _other_collective(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
    _collective(manifest).update(target="_c10d_functional.broadcast.default", args=[{"node": "engine_0"}, 0, "0"])


def _gathered(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
    collective = _collective(manifest)
    collective.update(
        target="_c10d_functional.all_gather_into_tensor.default", args=[*collective["args"][:1], 2**40, "0"]
    )


def _reduction(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
    _collective(manifest)["args"][1] = "steal"


def _no_record(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
    del manifest["distributed"]


def _without_its_rank(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
    manifest["distributed"]["groups"][0]["ranks"] = []


# A forged file names another group, a collective that is not one of the allowed, a size to
# allocate for, a reduction, or leaves its record out: each is refused naming the node or field.
ATTACKS = {
    "a group it does not record": (_other_group, r"node 'all_reduce' .* process group '1', which field 'distributed'"),
    "a recorded group of another name": (_group("7"), None),
    "another collective": (_other_collective, r"node 'all_reduce' calls _c10d_functional.broadcast.default, which"),
    "a group size": (_gathered, r"node 'all_reduce' .* gives group_size 1099511627776; its group has 1 ranks"),
    "a reduction": (_reduction, r"node 'all_reduce' .* 'reduce_op' must be one of"),
    "no record": (_no_record, r"node 'all_reduce' .* process group '0', which field 'distributed' does not record"),
    "a group without its rank": (
        _without_its_rank,
        r"field 'distributed.groups\[0\].ranks' must be distinct ranks of 0..0, rank 0 among them, got \[\]",
    ),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_forged_files_collectives_are_refused_or_bound_to_the_job(
    world_of_one: tuple[Path, torch.Tensor, torch.Tensor], tmp_path: Path, attack: str
) -> None:
    path, x, y = world_of_one
    change, refusal = ATTACKS[attack]
    forged = tamper(path, tmp_path / "evil.trtl", change)
    if refusal is None:  # the group's name is the file's to choose; the group run over is the job's
        loaded = trt_lower.load(forged, backend="onnxruntime")
        torch.testing.assert_close(loaded(x), y)
        assert [n.args[2] for n in loaded.graph.nodes if "all_reduce" in str(n.target)] == ["0"]
        return
    with pytest.raises(trt_lower.ArtifactError, match=refusal):
        trt_lower.load(forged, backend="onnxruntime")


def test_the_file_records_rank_world_size_backend_and_group(
    world_of_one: tuple[Path, torch.Tensor, torch.Tensor],
) -> None:
    from trt_lower.deploy.container import open_container

    manifest = open_container(world_of_one[0]).manifest
    assert manifest["distributed"] == {
        "rank": 0,
        "world_size": 1,
        "backend": "gloo",
        "groups": [{"name": "0", "ranks": [0]}],
    }


# -- Triton: a stated limit --------------------------------------------------------------------
def test_triton_export_of_one_rank_is_refused_by_name(
    world_of_one: tuple[Path, torch.Tensor, torch.Tensor], tmp_path: Path
) -> None:
    from trt_lower.triton import export_model_repository

    path = world_of_one[0]
    with pytest.raises(
        trt_lower.ArtifactError, match=r"model.trtl: .*multi-rank model through Triton is not supported"
    ):
        export_model_repository(path, tmp_path / "repo", "sharded")
    loaded = trt_lower.load(path, backend="onnxruntime")
    with pytest.raises(trt_lower.ArtifactError, match=r"node 'all_reduce' \(_c10d_functional.all_reduce.default\): "):
        export_model_repository(loaded, tmp_path / "repo", "sharded")
    assert not (tmp_path / "repo").exists()
