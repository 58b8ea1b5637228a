"""Where a one-engine lowered call's time goes above a bare ONNX Runtime run, step by step.

    python bench/bench_handover.py [--blocks 16] [--calls 60] [--models bert,mlp] [--threads 1] [--json out.json]

bench_overhead.py compares the lowered call with a bare `session.run` on numpy inputs made once.
This bench adds the steps in between, each a contender of its own, all on the engine's real
session run (not stubbed) and in rotating blocks, so that each step's cost is measured where it
runs: right after a run of the engine, with the caches that run left behind. In order:

  C binding, numpy once   the session's C binding (`session._sess.run`), numpy inputs made once
  session.run, numpy once bench_overhead's anchor: the same through ONNX Runtime's Python wrapper
  C binding, from torch   the C binding fed `Tensor.numpy()` views, outputs by `torch.from_numpy`
  engine run              the engine module's hand-over (DLPack in and out), no input check
  engine module           its call: the input check, then the run
  + output object         and the model's own output object built (transformers' ModelOutput)
  + input guard           and the lowered module's input guard first (the engine then skips its check)
  lowered                 the lowered module's call

Figures: each contender's median per call, and its difference to the first one and to the
anchor (median of per-block differences, with their spread). See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Any, Callable

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_models import engine_sessions_with  # noqa: E402
from bench_overhead import CLOCKS, MODELS, engine_calls, measure  # noqa: E402

import trt_lower  # noqa: E402
from trt_lower.engine.ort_session import create_session  # noqa: E402
from trt_lower.runtime.guard import InputGuard  # noqa: E402

ANCHOR = "session.run, numpy once"


def contenders(name: str, threads: int | None) -> dict[str, Callable[[], object]]:
    engine_sessions_with(threads=threads)
    torch.manual_seed(0)
    model, inputs = MODELS[name]()
    lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime")
    called = engine_calls(lowered, inputs)
    if len(called) != 1 or lowered.report.fallbacks:
        raise SystemExit(f"{name}: lowered to {len(called)} engines with eager ops; this bench takes one engine alone")
    engine, args = called[0]
    # The bare session as the engine's own is made: a whole call's engine keeps its workers spinning.
    session = create_session(engine.onnx_bytes, spin_between_runs=True, threads=threads)
    names = [i.name for i in session.get_inputs()]
    outputs = [o.name for o in session.get_outputs()]
    feeds = {n: np.ascontiguousarray(a.numpy()) for n, a in zip(names, args)}
    binding = session._sess.run
    build = getattr(lowered, "_output", None)
    guard = lowered._input_guard
    assert isinstance(guard, InputGuard)

    def from_torch() -> object:
        return [torch.from_numpy(a) for a in binding(outputs, {n: a.numpy() for n, a in zip(names, args)}, None)]

    def with_output(engine_call: Callable[[], Any]) -> Callable[[], object]:
        if build is None:  # the model returns tensors: no object to build
            return engine_call
        return lambda: build.build(*engine_call())

    def guarded() -> Any:
        guard(*inputs)
        return engine(*args)

    return {
        "C binding, numpy once": lambda: binding(outputs, feeds, None),
        ANCHOR: lambda: session.run(outputs, feeds),
        "C binding, from torch": from_torch,
        "engine run": lambda: engine.run(args),
        "engine module": lambda: engine(*args),
        "+ output object": with_output(lambda: engine(*args)),
        "+ input guard": with_output(guarded),
        "lowered": lambda: lowered(*inputs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=16)
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--models", default="bert,mlp")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    print(
        f"torch {torch.__version__}, load average {os.getloadavg()[0]:.2f}; intra-op threads "
        f"{args.threads or 'ONNX Runtime default'}; wall clock, median of {args.blocks} blocks x "
        f"{args.calls} calls (differences: median of per-block differences, min..max)"
    )
    report: dict[str, Any] = {}
    for name in args.models.split(","):
        times = measure(contenders(name, args.threads), args.blocks, args.calls, CLOCKS["wall"])
        first = next(iter(times.values()))
        print(f"\n{name}{'':24s} µs/call   - C binding, numpy once   - {ANCHOR}")
        for step, ts in times.items():
            to_first = [t - f for t, f in zip(ts, first)]
            to_anchor = [t - a for t, a in zip(ts, times[ANCHOR])]
            print(
                f"  {step:26s} {statistics.median(ts):8.1f}   {statistics.median(to_first):6.1f} "
                f"({min(to_first):.1f}..{max(to_first):.1f})   {statistics.median(to_anchor):6.1f} "
                f"({min(to_anchor):.1f}..{max(to_anchor):.1f})"
            )
        report[name] = {"per_block_us": times}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
