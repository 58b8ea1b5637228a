"""Mixture-of-experts models lowered (ONNX Runtime, CPU) against eager, side by side in one run.

    python bench/bench_moe.py [--models mixtral_moe,qwen3_moe,deepseek_v3_moe] [--tokens 16]
                              [--precision fp32] [--blocks 5] [--calls 10]

Each model is bench/model_zoo.py's small configuration with transformers' default experts
implementation (`grouped_mm`), called on one sequence of `--tokens` token ids. Per model: engines,
coverage, and the per-call time of eager and of the lowered module, in alternating blocks (a
block's median; figures: the median over blocks, ms). See bench/README.md.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_overhead import CLOCKS, measure  # noqa: E402
from model_zoo import MODELS  # noqa: E402

import trt_lower  # noqa: E402

MOE = ("mixtral_moe", "qwen3_moe", "deepseek_v3_moe", "gpt_oss")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MOE))
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print(
        f"torch {torch.__version__}, load average {os.getloadavg()[0]:.2f}; {args.tokens} tokens, "
        f"{args.precision}; median of {args.blocks} blocks x {args.calls} calls (ms)"
    )
    for name in args.models.split(","):
        torch.manual_seed(0)
        model, (ids,) = MODELS[name]()
        ids = ids[:, :1].repeat(1, args.tokens).random_(0, int(ids.max()) + 1)
        lowered = trt_lower.lower_to_trt(model, (ids,), backend="onnxruntime", precision=args.precision)
        report = lowered.report
        times = measure(
            {"eager": functools.partial(model, ids), "lowered": functools.partial(lowered, ids)},
            args.blocks,
            args.calls,
            CLOCKS["wall"],
        )
        eager, ours = (statistics.median(times[k]) / 1e3 for k in ("eager", "lowered"))
        print(
            f"{name:16s} engines {len(report.engines)} coverage {report.coverage:.3f}  eager {eager:.3f}  "
            f"lowered {ours:.3f}  ({eager / ours:.2f}x)",
            flush=True,
        )


if __name__ == "__main__":
    main()
