"""The same host work in a hot loop and right after an engine's run (CPU, ONNX Runtime).

    python bench/bench_after_run.py [--models bert,mlp] [--rounds 6] [--calls 300]

The work is a lowered call with its engine's session run stubbed (bench_overhead.py's host
cost: everything a lowered call runs but the run itself). It is timed in a tight loop of its own,
and then each time right after a `session.run` of the engine's ONNX, for sessions with ONNX
Runtime's default threads (workers spinning between runs), the same with spinning stopped at the
end of each run, and one thread. Rounds alternate the three sessions; medians. What it shows:
how much of a lowered call's cost above a bare run comes from where its Python runs (after a run
that left the caches to the engine's weights), not from how much of it there is.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_overhead import MODELS, _stub, engine_calls  # noqa: E402

import trt_lower  # noqa: E402
from trt_lower.engine.ort_session import create_session  # noqa: E402


def after_runs(run: Callable[[], object], work: Callable[[], object], calls: int) -> tuple[float, float]:
    """Median µs of `work` right after `run`, and of `run` itself."""
    worked, ran = [], []
    for _ in range(calls):
        start = time.perf_counter()
        run()
        middle = time.perf_counter()
        work()
        worked.append(time.perf_counter() - middle)
        ran.append(middle - start)
    return statistics.median(worked) * 1e6, statistics.median(ran) * 1e6


def hot(work: Callable[[], object], calls: int) -> float:
    """Best µs per call of `work` over 5 tight loops."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            work()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def measure(name: str, rounds: int, calls: int) -> None:
    model, inputs = MODELS[name]()
    stubbed = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime")
    ((engine, args),) = engine_calls(stubbed, inputs)
    onnx_bytes = engine.onnx_bytes
    names = [i.name for i in create_session(onnx_bytes).get_inputs()]
    feeds = {n: np.ascontiguousarray(t.numpy()) for n, t in zip(names, args)}
    _stub(stubbed, inputs)
    sessions: dict[str, Any] = {
        "default threads, spinning": create_session(onnx_bytes),
        "default threads, spinning stopped": create_session(onnx_bytes, spin_between_runs=False),
        "one thread": create_session(onnx_bytes, threads=1),
    }

    def work() -> object:
        return stubbed(*inputs)

    with torch.inference_mode():
        for _ in range(200):
            work()
        alone = hot(work, calls * 10)
        results: dict[str, list[tuple[float, float]]] = {k: [] for k in sessions}
        order = list(sessions)
        for r in range(rounds):
            for key in order if r % 2 == 0 else order[::-1]:
                session = sessions[key]
                results[key].append(after_runs(lambda: session.run(None, feeds), work, calls))
    print(f"\n{name}: the work in a tight loop {alone:.1f} µs")
    for key, values in results.items():
        worked = statistics.median(v[0] for v in values)
        ran = statistics.median(v[1] for v in values)
        print(f"  after a run, {key:34s} {worked:6.1f} µs ({worked / alone:.1f}x)   the run {ran:8.1f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="bert,mlp")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    print(
        f"torch {torch.__version__}, load average {os.getloadavg()[0]:.2f}; {args.rounds} rounds x {args.calls} "
        "calls; verified on CPU via ONNX Runtime"
    )
    for name in args.models.split(","):
        measure(name, args.rounds, args.calls)


if __name__ == "__main__":
    main()
