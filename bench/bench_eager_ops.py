"""Eager ops between engines called through torch's bindings or as OpOverloads (ONNX Runtime, CPU).

    python bench/bench_eager_ops.py [--blocks 10] [--calls 30] [--cases mobilenet_v2-relu6,...] [--threads N]

A lowered module's generated forward calls an eager ATen op through torch's own C binding
(`torch.relu`) where runtime/bindings.py proves it the same call, else as the graph's OpOverload
(`torch.ops.aten.relu.default`). Per case, side by side in one process: the model lowered as
trt_lower does it, and the same lowering with its forward generated with every eager op left an
OpOverload, in alternating blocks of `--calls` calls (per-call time: a block's median; figures:
median over blocks and the spread of the per-block difference). See bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_models import MODELS, engine_sessions_with  # noqa: E402
from bench_overhead import MODELS as SMALL  # noqa: E402
from bench_overhead import measure  # noqa: E402

import trt_lower  # noqa: E402
from trt_lower.runtime import bindings  # noqa: E402

# name: (the model and its inputs, ops kept eager)
CASES: dict[str, tuple[Callable[[], Any], list[str]]] = {
    "mlp-relu": (SMALL["mlp"], ["aten.relu.default"]),  # two engines, a ReLU between
    "mobilenet_v2-relu6": (MODELS["mobilenet_v2"], ["aten.hardtanh.default"]),  # each ReLU6 eager
    "resnet18-adds": (MODELS["resnet18"], ["aten.add.Tensor"]),  # each residual add eager
}


def with_overloads(lowered: trt_lower.LoweredModule) -> None:
    """Generate `lowered`'s forward again with no eager op bound."""
    proven = bindings.binding
    bindings.binding = lambda node: None
    try:
        lowered.recompile()
    finally:
        bindings.binding = proven


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    engine_sessions_with(threads=args.threads)
    print(
        f"torch {torch.__version__}, load average {os.getloadavg()[0]:.2f}; intra-op threads "
        f"{args.threads or 'ONNX Runtime default'}; median of {args.blocks} blocks x {args.calls} calls"
    )
    for case in args.cases.split(","):
        make, eager = CASES[case]
        torch.manual_seed(0)
        model, inputs = make()
        bound, plain = (
            trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", fallback_ops=eager, min_block_size=1)
            for _ in range(2)
        )
        with_overloads(plain)
        assert "torch.ops.aten" in plain.code and "torch.ops.aten" not in bound.code
        with torch.inference_mode():
            torch.testing.assert_close(bound(*inputs), plain(*inputs), rtol=0, atol=0)
        times = measure(
            {"bindings": lambda: bound(*inputs), "overloads": lambda: plain(*inputs)},
            args.blocks,
            args.calls,
            time.perf_counter,
        )
        diff = [b - p for b, p in zip(times["bindings"], times["overloads"])]
        ops = sum(1 for n in bound.graph.nodes if n.op == "call_function" and str(n.target) in eager)
        print(
            f"{case}: {len(bound.report.engines)} engines, {ops} eager ops; bindings "
            f"{statistics.median(times['bindings']):.1f} µs, overloads {statistics.median(times['overloads']):.1f} µs; "
            f"bindings - overloads {statistics.median(diff):+.1f} µs ({min(diff):+.1f}..{max(diff):+.1f}), "
            f"{statistics.median(diff) / max(ops, 1):+.2f} µs per eager op"
        )


if __name__ == "__main__":
    main()
