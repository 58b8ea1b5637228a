"""What torch's NaN windows cost a max-pooling model's engine on ONNX Runtime (CPU).

    python bench/bench_nan_pools.py [--models squeezenet1_1,shufflenet_v2_x0_5,resnet18] [--blocks 40] [--calls 20]

For each model of bench_models.py, its engine's ONNX built three ways, each in a bare session
with trt_lower's options on numpy inputs made once, beside the exporter's whole graph, in
rotating blocks: "tanh on input" (every pool's NaN factor from the mean of tanh(x)), "tanh on
mean" (what trt_lower emits: tanh after the average where the pooled input holds no -inf),
"no NaN ops" (plain MaxPool, which skips NaNs as the exporter's graph does). Printed: median ms
per call with the spread of block medians, and whole-graph time / this time. See bench/README.md.
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
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_models  # noqa: E402

import converters.ops.pooling as pooling  # noqa: E402
import trt_lower  # noqa: E402

EMITTED = pooling._nan_windows


def _tanh_on_input(
    b: Any,
    op_type: str,
    x: Any,
    pooled: Any,
    attrs: dict[str, Any],
    dtype: torch.dtype,
    channels: Any,
    never_minus_inf: bool,
) -> Any:
    return EMITTED(b, op_type, x, pooled, attrs, dtype, channels, False)


def _no_nan_ops(b: Any, op_type: str, x: Any, pooled: Any, *rest: Any) -> Any:
    return pooled


FORMS: dict[str, Callable[..., Any]] = {
    "tanh on input": _tanh_on_input,
    "tanh on mean": EMITTED,
    "no NaN ops": _no_nan_ops,
}


def sessions(name: str) -> dict[str, Callable[[], object]]:
    torch.manual_seed(0)
    model, inputs = bench_models.MODELS[name]()
    runs: dict[str, Callable[[], object]] = {}
    for form, nan_windows in FORMS.items():
        pooling._nan_windows = nan_windows
        try:
            lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime")
        finally:
            pooling._nan_windows = EMITTED
        run = bench_models.bare_engine(lowered, inputs)
        assert run is not None, f"{name} lowers to more than one engine"
        runs[form] = run
    runs["whole graph"] = bench_models.whole_graph(model, inputs)["whole"]
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="squeezenet1_1,shufflenet_v2_x0_5,resnet18")
    parser.add_argument("--blocks", type=int, default=40)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}; {args.blocks} rotating blocks x {args.calls} calls")
    for name in args.models.split(","):
        runs = sessions(name)
        order = list(runs)
        ms: dict[str, list[float]] = {n: [] for n in order}
        for block in range(args.blocks):
            for n in order[block % len(order) :] + order[: block % len(order)]:
                times = []
                for _ in range(args.calls):
                    start = time.perf_counter()
                    runs[n]()
                    times.append(time.perf_counter() - start)
                ms[n].append(statistics.median(times) * 1e3)
        whole = statistics.median(ms["whole graph"])
        for n, t in ms.items():
            print(
                f"{name:20s} {n:14s} {statistics.median(t):7.3f} ms ({min(t):.3f}..{max(t):.3f})"
                f"  whole / this {whole / statistics.median(t):.2f}"
            )


if __name__ == "__main__":
    main()
