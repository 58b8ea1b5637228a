"""`trt-lower bench FILE | --model NAME`: the benchmark of trt_lower.benchmark from the command line."""

from __future__ import annotations

import argparse
import warnings
from typing import TYPE_CHECKING

from trt_lower.benchmarking import models as demo_models
from trt_lower.cli import artifact as cli_artifact
from trt_lower.cli.arguments import (
    add_backend,
    add_draw,
    add_loading,
    add_timing,
    input_file,
    loading,
    output_file,
    renamed,
)
from trt_lower.cli.dispatch import UsageError
from trt_lower.values.settings import PRECISIONS

if TYPE_CHECKING:
    import torch

    from trt_lower.stitch.lowered import LoweredModule


def _ints(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated batch sizes like 1,8,32, got {text!r}") from None
    if any(b < 1 for b in sizes):
        raise argparse.ArgumentTypeError(f"batch sizes must be >= 1, got {text!r}")
    return sizes


def _names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = __doc__
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "file", nargs="?", metavar="FILE", type=input_file, help="a saved lowered model (trt_lower.save)"
    )
    which.add_argument("--model", choices=sorted(demo_models.MODELS), help="a demo model, lowered here")
    sizes = p.add_argument(
        "--batch-sizes",
        type=_ints,
        default=None,
        metavar="1,8,32",
        help="batch sizes (--model: one lowering per size; FILE: sizes its inputs accept)",
    )
    renamed(p, "--batch", sizes)
    p.add_argument(
        "--compare",
        type=_names,
        default=None,
        metavar="eager,lowered[,compile]",
        help="variants to run, interleaved (default: eager,lowered; FILE: lowered)",
    )
    add_timing(p, iterations=100, warmup=10)
    p.add_argument("--duration", type=float, default=None, help="and at least this many seconds per variant")
    add_backend(p)
    p.add_argument("--precision", default="fp32", choices=PRECISIONS, help="what the engines compute in (--model)")
    add_loading(p)
    p.add_argument(
        "--json", metavar="PATH", type=output_file, help="write every figure, the samples and the machine as JSON"
    )
    p.add_argument("--plot", metavar="PATH", type=output_file, help="write the latency and speedup plot (PNG)")
    add_draw(p)
    p.set_defaults(command_fn=bench)


def _from_file(args: argparse.Namespace) -> tuple[None, LoweredModule, tuple[torch.Tensor, ...]]:
    if set(args.compare or ["lowered"]) != {"lowered"}:
        raise UsageError("a saved model has no eager model to compare with: FILE runs --compare lowered only")
    import trt_lower

    lowered = trt_lower.load(args.file, backend=args.backend, **loading(args))
    return None, lowered, tuple(cli_artifact.example_inputs(lowered))


def bench(args: argparse.Namespace) -> int:
    import torch

    import trt_lower
    from trt_lower.benchmarking.measure import UnstableTimingWarning, at_batch
    from trt_lower.stitch.lowered import LoweredModule

    torch.manual_seed(0)
    model: torch.nn.Module | None
    lowered: LoweredModule | dict[int, LoweredModule]
    if args.file:
        model, lowered, inputs = _from_file(args)
        compare = ["lowered"]
    else:
        sizes = args.batch_sizes or [1]
        model, inputs = demo_models.build(args.model, sizes[0])
        lowered = {}
        for size in sizes:
            print(f"lowering {args.model} for batch {size} (random weights) ...", flush=True)
            lowered[size] = trt_lower.lower_to_trt(
                model, at_batch(inputs, size), backend=args.backend, precision=args.precision
            )
        compare = args.compare or ["eager", "lowered"]
    first = lowered if isinstance(lowered, LoweredModule) else next(iter(lowered.values()))
    print(first.report, "\n")
    if args.draw:
        print(f"picture of the split: {first.report.draw(args.draw)}")
    with warnings.catch_warnings():
        # The summary marks unstable runs itself ("!" and a footnote).
        warnings.simplefilter("ignore", UnstableTimingWarning)
        result = trt_lower.benchmark(
            model,
            lowered,
            inputs,
            warmup=args.warmup,
            iterations=args.iterations,
            duration=args.duration,
            batch_sizes=args.batch_sizes,
            compare=compare,
        )
    print(result.summary())
    if args.json:
        print(f"JSON: {result.save_json(args.json)}")
    if args.plot:
        print(f"plot: {result.plot(args.plot)}")
    return 0
