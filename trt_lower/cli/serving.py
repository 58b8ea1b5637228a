"""`trt-lower triton | serve`: a saved model as a Triton model, and Triton Inference Server
(from nvidia-pytriton) on a model repository."""

from __future__ import annotations

import argparse
import signal

from trt_lower.cli.arguments import add_loading, input_file, port, renamed


def triton(args: argparse.Namespace) -> int:
    """`trt-lower triton FILE --repo DIR --name NAME`: a saved artifact as a Triton model."""
    from trt_lower.triton import export_model_repository

    model = export_model_repository(
        args.file,
        args.repo,
        args.name,
        max_batch_size=args.max_batch_size,
        instances=args.instances,
        platform=args.platform,
        trusted_keys=args.trusted_key,
        max_eager_allocation=args.max_eager_allocation,
    )
    print(f"wrote {model.path} (platform {model.platform}: {model.reason})")
    return 0


def add_triton_arguments(p: argparse.ArgumentParser) -> None:
    from trt_lower.triton.platforms import PLATFORMS

    p.add_argument("file", type=input_file, help="artifact written by trt_lower.save")
    p.add_argument("--repo", required=True, help="model repository directory")
    p.add_argument("--name", required=True, help="model name in the repository")
    renamed(
        p,
        "--max-batch",
        p.add_argument("--max-batch-size", type=int, default=0, help="Triton max_batch_size (0: no batch dim)"),
    )
    p.add_argument("--instances", type=int, default=1, help="model instances (instance_group count)")
    p.add_argument(
        "--platform",
        default="auto",
        choices=PLATFORMS,
        help="the Triton backend (auto: a TensorRT plan or ONNX where the model is one engine, else python)",
    )
    add_loading(p)  # the budget written into a python model's config, which loads with it
    p.set_defaults(command_fn=triton)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def serve(args: argparse.Namespace) -> int:
    """`trt-lower serve DIR`: tritonserver on a model repository, until Ctrl-C."""
    from trt_lower.triton import TritonServer
    from trt_lower.triton.server import exit_reason

    server = TritonServer(
        args.repo,
        host=args.host,
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        metrics_port=args.metrics_port,
        ready_timeout=args.ready_timeout,
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


def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    from trt_lower.triton.front import DEFAULT_MAX_INPUT_SIZE

    p.add_argument("repo", help="model repository directory")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    p.add_argument("--http-port", type=port, default=8000, help="HTTP port")
    p.add_argument("--grpc-port", type=port, default=8001, help="gRPC port")
    p.add_argument("--metrics-port", type=port, default=8002, help="Prometheus metrics port")
    renamed(
        p,
        "--timeout",
        p.add_argument("--ready-timeout", type=float, default=300, help="seconds to wait for every model to load"),
    )
    p.add_argument(
        "--max-input-size",
        type=int,
        default=DEFAULT_MAX_INPUT_SIZE,
        metavar="BYTES",
        help="the most bytes an HTTP request may carry or its inputs declare (default: 64 MiB)",
    )
    p.set_defaults(command_fn=serve)
