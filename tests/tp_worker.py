"""One rank of a tensor-parallel lowering, launched by torch.distributed.run (tests/test_tp_lowering.py):
a tiny Llama with grouped-query attention, sharded with PyTorch's colwise/rowwise plan over a gloo
mesh, lowered on this rank; the logits must match the unsharded eager model's. Exits nonzero (an
AssertionError) on a mismatch; prints the rank's engine weight bytes and the model's.

`generate`: lower_causal_lm on the sharded model instead, whose greedy tokens must be the unsharded
eager model's."""

from __future__ import annotations

import copy
import os
import sys
from typing import Any

import torch
import torch.distributed as dist
import transformers
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel, parallelize_module

import trt_lower
from splitter.support import COLLECTIVE_REASON
from trt_lower import CaptureError, lower_to_trt
from trt_lower.llm import lower_causal_lm


def say(line: str) -> None:
    """One line in one write: the ranks share the launcher's pipe, where print's pieces interleave."""
    os.write(1, f"{line}\n".encode())


def tiny_llama(ranks: int) -> Any:
    """Hidden 64, 2 layers, a key/value head per rank and two query heads per key/value head (GQA)."""
    torch.manual_seed(0)  # every rank builds the same model
    config = transformers.LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2 * ranks,
        num_key_value_heads=ranks,
    )
    return transformers.LlamaForCausalLM(config).eval()  # type: ignore[no-untyped-call]


def tp_plan(layers: int) -> dict[str, ParallelStyle]:
    """Projections into heads and the MLP's width colwise, out of them rowwise; the embedding and
    the LM head split along the hidden size and the vocabulary, gathered whole."""
    plan: dict[str, ParallelStyle] = {
        "model.embed_tokens": ColwiseParallel(output_layouts=Replicate()),
        "lm_head": ColwiseParallel(output_layouts=Replicate()),
    }
    for i in range(layers):
        for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj"):
            plan[f"model.layers.{i}.{name}"] = ColwiseParallel()
        for name in ("self_attn.o_proj", "mlp.down_proj"):
            plan[f"model.layers.{i}.{name}"] = RowwiseParallel()
    return plan


class Logits(torch.nn.Module):
    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(ids, use_cache=False).logits  # type: ignore[no-any-return]


def sharded(model: Any, plan: dict[str, ParallelStyle]) -> Any:
    return parallelize_module(copy.deepcopy(model), init_device_mesh("cpu", (dist.get_world_size(),)), plan)


def generate(model: Any, ids: torch.Tensor) -> None:
    """Greedy tokens as eager's (on more than 2 ranks the 8-token prompt runs in chunks: the
    capture narrows the step's query length). The LM head stays replicated: the step slices the
    last position into it, which torch.export cannot take into a sharded layer (CaptureError says so)."""
    with torch.no_grad():
        expected = model.generate(ids, max_new_tokens=6, do_sample=False)
    plan = tp_plan(model.config.num_hidden_layers)
    try:
        lower_causal_lm(sharded(model, plan), max_batch=1, max_length=16)
        raise AssertionError("a sharded LM head was expected to be refused")
    except CaptureError as e:
        assert "keep that layer replicated" in str(e), e
    del plan["lm_head"]
    lowered = lower_causal_lm(sharded(model, plan), max_batch=1, max_length=16)
    tokens = lowered.generate(ids, max_new_tokens=6, do_sample=False)
    assert torch.equal(tokens, expected), (tokens, expected)
    say(f"rank {dist.get_rank()}: TOKENS {tokens.tolist()} CHUNK {lowered.prefill_chunk}")


def reduce_scatter(ranks: int) -> None:
    """A rowwise layer whose sum is scattered by rows (reduce_scatter_tensor), gathered back into a
    colwise one (all_gather_into_tensor): the collectives of sequence parallelism."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16), torch.nn.Linear(16, 8)
    )
    x = torch.randn(2 * ranks, 16, generator=torch.Generator().manual_seed(2))
    plan: dict[str, ParallelStyle] = {
        "0": ColwiseParallel(),
        "2": RowwiseParallel(output_layouts=Shard(0)),
        "3": ColwiseParallel(input_layouts=Shard(0), output_layouts=Replicate()),
    }
    lowered = lower_to_trt(sharded(model, plan), (x,), min_block_size=1)
    torch.testing.assert_close(lowered(x), model(x))
    ops = {f.op.split(".")[1] for f in lowered.report.fallbacks}
    assert {"reduce_scatter_tensor", "all_gather_into_tensor"} <= ops, lowered.report


def round_trip(lowered: torch.nn.Module, ids: torch.Tensor, expected: torch.Tensor) -> None:
    """The rank's file, saved and loaded back on this rank: the collectives DTensor's plan made
    (over the mesh's group) are bound to the loading job and give the same logits."""
    path = os.path.join(os.environ["TP_WORKER_DIR"], "logits.rank{rank}.trtl")
    trt_lower.save(lowered, path)
    torch.testing.assert_close(trt_lower.load(path)(ids), expected)


def main() -> None:
    dist.init_process_group("gloo")
    model = tiny_llama(dist.get_world_size())
    ids = torch.randint(0, 128, (1, 8), generator=torch.Generator().manual_seed(1))
    if sys.argv[1:] == ["generate"]:
        generate(model, ids)
        dist.destroy_process_group()
        return
    with torch.no_grad():
        expected = model(ids, use_cache=False).logits
    sharded_model = sharded(model, tp_plan(model.config.num_hidden_layers))
    lowered = lower_to_trt(Logits(sharded_model), (ids,), min_block_size=1, verify=True)
    torch.testing.assert_close(lowered(ids), expected)
    report = lowered.report
    assert report.verify_errors, "verification did not run"
    collectives = [f for f in report.fallbacks if f.op.startswith("_c10d_functional.")]
    assert {f.op.split(".")[1] for f in collectives} == {"all_reduce", "all_gather_into_tensor", "wait_tensor"}
    assert all(f.reason == COLLECTIVE_REASON for f in collectives), report
    round_trip(lowered, ids, expected)
    reduce_scatter(dist.get_world_size())
    say(f"rank {dist.get_rank()}: engine weights {[e.weight_bytes for e in report.engines]}")
    say(f"WEIGHTS {sum(e.weight_bytes for e in report.engines)} {sum(p.nbytes for p in model.parameters())}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
