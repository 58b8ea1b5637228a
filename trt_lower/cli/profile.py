"""`trt-lower profile FILE [--input SHAPE[:DTYPE] ...]`: where a saved model's call spends its time,
where it is deployed, without the model's code: the table of LoweredModule.profile (per engine
layer and eager node, with the model's source lines the file stores), optionally as JSON and as
a Chrome trace. Inputs: random tensors of the given shapes, else of the shapes it was lowered
for (their opt sizes)."""

from __future__ import annotations

import argparse
import re
from typing import Any

from trt_lower.cli.arguments import input_file, output_file
from trt_lower.cli.dispatch import UsageError
from trt_lower.lowering_options import BACKENDS

_INPUT = re.compile(r"^(\d+(?:x\d+)*)?(?::([a-z0-9]+))?$")


def profile(args: argparse.Namespace) -> int:
    # Heavy imports here, not at the top: `trt-lower --help` and the other commands stay light.
    import torch

    import trt_lower
    from trt_lower.cli.artifact import example_inputs

    given = [_random(text, torch) for text in args.input or ()]  # a bad --input refused before loading
    lowered = trt_lower.load(args.file, backend=args.backend)
    lowered = getattr(lowered, "lowered_module", lowered)
    inputs = given or example_inputs(lowered)
    result = lowered.profile(inputs, iterations=args.iters, warmup=args.warmup)
    print(result.table(top=args.top))
    if args.json:
        result.save_json(args.json)
        print(f"profile as JSON: {args.json}")
    if args.trace:
        result.save_chrome_trace(args.trace)
        print(f"Chrome trace (chrome://tracing, ui.perfetto.dev): {args.trace}")
    return 0


def _random(text: str, torch: Any) -> Any:
    """A random tensor for 'SHAPE[:DTYPE]' ('2x128:int64'; float32 by default); integers in {0, 1},
    valid indices of any embedding table."""
    match = _INPUT.match(text)
    dtype = getattr(torch, match[2] or "float32", None) if match else None
    if match is None or not isinstance(dtype, torch.dtype):
        raise UsageError(f"--input {text!r}: expected SHAPE[:DTYPE], e.g. 1x3x224x224:float32 or 2x128:int64")
    shape = tuple(int(d) for d in match[1].split("x")) if match[1] else ()
    return torch.randn(shape).to(dtype) if dtype.is_floating_point else torch.randint(0, 2, shape).to(dtype)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("profile", help="time a saved model per engine layer and eager node, with its source lines")
    p.add_argument("file", type=input_file, help="artifact written by trt_lower.save")
    p.add_argument("--input", action="append", help="SHAPE[:DTYPE] per forward argument (default: the lowered shapes)")
    p.add_argument("--backend", choices=BACKENDS, default="auto")
    p.add_argument("--iters", type=int, default=20, help="calls measured (the profile is the median one's)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--top", type=int, default=20, help="rows shown, the rest summed")
    p.add_argument("--json", metavar="PATH", type=output_file, help="also write the profile as JSON")
    p.add_argument("--trace", metavar="PATH", type=output_file, help="also write a Chrome trace")
    p.set_defaults(command_fn=profile)
