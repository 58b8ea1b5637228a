"""One rank of a tensor-parallel lowering with collectives inside the engine (collectives="engine"),
on the TensorRT double at 11.0 with gloo standing in for NCCL: started by
tests/test_collectives_in_engine.py through distributed_workers.launch (`python
collectives_worker.py MODE DIR`, torchrun's environment). Prints `ok ...` on success; a failure
is a traceback and a non-zero status.

engine: a colwise-then-rowwise MLP (its all_reduce) and a sequence-parallel block (reduce_scatter,
  all_gather) lower to ONE engine each, the collectives inside it and run by it, matching eager;
  the rank's file round-trips and is bound to its rank; new weights refit an engine with its
  collective inside; a communicator TensorRT refuses is an error naming the engine.
nccl: without the test's communicator seam, gloo is refused by name (TensorRT's collectives run
  on NCCL); an all_reduce over a part of the world stays eager, saying why.
"""

from __future__ import annotations

import copy
import datetime
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel, parallelize_module
from trt_double import collectives as double_collectives
from trt_double.activate import trt_double


def sharded(model: torch.nn.Module, plan: dict[str, ParallelStyle]) -> Any:
    return parallelize_module(copy.deepcopy(model), init_device_mesh("cpu", (dist.get_world_size(),)), plan)


def lower_in_engine(model: torch.nn.Module, x: torch.Tensor, **options: Any) -> Any:
    import trt_lower

    return trt_lower.lower_to_trt(
        model, (x,), backend="tensorrt", trt_version="11.0", collectives="engine", min_block_size=1, **options
    )


def check(lowered: Any, model: torch.nn.Module, x: torch.Tensor, ops: dict[str, int], double: Any) -> None:
    """One engine, the collectives `ops` inside it (none eager), run by it; eager's result."""
    report = lowered.report
    assert len(report.engines) == 1 and not report.fallbacks, report
    assert report.engines[0].collectives == ops, report
    before = double.state.collective_executions
    with torch.no_grad():
        torch.testing.assert_close(lowered(x), model(x))
    assert double.state.collective_executions == before + 1, "the engine did not run its collectives"


def engine(folder: Path) -> None:
    from trt_lower.runtime import communicator

    communicator.comm_pointer = double_collectives.register  # gloo stands in for NCCL
    torch.manual_seed(0)  # every rank builds the same model
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16)).eval()
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(1))
    with trt_double("11.0.0", folder / f"engines{dist.get_rank()}") as double:
        lowered = lower_in_engine(sharded(mlp, {"0": ColwiseParallel(), "2": RowwiseParallel()}), x)
        check(lowered, mlp, x, {"all_reduce": 1}, double)
        assert "collectives inside: all_reduce×1" in str(lowered.report), lowered.report
        round_trip(lowered, mlp, x, folder)
        block = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Linear(32, 16), torch.nn.Linear(16, 8)).eval()
        plan: dict[str, ParallelStyle] = {
            "0": ColwiseParallel(),
            "1": RowwiseParallel(output_layouts=Shard(0)),
            "2": ColwiseParallel(input_layouts=Shard(0), output_layouts=Replicate()),
        }
        lowered = lower_in_engine(sharded(block, plan), x)
        check(lowered, block, x, {"reduce_scatter": 1, "all_gather": 2}, double)
        refit()
        refused_communicator(mlp, x)  # breaks the seam: last
    print(f"ok rank {dist.get_rank()}: {lowered.report.engines[0].collectives}", flush=True)


def round_trip(lowered: Any, mlp: torch.nn.Module, x: torch.Tensor, folder: Path) -> None:
    """The rank's file records its rank (its graph has no collective left) and the setting; loaded
    back, its engine gets the communicator again; the other rank's file is refused by name."""
    import trt_lower

    rank = dist.get_rank()
    trt_lower.save(lowered, folder / "mlp.rank{rank}.trtl")
    dist.barrier()  # both files written
    loaded = trt_lower.load(folder / "mlp.rank{rank}.trtl")
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), mlp(x))
    try:
        trt_lower.load(folder / f"mlp.rank{1 - rank}.trtl")
    except trt_lower.RankMismatchError as e:
        assert f"field 'distributed.rank' is {1 - rank}, but this process's rank is {rank}" in str(e), e
    else:
        raise AssertionError(f"rank {rank} loaded rank {1 - rank}'s file")


def refit() -> None:
    """New weights refitted into an engine with its collective inside (a forward calling the
    functional all_reduce itself): the refitted engine's contexts get the communicator too."""
    from distributed_workers import RowParallel

    torch.manual_seed(dist.get_rank())  # each rank its own shard
    model, tuned, x = RowParallel().eval(), RowParallel().eval(), torch.randn(2, 8)
    lowered = lower_in_engine(model, x, refittable=True)
    assert lowered.report.engines[0].collectives == {"all_reduce": 1}, lowered.report
    lowered.update_weights(tuned)
    with torch.no_grad():
        torch.testing.assert_close(lowered(x), tuned(x))


def refused_communicator(mlp: torch.nn.Module, x: torch.Tensor) -> None:
    """A communicator TensorRT refuses (set_communicator returns False) is an error naming the engine."""
    import trt_lower
    from trt_lower.runtime import communicator

    communicator.comm_pointer = lambda group: 0xDEAD00  # no communicator lives there
    try:
        lower_in_engine(sharded(mlp, {"0": ColwiseParallel(), "2": RowwiseParallel()}), x)
    except trt_lower.InEngineCollectivesError as e:
        assert "collectives='engine' engine_0: TensorRT refused the communicator" in str(e), e
    else:
        raise AssertionError("an engine ran with a communicator TensorRT refused")


def nccl(folder: Path) -> None:
    import trt_lower

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16)).eval()
    with trt_double("11.0.0", folder / f"engines{dist.get_rank()}"):
        try:
            lower_in_engine(sharded(mlp, {"0": ColwiseParallel(), "2": RowwiseParallel()}), torch.randn(4, 16))
        except trt_lower.InEngineCollectivesError as e:
            assert "collectives='engine' runs TensorRT's collectives on NCCL" in str(e), e
            assert "backend is 'gloo'" in str(e), e
        else:
            raise AssertionError("collectives='engine' ran over gloo without the test's seam")
        part()
    print(f"ok rank {dist.get_rank()} refused", flush=True)


def part() -> None:
    """An all_reduce over a part of the world (one rank's group) stays eager, saying why: an
    engine's context takes the world's communicator only."""
    from distributed_workers import RowParallel

    own = [dist.new_group([r]) for r in range(dist.get_world_size())][dist.get_rank()]
    lowered = lower_in_engine(RowParallel(own).eval(), torch.randn(2, 8))
    (fallback,) = [f for f in lowered.report.fallbacks if f.op == "_c10d_functional.all_reduce.default"]
    assert f"has ranks [{dist.get_rank()}], not the whole world of 2" in fallback.reason, lowered.report
    assert not any(e.collectives for e in lowered.report.engines), lowered.report


if __name__ == "__main__":
    mode, folder = sys.argv[1], Path(sys.argv[2])
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    {"engine": engine, "nccl": nccl}[mode](folder)
    dist.destroy_process_group()
