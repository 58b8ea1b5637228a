"""One rank of update_weights on a tensor-parallel model (tests/test_tp_refit.py, through
distributed_workers.launch on 2 gloo ranks): the engines of a sharded model take the rank's
shards of perturbed weights and give the perturbed unsharded model's outputs.

eager: a tiny Llama (tp_worker's model and plan), its collectives eager between engines; the
  refitted rank's file saved and loaded back gives the new logits too.
engine: a colwise-then-rowwise MLP with its all_reduce inside the engine (collectives="engine",
  the TensorRT double at 11.0, gloo standing in for NCCL)."""

from __future__ import annotations

import copy
import datetime
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel
from tp_worker import Logits, sharded, tiny_llama, tp_plan

import trt_lower


def perturbed(model: torch.nn.Module) -> torch.nn.Module:
    """`model` with every parameter moved by up to ~10%, the same on every rank."""
    new = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in new.parameters():
            p.mul_(1 + 0.1 * torch.randn(p.shape, generator=generator))
    return new


def eager(folder: Path) -> None:
    model = tiny_llama(dist.get_world_size())
    ids = torch.randint(0, 128, (1, 8), generator=torch.Generator().manual_seed(1))
    plan = tp_plan(model.config.num_hidden_layers)
    lowered = trt_lower.lower_to_trt(Logits(sharded(model, plan)), (ids,), min_block_size=1)
    tuned = perturbed(model)
    with torch.no_grad():
        expected = tuned(ids, use_cache=False).logits
    lowered.update_weights(Logits(sharded(tuned, plan)))
    torch.testing.assert_close(lowered(ids), expected)
    path = folder / f"refitted.rank{dist.get_rank()}.trtl"
    trt_lower.save(lowered, path)
    torch.testing.assert_close(trt_lower.load(path)(ids), expected)
    print(f"ok rank {dist.get_rank()}", flush=True)


def engine(folder: Path) -> None:
    from trt_double import collectives as double_collectives
    from trt_double.activate import trt_double

    from trt_lower.runtime import communicator

    communicator.comm_pointer = double_collectives.register  # gloo stands in for NCCL
    torch.manual_seed(0)  # every rank builds the same model
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16)).eval()
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(1))
    plan = {"0": ColwiseParallel(), "2": RowwiseParallel()}
    with trt_double("11.0.0", folder / f"engines{dist.get_rank()}"):
        lowered = trt_lower.lower_to_trt(
            sharded(mlp, plan), (x,), backend="tensorrt", trt_version="11.0", collectives="engine",
            min_block_size=1, refittable=True,
        )  # fmt: skip
        assert lowered.report.engines[0].collectives == {"all_reduce": 1}, lowered.report
        tuned = perturbed(mlp)
        lowered.update_weights(sharded(tuned, plan))
        with torch.no_grad():
            torch.testing.assert_close(lowered(x), tuned(x))
    print(f"ok rank {dist.get_rank()}", flush=True)


if __name__ == "__main__":
    mode, folder = sys.argv[1], Path(sys.argv[2])
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    {"eager": eager, "engine": engine}[mode](folder)
    dist.destroy_process_group()
