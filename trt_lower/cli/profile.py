"""`trt-lower profile FILE [--input SHAPE[:DTYPE] ...]`: where a saved model's call spends its time,
where it is deployed, without the model's code: the table of LoweredModule.profile (per engine
layer and eager node, with the model's source lines the file stores), optionally as JSON and as
a Chrome trace. Inputs: random tensors of the given shapes, else of the shapes it was lowered
for (their opt sizes)."""

from __future__ import annotations

import argparse

from trt_lower.cli import inputs as cli_inputs
from trt_lower.cli.arguments import add_backend, add_loading, add_timing, input_file, loading, output_file


def profile(args: argparse.Namespace) -> int:
    # Heavy imports here, not at the top: `trt-lower --help` and the other commands stay light.
    import trt_lower
    from trt_lower.cli.artifact import example_inputs

    given = [cli_inputs.example(*cli_inputs.parse(text)) for text in args.input or ()]  # refused before loading
    lowered = trt_lower.load(args.file, backend=args.backend, **loading(args))
    lowered = getattr(lowered, "lowered_module", lowered)
    inputs = given or example_inputs(lowered)
    result = lowered.profile(inputs, iterations=args.iterations, warmup=args.warmup)
    print(result.table(top=args.top))
    if args.json:
        result.save_json(args.json)
        print(f"profile as JSON: {args.json}")
    if args.trace:
        result.save_chrome_trace(args.trace)
        print(f"Chrome trace (chrome://tracing, ui.perfetto.dev): {args.trace}")
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=input_file, help="artifact written by trt_lower.save")
    cli_inputs.add_input(p, default="the lowered shapes")
    add_backend(p)
    add_loading(p)
    add_timing(p, iterations=20, warmup=3)
    p.add_argument("--top", type=int, default=20, help="rows shown, the rest summed")
    p.add_argument("--json", metavar="PATH", type=output_file, help="also write the profile as JSON")
    p.add_argument("--trace", metavar="PATH", type=output_file, help="also write a Chrome trace")
    p.set_defaults(command_fn=profile)
