"""`trt-lower repro`: one engine's ONNX, inputs and eager outputs, for polygraphy and trtexec
(trt_lower/debug/repro.py writes them)."""

from __future__ import annotations

import argparse

import torch

from trt_lower.benchmarking import models as demo_models
from trt_lower.cli.arguments import input_file
from trt_lower.cli.dispatch import UsageError
from trt_lower.lowering_options import TRT_VERSIONS


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("repro", help="write one engine's ONNX, inputs and eager outputs for polygraphy")
    p.add_argument("file", nargs="?", type=input_file, help="a saved lowered model (trt_lower.save)")
    p.add_argument(
        "--model",
        choices=sorted(demo_models.MODELS),
        help="a demo model instead of FILE, lowered here (random weights, seed 0)",
    )
    p.add_argument("--engine", default="engine_0")
    p.add_argument("--out", required=True, help="directory to write into")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--backend", default="auto", choices=["auto", "tensorrt", "onnxruntime"])
    p.add_argument("--precision", default="fp32", choices=["fp32", "fp16"])
    p.add_argument("--trt-version", default=None, choices=TRT_VERSIONS)
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol", type=float, default=1e-3)
    p.set_defaults(command_fn=repro)


def repro(args: argparse.Namespace) -> int:
    # Imported here: they import torch.export, which the other commands do not need.
    from trt_lower.api import lower_to_trt
    from trt_lower.debug.repro import INPUTS, MODEL, OUTPUTS, write_repro, write_repro_loaded
    from trt_lower.deploy.artifact import load

    if (args.file is None) == (args.model is None):
        raise UsageError("give a saved model FILE or --model NAME (one of them)")
    torch.manual_seed(0)
    if args.file is not None:
        command = write_repro_loaded(
            load(args.file, backend="onnxruntime"), args.engine, args.out, rtol=args.rtol, atol=args.atol
        )
        print(
            f"wrote {args.engine} of {args.file} to {args.out} (reference outputs: ONNX Runtime's, "
            "the file holds no eager model)"
        )
    else:
        model, inputs = demo_models.build(args.model, args.batch)
        lowered = lower_to_trt(
            model, inputs, backend=args.backend, precision=args.precision, trt_version=args.trt_version
        )
        command = write_repro(model, lowered, inputs, args.engine, args.out, rtol=args.rtol, atol=args.atol)
        print(f"wrote {args.engine} of {args.model} to {args.out}: {MODEL}, {INPUTS}, {OUTPUTS}")
    print(command)
    return 0
