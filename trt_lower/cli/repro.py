"""`trt-lower repro`: one engine's ONNX, inputs and eager outputs, for polygraphy and trtexec
(trt_lower/debug/repro.py writes them)."""

from __future__ import annotations

import argparse

from trt_lower.benchmarking import models as demo_models
from trt_lower.cli.arguments import add_backend, add_loading, input_file, loading, renamed
from trt_lower.cli.dispatch import UsageError
from trt_lower.values.settings import PRECISIONS, TRT_VERSIONS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?", type=input_file, help="a saved lowered model (trt_lower.save)")
    p.add_argument(
        "--model",
        choices=sorted(demo_models.MODELS),
        help="a demo model instead of FILE, lowered here (random weights, seed 0)",
    )
    p.add_argument("--engine", default="engine_0", help="the engine to write (the report names them)")
    # Not required by argparse: its former spelling --out may give it instead.
    renamed(p, "--out", p.add_argument("-o", "--output", metavar="DIR", help="directory to write into (required)"))
    p.add_argument("--batch", type=int, default=1, help="batch of the demo model's input")
    add_backend(p)
    p.add_argument("--precision", default="fp32", choices=PRECISIONS, help="what the engines compute in (--model)")
    p.add_argument("--trt-version", default=None, choices=TRT_VERSIONS, help="TensorRT version to target (--model)")
    p.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance the repro's check uses")
    p.add_argument("--atol", type=float, default=1e-3, help="absolute tolerance the repro's check uses")
    add_loading(p)
    p.set_defaults(command_fn=repro)


def repro(args: argparse.Namespace) -> int:
    import torch

    from trt_lower.api import lower_to_trt
    from trt_lower.debug.repro import INPUTS, MODEL, OUTPUTS, write_repro, write_repro_loaded
    from trt_lower.deploy.artifact import load

    if (args.file is None) == (args.model is None):
        raise UsageError("give a saved model FILE or --model NAME (one of them)")
    if args.output is None:
        raise UsageError("give the directory to write into: -o/--output DIR")
    torch.manual_seed(0)
    if args.file is not None:
        command = write_repro_loaded(
            load(args.file, backend="onnxruntime", **loading(args)),
            args.engine,
            args.output,
            rtol=args.rtol,
            atol=args.atol,
        )
        print(
            f"wrote {args.engine} of {args.file} to {args.output} (reference outputs: ONNX Runtime's, "
            "the file holds no eager model)"
        )
    else:
        model, inputs = demo_models.build(args.model, args.batch)
        lowered = lower_to_trt(
            model, inputs, backend=args.backend, precision=args.precision, trt_version=args.trt_version
        )
        command = write_repro(model, lowered, inputs, args.engine, args.output, rtol=args.rtol, atol=args.atol)
        print(f"wrote {args.engine} of {args.model} to {args.output}: {MODEL}, {INPUTS}, {OUTPUTS}")
    print(command)
    return 0
