"""Where a tensor-parallel Llama's embedding shard runs under lower_causal_lm: its lookup is one op
between the token ids and the all_gather that makes its colwise output whole, so by default
(min_block_size=3) it stays eager and its shard is the lowered graph's, not an engine's;
min_block_size=1 puts it in an engine of its own, whose weights are the rank's 1/N of the table."""

from __future__ import annotations

from typing import Iterator

import pytest
from distributed_workers import fake_ranks

pytest.importorskip("transformers")
from tp_worker import sharded, tiny_llama, tp_plan  # noqa: E402

from trt_lower.llm import lower_causal_lm  # noqa: E402


@pytest.fixture
def two_fake_ranks() -> Iterator[None]:
    """This process as rank 0 of 2 in PyTorch's fake process group: lowering and the report only."""
    with fake_ranks(2):
        yield


@pytest.mark.parametrize("min_block_size", [3, 1])
def test_embedding_shard_is_eager_alone_or_in_an_engine_by_min_block_size(
    two_fake_ranks: None, min_block_size: int
) -> None:
    model = tiny_llama(2)
    plan = tp_plan(model.config.num_hidden_layers)
    del plan["lm_head"]  # replicated, as generation needs
    table, head = model.model.embed_tokens.weight.nbytes, model.lm_head.weight.nbytes
    norms = sum(p.nbytes for name, p in model.named_parameters() if "norm" in name)
    projections = sum(p.nbytes for p in model.parameters()) - table - head - norms
    lowered = lower_causal_lm(sharded(model, plan), max_batch=1, max_length=8, min_block_size=min_block_size)
    report = lowered.step.report
    eager = [f for f in report.fallbacks if f.op == "aten.embedding.default"]
    engines = sum(e.weight_bytes for e in report.engines)
    # The same either way: the LM head, norms and the rotary inv_freq buffer are replicated.
    rest = projections // 2 + head + norms + model.model.rotary_emb.inv_freq.nbytes
    if min_block_size == 3:
        assert [f.reason for f in eager] == ["its segment has 1 compute op(s), fewer than min_block_size=3"], report
        assert engines == rest, report
    else:
        assert not eager, report
        assert engines == rest + table // 2, report
