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

import pytest
import torch
from distributed_workers import free_port

from converters.core.target import DEFAULT, TrtTarget
from splitter.support import COLLECTIVE_REASON, unsupported_reason
from trt_lower import lower_to_trt

pytest.importorskip("transformers")

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


def test_tensor_parallel_llama_generates_eager_tokens() -> None:
    """lower_causal_lm on the sharded model: every rank's greedy tokens are the unsharded eager
    model's (the worker asserts it); a sharded LM head is refused with what to do."""
    out = torchrun("tp_worker.py", 2, "generate")
    assert out.count("TOKENS") == 2, out[-4000:]


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
