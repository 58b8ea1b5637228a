"""`trt-lower`: the command line, its parser and the demo, triton and serve commands (lower, info
and run are in cli/artifact.py, bench in cli/bench.py, repro in cli/repro.py)."""

from __future__ import annotations

import argparse
import logging
import signal
import time
import warnings
from typing import Sequence

import torch

import trt_lower
from trt_lower.benchmarking import models as demo_models
from trt_lower.benchmarking.measure import UnstableTimingWarning
from trt_lower.cli import artifact as cli_artifact
from trt_lower.cli import bench as bench_cli
from trt_lower.cli import profile as profile_cli
from trt_lower.cli import repro
from trt_lower.cli import signing as cli_signing
from trt_lower.cli import verify as verify_cli
from trt_lower.cli.arguments import input_file, output_file, port
from trt_lower.cli.dispatch import Parser, run_command
from trt_lower.lowering_options import BACKENDS, PRECISIONS, TRT_VERSIONS
from trt_lower.values.versions import own_version


def demo(args: argparse.Namespace) -> int:
    torch.manual_seed(0)
    model, inputs = demo_models.build(args.model, args.batch)
    print(f"lowering {args.model} (batch {args.batch}, random weights) ...", flush=True)
    start = time.perf_counter()
    lowered = trt_lower.lower_to_trt(
        model,
        inputs,
        backend=args.backend,
        precision=args.precision,
        trt_version=args.trt_version,
        min_block_size=args.min_block_size,
        fallback_ops=args.fallback_op or (),
    )
    print(f"lowered in {time.perf_counter() - start:.1f} s\n")
    print(lowered.report, "\n")
    if args.draw:
        print(f"picture of the split: {lowered.report.draw(args.draw)}\n")
    accuracy = trt_lower.check_accuracy(model, lowered, inputs, rtol=args.rtol, atol=args.atol)
    print(accuracy, "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnstableTimingWarning)  # the summary marks unstable runs
        print(trt_lower.benchmark(model, lowered, inputs, warmup=args.warmup, iterations=args.iters).summary())
    return 0 if accuracy.passed else 1


def triton(args: argparse.Namespace) -> int:
    """`trt-lower triton FILE --repo DIR --name NAME`: a saved artifact as a Triton model."""
    from trt_lower.triton import export_model_repository

    model = export_model_repository(
        args.file, args.repo, args.name, max_batch_size=args.max_batch, instances=args.instances, platform=args.platform
    )
    print(f"wrote {model.path} (platform {model.platform}: {model.reason})")
    return 0


def _add_triton(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from trt_lower.triton import PLATFORMS

    p = sub.add_parser("triton", help="write a saved model (.trtl) into a Triton model repository")
    p.add_argument("file", type=input_file, help="artifact written by trt_lower.save")
    p.add_argument("--repo", required=True, help="model repository directory")
    p.add_argument("--name", required=True, help="model name in the repository")
    p.add_argument("--max-batch", type=int, default=0, help="Triton max_batch_size (0: no batch dim)")
    p.add_argument("--instances", type=int, default=1, help="model instances (instance_group count)")
    p.add_argument("--platform", default="auto", choices=PLATFORMS)
    p.set_defaults(command_fn=triton)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def serve(args: argparse.Namespace) -> int:
    """`trt-lower serve DIR`: tritonserver (from nvidia-pytriton) on a model repository, until Ctrl-C."""
    from trt_lower.triton import TritonServer
    from trt_lower.triton.server import exit_reason

    server = TritonServer(
        args.repo,
        host=args.host,
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        metrics_port=args.metrics_port,
        ready_timeout=args.timeout,
        max_input_size=args.max_input_size,
    )
    # The server runs in its own session, out of reach of the terminal's signals: a `kill` or a
    # closed terminal stops it through the same way out as Ctrl-C.
    previous = {stop: signal.signal(stop, _interrupted) for stop in (signal.SIGTERM, signal.SIGHUP)}
    try:
        with server:
            print(
                f"serving {args.repo}: HTTP {server.http_url} (requests up to {args.max_input_size} bytes), "
                f"gRPC {server.grpc_url} (Ctrl-C stops)",
                flush=True,
            )
            assert server.process is not None  # entering started it
            try:
                status = server.process.wait()
            except KeyboardInterrupt:
                return 0
            raise RuntimeError(f"tritonserver {exit_reason(status)} while serving {args.repo} (its log above says why)")
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)


def _add_serve(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from trt_lower.triton.front import DEFAULT_MAX_INPUT_SIZE

    p = sub.add_parser("serve", help="run Triton Inference Server on a model repository")
    p.add_argument("repo", help="model repository directory")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    p.add_argument("--http-port", type=port, default=8000)
    p.add_argument("--grpc-port", type=port, default=8001)
    p.add_argument("--metrics-port", type=port, default=8002)
    p.add_argument("--timeout", type=float, default=300, help="seconds to wait for every model to load")
    p.add_argument(
        "--max-input-size",
        type=int,
        default=DEFAULT_MAX_INPUT_SIZE,
        metavar="BYTES",
        help="the most bytes an HTTP request may carry or its inputs declare (default: 64 MiB)",
    )
    p.set_defaults(command_fn=serve)


def main(argv: Sequence[str] | None = None) -> int:
    parser = Parser(
        prog="trt-lower",
        description=(
            "Lower PyTorch models to TensorRT engines (ONNX Runtime where no GPU is present), check and "
            "benchmark them against eager, save them and serve them with Triton. `trt-lower demo` "
            "lowers a real model and shows report, accuracy and speed against eager. A failure ends in one "
            "line, `trt-lower COMMAND: ErrorType: message`, and exit status 1."
        ),
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of a failure")
    parser.add_argument("--version", action="version", version=f"trt-lower {own_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="lower a model and compare it with eager PyTorch")
    p.add_argument("--model", default="resnet50", choices=sorted(demo_models.MODELS))
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--backend", default="auto", choices=BACKENDS)
    p.add_argument("--precision", default="fp32", choices=PRECISIONS)
    p.add_argument(
        "--trt-version",
        default=None,
        choices=TRT_VERSIONS,
        help="TensorRT version to target (default: the installed one, else 10.4)",
    )
    p.add_argument("--min-block-size", type=int, default=3)
    p.add_argument("--fallback-op", action="append", help="ATen op to keep in eager, e.g. aten.relu.default")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol", type=float, default=1e-3)
    p.add_argument(
        "--draw", metavar="PATH", type=output_file, help="write a picture of the split (.svg, .png, .html or .dot)"
    )
    p.set_defaults(command_fn=demo)
    cli_artifact.add_commands(sub)
    cli_signing.add_commands(sub)
    _add_triton(sub)
    _add_serve(sub)
    bench_cli.add_parser(sub)
    repro.add_parser(sub)
    verify_cli.add_parser(sub)
    profile_cli.add_parser(sub)
    for command in sub.choices.values():  # `trt-lower COMMAND ... --debug` too, for every command
        command.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help="show the traceback of a failure"
        )
    args = parser.parse_args(argv)
    logging.basicConfig(format="%(message)s", level=logging.WARNING)
    # TensorRT engine builds take a while: show their one-line-per-engine progress.
    logging.getLogger("trt_lower").setLevel(logging.INFO)
    return run_command(args.command, args.command_fn, args, args.debug)


if __name__ == "__main__":
    raise SystemExit(main())
