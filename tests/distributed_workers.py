"""One rank of a small tensor-parallel job on gloo, for tests/test_distributed_*.py: started by
`python distributed_workers.py MODE DIR` with torchrun's environment (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT), by torchrun itself or by `launch` below. Each mode prints `ok ...`
on success; a failure is a traceback and a non-zero status.

The model is a row-parallel block: each rank's Linear holds its own weights (seeded by rank), and
an all_reduce sums the ranks' activations between two engines, as a tensor-parallel layer does.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import torch

TESTS = Path(__file__).resolve().parent
FILE = "model.rank{rank}.trtl"


class RowParallel(torch.nn.Module):
    def __init__(self, group: Any = None) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 4)
        self.group = group  # the process group of the all_reduce (None: the world)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import torch.distributed as dist
        import torch.distributed._functional_collectives as fc

        group = self.group or dist.group.WORLD
        assert group is not None  # the worker joined its job
        y = fc.all_reduce(torch.relu(self.a(x)), "sum", group)
        return torch.relu(self.b(y))


def _join(timeout_s: float = 60) -> int:
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout_s))
    return dist.get_rank()


def _lowered(rank: int) -> tuple[torch.nn.Module, torch.nn.Module, torch.Tensor]:
    import trt_lower

    torch.manual_seed(rank)  # each rank its own shard
    model, x = RowParallel().eval(), torch.randn(2, 8)
    return model, trt_lower.lower_to_trt(model, (x,), min_block_size=1, backend="onnxruntime"), x


def save(folder: Path) -> None:
    """Lower on this rank, save `model.rank{rank}.trtl` and the rank's input and eager output;
    once the job is over, the module no longer saves (it records the rank it is of)."""
    import torch.distributed as dist

    import trt_lower

    rank = _join()
    model, lowered, x = _lowered(rank)
    with torch.no_grad():
        torch.testing.assert_close(lowered(x), model(x))
        torch.save({"x": x, "y": model(x)}, folder / f"io.rank{rank}.pt")
    trt_lower.save(lowered, folder / FILE)
    dist.destroy_process_group()
    try:
        trt_lower.save(lowered, folder / "late.trtl")
    except trt_lower.ArtifactError as e:
        assert "node 'all_reduce' (_c10d_functional.all_reduce.default) runs over process group '0'" in str(e), e
    else:
        raise AssertionError("saved a rank's module outside its job")
    print(f"ok saved rank {rank}")


def load(folder: Path) -> None:
    """In a fresh process: the rank's own file matches eager; the next rank's is refused by name."""
    import torch.distributed as dist

    import trt_lower

    rank = _join()
    lowered = trt_lower.load(folder / FILE, backend="onnxruntime")
    io = torch.load(folder / f"io.rank{rank}.pt")
    torch.testing.assert_close(lowered(io["x"]), io["y"])
    other = (rank + 1) % dist.get_world_size()
    try:
        trt_lower.load(folder / f"model.rank{other}.trtl", backend="onnxruntime")
    except trt_lower.RankMismatchError as e:
        assert f"field 'distributed.rank' is {other}, but this process's rank is {rank}" in str(e), e
    else:
        raise AssertionError(f"rank {rank} loaded rank {other}'s file")
    print(f"ok loaded rank {rank}")


def alone(folder: Path) -> None:
    """A job of one process refuses a file saved in a job of two."""
    import trt_lower

    _join()
    try:
        trt_lower.load(folder / "model.rank0.trtl", backend="onnxruntime")
    except trt_lower.RankMismatchError as e:
        assert "field 'distributed.world_size' is 2, but this process's world_size is 1" in str(e), e
    else:
        raise AssertionError("a world of one loaded a file of a world of two")
    print("ok refused")


def _tensor_parallel_pair() -> Any:
    """This rank's tensor-parallel group of a 2x2 device mesh (data parallel by tensor parallel):
    ranks [0, 1] or [2, 3], a part of the world."""
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))["tp"].get_group()


def mesh_save(folder: Path) -> None:
    """On 4 ranks, each pair's all_reduce runs over that pair only: saved with the pair's ranks."""
    import trt_lower

    rank = _join()
    torch.manual_seed(rank)
    model, x = RowParallel(_tensor_parallel_pair()).eval(), torch.randn(2, 8)
    lowered = trt_lower.lower_to_trt(model, (x,), min_block_size=1, backend="onnxruntime")
    with torch.no_grad():
        y = model(x)
    torch.testing.assert_close(lowered(x), y)
    torch.save({"x": x, "y": y}, folder / f"io.rank{rank}.pt")
    trt_lower.save(lowered, folder / FILE)
    print(f"ok saved rank {rank}")


def mesh_load(folder: Path) -> None:
    """In a fresh job: refused, naming the pair, until the job has made its mesh; then each rank's
    all_reduce runs over its own pair again (over the world, the sum would take all 4 ranks)."""
    import trt_lower

    rank = _join()
    pair = [rank - rank % 2, rank - rank % 2 + 1]
    try:
        trt_lower.load(folder / FILE, backend="onnxruntime")
    except trt_lower.RankMismatchError as e:
        assert f"records a process group of ranks {pair}, and this job has none" in str(e), e
    else:
        raise AssertionError("loaded a file whose group the job has not created")
    _tensor_parallel_pair()
    lowered = trt_lower.load(folder / FILE, backend="onnxruntime")
    io = torch.load(folder / f"io.rank{rank}.pt")
    torch.testing.assert_close(lowered(io["x"]), io["y"])
    print(f"ok loaded rank {rank}")


def die(folder: Path, stall: bool) -> None:
    """Rank 1 leaves before the forward's collective (exits, or stalls past the timeout); rank 0
    ends with CollectiveError naming the node."""
    import trt_lower

    rank = _join(timeout_s=float(os.environ["TIMEOUT_S"]))
    _, lowered, x = _lowered(rank)
    if rank == 1:
        if stall:
            time.sleep(600)  # until the test ends it
        os._exit(3)
    start = time.monotonic()
    try:
        lowered(x)
    except trt_lower.CollectiveError as e:
        print(f"ok {time.monotonic() - start:.1f} s: {e}", flush=True)
        os._exit(0)  # the process group's teardown would wait for the missing rank
    raise AssertionError("the collective ran without rank 1")


@contextlib.contextmanager
def fake_ranks(world_size: int) -> Iterator[None]:
    """Inside: this process is rank 0 of `world_size` in PyTorch's fake process group, whose
    collectives complete at once without peers (an all_reduce leaves its input, an all_gather
    repeats it), so a sharded model captures and runs as on `world_size` ranks, in one process."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world_size)
    try:
        yield
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def environment(rank: int, world: int, port: int, **extra: str) -> dict[str, str]:
    path = os.pathsep.join([str(TESTS), str(TESTS.parent), os.environ.get("PYTHONPATH", "")])
    return {
        **os.environ,
        "PYTHONPATH": path,
        "OMP_NUM_THREADS": "1",
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(world),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        **extra,
    }


def launch(
    mode: str,
    folder: Path,
    world: int,
    timeout_s: float = 120,
    ranks: int = 0,
    script: str = "distributed_workers.py",
    **extra: str,
) -> list[str]:
    """Run `script` (in tests/) `mode` on `world` ranks, each a process of its own; the output of
    the first `ranks` of them (0: all), in rank order. Every process is ended by the time this returns."""
    port = free_port()
    processes = [
        subprocess.Popen(
            [sys.executable, str(TESTS / script), mode, str(folder)],
            env=environment(rank, world, port, **extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(world)
    ]
    try:
        return [p.communicate(timeout=timeout_s)[0] for p in processes[: ranks or world]]
    finally:
        for p in processes:
            p.kill()
            p.wait()


if __name__ == "__main__":
    mode, folder = sys.argv[1], Path(sys.argv[2])
    if mode in ("die", "stall"):
        die(folder, stall=mode == "stall")
    else:
        {"save": save, "load": load, "alone": alone, "mesh_save": mesh_save, "mesh_load": mesh_load}[mode](folder)
