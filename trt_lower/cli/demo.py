"""`trt-lower demo`: lower a real model (random weights), print its report, its accuracy against
eager PyTorch and the benchmark of both."""

from __future__ import annotations

import argparse
import time
import warnings

from trt_lower.benchmarking import models as demo_models
from trt_lower.cli.arguments import add_draw, add_timing
from trt_lower.cli.artifact import add_lowering_options, lowering_options


def demo(args: argparse.Namespace) -> int:
    import torch

    import trt_lower
    from trt_lower.benchmarking.measure import UnstableTimingWarning

    torch.manual_seed(0)
    model, inputs = demo_models.build(args.model, args.batch)
    print(f"lowering {args.model} (batch {args.batch}, random weights) ...", flush=True)
    start = time.perf_counter()
    lowered = trt_lower.lower_to_trt(model, inputs, **lowering_options(args))
    print(f"lowered in {time.perf_counter() - start:.1f} s\n")
    print(lowered.report, "\n")
    if args.draw:
        print(f"picture of the split: {lowered.report.draw(args.draw)}\n")
    accuracy = trt_lower.check_accuracy(model, lowered, inputs, rtol=args.rtol, atol=args.atol)
    print(accuracy, "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnstableTimingWarning)  # the summary marks unstable runs
        result = trt_lower.benchmark(model, lowered, inputs, warmup=args.warmup, iterations=args.iterations)
    print(result.summary())
    return 0 if accuracy.passed else 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="resnet50", choices=sorted(demo_models.MODELS), help="the model to lower")
    p.add_argument("--batch", type=int, default=1, help="batch of the model's input")
    add_lowering_options(p)
    add_timing(p, iterations=20, warmup=3)
    p.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance of the accuracy check")
    p.add_argument("--atol", type=float, default=1e-3, help="absolute tolerance of the accuracy check")
    add_draw(p)
    p.set_defaults(command_fn=demo)
