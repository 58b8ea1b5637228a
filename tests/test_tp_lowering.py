"""Tensor-parallel lowering: a model sharded with torch.distributed.tensor.parallel lowers on every
rank (gloo on CPU, launched with torch.distributed.run), each rank's engines holding its shard of
the weights and the collectives (all_reduce, all_gather_into_tensor, reduce_scatter_tensor and
their waits) running between them, eager."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
import torch
from distributed_workers import fake_ranks, free_port

from converters.core.target import DEFAULT, TrtTarget
from splitter.support import COLLECTIVE_REASON, unsupported_reason
from trt_lower import lower_to_trt

pytest.importorskip("transformers")
from tp_worker import sharded, tiny_llama, tp_plan  # noqa: E402

from trt_lower.llm import lower_causal_lm  # noqa: E402

TESTS = Path(__file__).resolve().parent
TIMEOUT_S = 400  # the slowest (4 ranks on 2 cores) takes ~2 minutes


def torchrun(script: str, ranks: int, *args: str) -> str:
    """`script` on `ranks` processes under torch.distributed.run on 127.0.0.1; its output. Fails
    the test on a nonzero exit, and ends every process it started after TIMEOUT_S."""
    command = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={ranks}"]
    command += ["--master-addr=127.0.0.1", f"--master-port={free_port()}", str(TESTS / script), *args]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)]), "OMP_NUM_THREADS": "1"}
    with subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    ) as run:
        try:
            out, _ = run.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            out, _ = run.communicate()
            pytest.fail(f"{script} on {ranks} ranks did not end within {TIMEOUT_S} s:\n{out[-4000:]}")
    assert run.returncode == 0, out[-6000:]
    return out


@pytest.mark.parametrize("ranks", [2, 4])
def test_tensor_parallel_llama_lowers_on_every_rank(
    ranks: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Logits as the unsharded model's on every rank, verification run on every rank (no rank
    waits on a collective another skipped), each rank's engines hold ~1/ranks of the weights
    (the norms, replicated, are the rest), and each rank's file loads back with the same logits."""
    monkeypatch.setenv("TP_WORKER_DIR", str(tmp_path))
    out = torchrun("tp_worker.py", ranks)
    weights = re.findall(r"WEIGHTS (\d+) (\d+)", out)  # the ranks' lines may interleave with others' output
    assert len(weights) == ranks, out[-4000:]
    for rank_bytes, model_bytes in weights:
        assert abs(int(rank_bytes) / int(model_bytes) - 1 / ranks) < 0.01, weights


@pytest.mark.parametrize("ranks", [2, 4])
def test_tensor_parallel_llama_generates_eager_tokens(ranks: int) -> None:
    """lower_causal_lm on the sharded model: every rank's greedy tokens are the unsharded eager
    model's (the worker asserts it); a sharded LM head is refused with what to do. On 4 ranks the
    capture narrows the step's query length to 1..3 and the 8-token prompt runs in chunks of 3."""
    out = torchrun("tp_worker.py", ranks, "generate")
    chunks = re.findall(r"TOKENS .* CHUNK (\d+)", out)
    assert chunks == [str(16 if ranks == 2 else 3)] * ranks, out[-4000:]


@pytest.fixture
def four_fake_ranks() -> Iterator[None]:
    """This process as rank 0 of 4 in PyTorch's fake process group: collectives complete at once
    without peers (an all_reduce leaves its input, an all_gather repeats it), so a sharded model
    captures and runs as on 4 ranks, in one process."""
    with fake_ranks(4):
        yield


def test_on_4_ranks_a_prompt_runs_in_chunks_of_3(four_fake_ranks: None) -> None:
    """The capture keeps 1..3 tokens a step (DTensor's embedding rule on 4 ranks): lower_causal_lm
    takes that step, runs the 8-token prompt as 3, 3 and 2 tokens, and generates the tokens of the
    sharded eager model over the same fake collectives."""
    model = tiny_llama(4)
    plan = tp_plan(model.config.num_hidden_layers)
    del plan["lm_head"]
    model = sharded(model, plan)
    lowered = lower_causal_lm(model, max_batch=1, max_length=16)
    assert lowered.prefill_chunk == 3 and "prompts longer than 3 tokens run in chunks of 3" in lowered.report.notes
    ids = torch.randint(0, 128, (1, 8), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model.generate(ids, max_new_tokens=4, do_sample=False)
    queries: list[int] = []
    hook = lowered.step.register_forward_pre_hook(lambda _, inputs: queries.append(inputs[0].shape[1]))
    try:
        assert torch.equal(lowered.generate(ids, max_new_tokens=4, do_sample=False), expected)
    finally:
        hook.remove()
    assert queries == [3, 3, 2, 1, 1, 1]


def test_collectives_are_never_inside_an_engine() -> None:
    """Every functional collective and its wait are eager, with a reason that says where they run
    (not a call to register a converter)."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    ops = torch.ops._c10d_functional
    nodes = [
        graph.call_function(ops.all_reduce.default, (x, "sum", "0")),
        graph.call_function(ops.all_gather_into_tensor.default, (x, 2, "0")),
        graph.call_function(ops.reduce_scatter_tensor.default, (x, "sum", 2, "0")),
        graph.call_function(ops.wait_tensor.default, (x,)),
    ]
    for node in nodes:
        assert unsupported_reason(node, TrtTarget(DEFAULT), frozenset()) == COLLECTIVE_REASON


def test_report_counts_engine_weight_bytes() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    lowered = lower_to_trt(model, (torch.randn(2, 8),), verify=False)
    assert [e.weight_bytes for e in lowered.report.engines] == [sum(p.nbytes for p in model.parameters())]
    assert f"weights {lowered.report.engines[0].weight_bytes} bytes" in str(lowered.report)
