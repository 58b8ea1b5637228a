"""update_weights on a tensor-parallel model: the new weights of a rank are its shards (each
DTensor's to_local()), mapped to the engines' weights as lowering mapped them; a model sharded
with another plan is refused by name."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
import torch
from distributed_workers import fake_ranks, launch
from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel

import trt_lower

pytest.importorskip("transformers")
from tp_refit_worker import perturbed  # noqa: E402
from tp_worker import sharded  # noqa: E402

PLAN: dict[str, ParallelStyle] = {"0": ColwiseParallel(), "2": RowwiseParallel()}


def _ok(outputs: list[str]) -> None:
    for rank, out in enumerate(outputs):
        assert f"ok rank {rank}" in out, out[-4000:]


def test_sharded_llama_takes_new_weights_on_every_rank(tmp_path: Path) -> None:
    """2 gloo ranks, collectives eager: the perturbed unsharded model's logits after the update,
    and from the refitted rank's file loaded back."""
    _ok(launch("eager", tmp_path, 2, timeout_s=300, script="tp_refit_worker.py"))


def test_engine_with_its_collective_inside_takes_new_shards(tmp_path: Path) -> None:
    """collectives="engine" on the TensorRT double: the all_reduce stays inside the refitted engine."""
    _ok(launch("engine", tmp_path, 2, timeout_s=300, script="tp_refit_worker.py"))


@pytest.fixture
def two_fake_ranks() -> Iterator[None]:
    """This process as rank 0 of 2 in PyTorch's fake process group: enough to lower and refit."""
    with fake_ranks(2):
        yield


def _lowered(model: torch.nn.Module) -> trt_lower.LoweredModule:
    return trt_lower.lower_to_trt(sharded(model, PLAN), (torch.randn(2, 8),), min_block_size=1)


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)  # square layers: another plan's shards have the same shapes
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8)).eval()


def test_a_state_dict_of_shards_is_taken(two_fake_ranks: None) -> None:
    model = _mlp()
    lowered, tuned = _lowered(model), sharded(perturbed(model), PLAN)
    lowered.update_weights(tuned.state_dict())
    x = torch.randn(2, 8)
    with torch.no_grad():
        torch.testing.assert_close(lowered(x), tuned(x))  # the fake group's all_reduce leaves its input


def test_another_plan_is_refused_by_name(two_fake_ranks: None) -> None:
    """Rows for columns: the same shard shapes, other slices of the weight."""
    model = _mlp()
    lowered = _lowered(model)
    swapped = sharded(perturbed(model), {"0": RowwiseParallel(), "2": ColwiseParallel()})
    with pytest.raises(
        trt_lower.WeightUpdateError,
        match=r"weight '0.weight' is sharded with placements \(Shard\(dim=1\),\) on a mesh of shape \(2,\); "
        r"in the lowered model it is sharded with placements \(Shard\(dim=0\),\)",
    ):
        lowered.update_weights(swapped)


def test_an_unsharded_model_is_refused_by_name(two_fake_ranks: None) -> None:
    model = _mlp()
    with pytest.raises(trt_lower.WeightUpdateError, match="weight '0.weight' is not sharded; in the lowered model"):
        _lowered(model).update_weights(perturbed(model))


def test_a_weight_stripped_rank_file_loads_with_a_state_dict_of_shards(two_fake_ranks: None, tmp_path: Path) -> None:
    """save(weights="separate") of a rank's module, loaded with the sharded model's own state dict
    (DTensors by the model's names): the same outputs; a perturbed model's shards give its outputs."""
    model = _mlp()
    lowered, path, x = _lowered(model), tmp_path / "mlp.rank0.trtl", torch.randn(2, 8)
    trt_lower.save(lowered, path, weights="separate")
    loaded = trt_lower.load(path, weights=sharded(model, PLAN).state_dict())
    torch.testing.assert_close(loaded(x), lowered(x))
    tuned = sharded(perturbed(model), PLAN)
    with torch.no_grad():
        torch.testing.assert_close(trt_lower.load(path, weights=tuned.state_dict())(x), tuned(x))


def test_a_weight_stripped_rank_file_refuses_another_plans_state_dict(two_fake_ranks: None, tmp_path: Path) -> None:
    """Rows for columns: the shards' shapes fit the file, their slices do not. The file records each
    DTensor's layout; without it these weights loaded and computed another model."""
    model = _mlp()
    path = tmp_path / "mlp.rank0.trtl"
    trt_lower.save(_lowered(model), path, weights="separate")
    swapped = sharded(model, {"0": RowwiseParallel(), "2": ColwiseParallel()})
    with pytest.raises(
        trt_lower.ArtifactError,
        match=r"weight '0.weight' is sharded with placements \(Shard\(dim=1\),\) on a mesh of shape \(2,\); "
        r"in the lowered model it is sharded with placements \(Shard\(dim=0\),\)",
    ):
        trt_lower.load(path, weights=swapped.state_dict())
    with pytest.raises(trt_lower.ArtifactError, match="weight '0.weight' is not sharded; in the lowered model"):
        trt_lower.load(path, weights=model.state_dict())
