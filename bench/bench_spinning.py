"""ONNX Runtime's workers spinning between runs, kept or stopped, for lowered models with and
without other work between an engine's runs (CPU).

    python bench/bench_spinning.py [--rounds 4] [--calls 40] [--cases resnet18-adds,...]

trt_lower stops the intra-op workers of an engine's session spinning when a run ends where the
lowered call runs something else between that engine's runs (more than one engine, or an eager
op), and keeps ONNX Runtime's default where the engine is the whole call
(engine/ort_session.py). Each variant runs in a process of its own (workers that spin after a
run take CPU from whatever else runs in the process, the other variant included), in
alternating order over `--rounds` rounds; a process lowers the case, warms up and reports its
median per call. ratio = kept / stopped (> 1: stopping is faster). See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from trt_lower.engine.engines import engine_is_whole_call  # noqa: E402

# name: (bench_models model, ops kept eager)
CASES: dict[str, tuple[str, list[str]]] = {
    "resnet18-adds": ("resnet18", ["aten.add.Tensor"]),  # each residual add eager
    "mobilenet_v2-relu6": ("mobilenet_v2", ["aten.hardtanh.default"]),  # each ReLU6 eager
    "bert-gelu": ("bert", ["aten.gelu.default"]),  # the FFN's GELU eager
    "resnet18": ("resnet18", []),  # one engine, nothing else
    "bert": ("bert", []),
}


def child(case: str, spin: bool, calls: int) -> None:
    """Lower `case` with every engine session's spinning set to `spin`; print the median ms."""
    import torch
    from bench_models import MODELS, engine_sessions_with

    import trt_lower

    engine_sessions_with(spin_between_runs=spin)
    name, fallback = CASES[case]
    torch.manual_seed(0)
    model, inputs = MODELS[name]()
    lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", fallback_ops=fallback, min_block_size=1)
    times = []
    with torch.inference_mode():
        for _ in range(5):
            lowered(*inputs)
        for _ in range(calls):
            start = time.perf_counter()
            lowered(*inputs)
            times.append(time.perf_counter() - start)
    report = lowered.report
    print(
        json.dumps(
            {"ms": statistics.median(times) * 1e3, "engines": len(report.engines), "eager": len(report.fallbacks)}
        )
    )


def run_child(case: str, spin: bool, calls: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", case, str(int(spin)), str(calls)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3] == "1", int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    print(
        f"load average {os.getloadavg()[0]:.2f}; {args.rounds} rounds, a process per variant and round, median of "
        f"{args.calls} calls each, wall clock; ms per call: median over rounds (min..max)"
    )
    print(
        f"{'case':20s} {'engines':>7s} {'eager':>5s} {'spinning kept':>22s} {'spinning stopped':>22s} {'ratio':>5s}"
        "  trt_lower's choice"
    )
    for case in args.cases.split(","):
        times: dict[bool, list[float]] = {True: [], False: []}
        shape = {}
        for r in range(args.rounds):
            for spin in (True, False) if r % 2 == 0 else (False, True):
                shape = run_child(case, spin, args.calls)
                times[spin].append(shape["ms"])
        kept, stopped = times[True], times[False]
        alone = engine_is_whole_call(int(shape["engines"]), int(shape["eager"]))
        print(
            f"{case:20s} {shape['engines']:7.0f} {shape['eager']:5.0f}"
            f" {statistics.median(kept):9.3f} ({min(kept):.2f}..{max(kept):.2f})"
            f" {statistics.median(stopped):9.3f} ({min(stopped):.2f}..{max(stopped):.2f})"
            f" {statistics.median(kept) / statistics.median(stopped):5.2f}  {'kept' if alone else 'stopped'}",
            flush=True,
        )


if __name__ == "__main__":
    main()
