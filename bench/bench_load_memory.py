"""Peak memory and time of `trt_lower.load` in a fresh process, as a multiple of the weights, for a
model whose one engine holds about 1 GiB of float32 weights (ONNX Runtime then reads them where
load put them, uncopied: the big-model path), without lowering a multi-GB LLM.

    python bench/bench_load_memory.py [--width 8192] [--layers 4] [--reps 3]

Phases, each in a process of its own: make (lower on ONNX Runtime and save), then `--reps` loads,
each printing its peak RSS (the process's own, torch and onnxruntime imported included) over the
weights' bytes, its wall time and the first call's (which pays for whatever load left lazy). The
loaded output is checked against the lowered one.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _model(width: int, layers: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(width, width, bias=False) for _ in range(layers)]).eval()


def make(out: Path, width: int, layers: int) -> dict[str, float]:
    import trt_lower

    x = torch.randn(2, width)
    lowered = trt_lower.lower_to_trt(_model(width, layers), (x,), backend="onnxruntime", min_block_size=1)
    trt_lower.save(lowered, out / "model.trtl")
    with torch.no_grad():
        torch.save({"x": x, "y": lowered(x)}, out / "io.pt")
    return {"engines": len(lowered.report.engines)}


def load(out: Path, width: int, layers: int) -> dict[str, float]:
    import trt_lower

    io = torch.load(out / "io.pt")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    loaded = trt_lower.load(out / "model.trtl", backend="onnxruntime")
    load_s = time.perf_counter() - start
    with torch.no_grad():
        out = loaded(io["x"])
    first_call_s = time.perf_counter() - start - load_s
    torch.testing.assert_close(out, io["y"])
    weights = layers * width * width * 4
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"load_s": load_s, "first_call_s": first_call_s, "peak_x": peak / weights, "imports_x": before / weights}


PHASES = {"make": make, "load": load}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=8192)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(PHASES[args.phase](args.out, args.width, args.layers)))
        return
    print(
        f"torch {torch.__version__}, load average {os.getloadavg()[0]:.1f}, weights "
        f"{args.layers * args.width**2 * 4 / 2**30:.2f} GiB"
    )
    with tempfile.TemporaryDirectory() as tmp:

        def child(phase: str) -> dict[str, float]:
            command = [
                sys.executable,
                __file__,
                "--phase",
                phase,
                "--out",
                tmp,
                "--width",
                str(args.width),
                "--layers",
                str(args.layers),
            ]
            done = subprocess.run(command, check=True, capture_output=True, text=True)
            result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
            return result

        print(f"made: {child('make')}")
        runs = [child("load") for _ in range(args.reps)]
    for run in runs:
        print(
            f"load {run['load_s']:.2f} s, first call {run['first_call_s']:.2f} s, peak {run['peak_x']:.2f}x weights "
            f"(after imports: {run['imports_x']:.2f}x)"
        )
    print(
        f"median: load {statistics.median(r['load_s'] for r in runs):.2f} s, first call "
        f"{statistics.median(r['first_call_s'] for r in runs):.2f} s, peak "
        f"{statistics.median(r['peak_x'] for r in runs):.2f}x weights"
    )


if __name__ == "__main__":
    main()
