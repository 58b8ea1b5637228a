"""`trt-lower lower | info | run`: make an artifact, show what is inside one, run one."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from trt_lower.benchmarking import models as demo_models
from trt_lower.cli import distributed as cli_distributed
from trt_lower.cli import inputs as cli_inputs
from trt_lower.cli.arguments import (
    add_backend,
    add_collectives,
    add_draw,
    add_loading,
    add_timing,
    input_file,
    loading,
    output_file,
    renamed,
)
from trt_lower.cli.dispatch import UsageError
from trt_lower.engine.builder_knobs import OPTIMIZATION_LEVELS, TACTIC_SOURCES
from trt_lower.values.settings import PRECISIONS, TRT_VERSIONS

if TYPE_CHECKING:
    import torch

    import trt_lower


def _factory_model(path: str) -> torch.nn.Module:
    """`package.module:function`, called without arguments, must return an nn.Module. MODULE is
    found in the current directory too, as `python -m` would (a console script's sys.path starts
    with its own directory instead)."""
    import torch

    module_name, _, name = path.partition(":")
    if not module_name or not name:
        raise UsageError(f"{path!r}: expected MODULE:FACTORY, e.g. my_pkg.models:make_model")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    factory = getattr(importlib.import_module(module_name), name, None)
    if not callable(factory):
        raise UsageError(f"{path!r}: {module_name} has no callable {name}")
    model = factory()
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"{path!r} returned {type(model).__name__}, not a torch.nn.Module")
    return model.eval()


def _names(text: str) -> frozenset[str]:
    return frozenset(name.strip() for name in text.split(",") if name.strip())


def _model_and_inputs(args: argparse.Namespace) -> tuple[torch.nn.Module, Sequence[Any], list[torch.Tensor] | None]:
    """The model, its inputs (example tensors or TensorSpecs) and the verification sample."""
    if args.model is not None:
        if args.factory or args.input or args.dynamic or args.verify_input:
            raise UsageError(
                "--model takes its inputs from the demo model; no FACTORY, --input, --dynamic or --verify-input"
            )
        return (*demo_models.build(args.model, args.batch), None)
    if not args.factory:
        raise UsageError("name a model: --model NAME (a demo model) or MODULE:FACTORY with --input")
    if not args.input:
        raise UsageError("a FACTORY needs its inputs: --input SHAPE[:DTYPE], once per forward argument")
    if args.verify_input and not args.dynamic:
        raise UsageError("--verify-input is for --dynamic inputs: static ones are verified on their own examples")
    model = _factory_model(args.factory)
    specs = cli_inputs.specs(args.input, args.dynamic or [])
    inputs = [s if s.dynamic_dims else cli_inputs.example(s.opt_shape, s.dtype) for s in specs]
    samples = cli_inputs.samples(args.verify_input, len(specs)) if args.verify_input else None
    return model, inputs, samples


def lower(args: argparse.Namespace) -> int:
    import torch

    import trt_lower

    torch.manual_seed(0)
    model, inputs, samples = _model_and_inputs(args)
    start = time.perf_counter()
    lowered = trt_lower.lower_to_trt(
        model,
        inputs,
        **lowering_options(args),
        optimization_level=args.optimization_level,
        workspace_bytes=args.workspace_bytes,
        tactic_sources=args.tactic_sources,
        timing_cache=args.timing_cache,
        collectives=args.collectives,
        verify_inputs=samples,
    )
    print(f"lowered in {time.perf_counter() - start:.1f} s")
    print(lowered.report)
    if args.draw:
        print(f"picture of the split: {lowered.report.draw(args.draw)}")
    trt_lower.save(lowered, args.output, sign_with=args.sign_with)
    print(f"saved {args.output}" + (f", signed with {args.sign_with}" if args.sign_with else ""))
    return 0


def _printable(value: Any) -> Any:
    """`value` (JSON data) with every string's unprintable characters escaped: what `info` shows
    comes from the file, and a newline or a terminal escape there would print lines of its own
    (a fake "signature: ... (valid)") or hide the real ones."""
    if isinstance(value, str):
        return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in value)
    if isinstance(value, dict):
        return {_printable(k): _printable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_printable(v) for v in value]
    return value


def info(args: argparse.Namespace) -> int:
    from trt_lower.deploy import artifact, signing
    from trt_lower.deploy.container import open_file

    with open_file(Path(args.file)) as file:  # what is shown and its signature, from one open
        archive = artifact.read(args.file, file)
        signature = signing.describe(file)
    manifest = _printable(archive.manifest)
    written = ", ".join(f"{k} {v}" for k, v in manifest["written_by"].items())
    size = sum(info.file_size for info in archive.infos.values())
    print(
        f"{_printable(str(archive.path))}: trt_lower artifact, format {manifest['format_version']}, written by {written}"
    )
    print(f"  members: {len(archive.infos) + 1}, {size / 2**20:.1f} MiB (checksums verified)")
    print(f"  signature: {signature}")
    print(f"  settings: {manifest['settings']}")
    for sig, dims in zip(manifest["inputs"], manifest["input_dims"]):
        shape = "x".join(str(d) for d in dims)
        print(f"  input {sig['source']}: {shape} {sig['dtype']} (min {sig['min']}, opt {sig['opt']}, max {sig['max']})")
    for engine in manifest["engines"]:
        plans = ", ".join(f"TensorRT {p['tensorrt']} on {p['device']}" for p in engine["plans"]) or "none"
        print(f"  {engine['name']}: {engine['onnx']}; TensorRT plans: {plans}")
    print(artifact.report_from_json(manifest["report"]))
    return 0


def example_inputs(lowered: trt_lower.LoweredModule) -> list[torch.Tensor]:
    """Random inputs a loaded model accepts (its inputs' opt shapes), where its engines run."""
    import torch

    from trt_lower.deploy import artifact
    from trt_lower.runtime.guard import InputGuard
    from trt_lower.values import device

    where = device.current().torch_device() if lowered.report.backend == "tensorrt" else torch.device("cpu")
    guard = lowered.get_submodule(artifact.GUARD)
    assert isinstance(guard, InputGuard)
    return [cli_inputs.example(sig.opt_shape, sig.dtype).to(where) for sig in guard.inputs]


def run(args: argparse.Namespace) -> int:
    with cli_distributed.joined(args):  # under torchrun: this rank of its job
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    import trt_lower
    from trt_lower.deploy import artifact
    from trt_lower.runtime.guard import InputGuard

    start = time.perf_counter()
    lowered = trt_lower.load(args.file, backend=args.backend, **loading(args))
    print(f"loaded {args.file} in {time.perf_counter() - start:.2f} s (engines on {lowered.report.backend})")
    inputs = example_inputs(lowered)
    guard = lowered.get_submodule(artifact.GUARD)
    assert isinstance(guard, InputGuard)
    print(
        "inputs: "
        + ", ".join(
            f"{s.source} {tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}" for s, t in zip(guard.inputs, inputs)
        )
    )
    result = trt_lower.benchmark(
        None,
        lowered,
        inputs,
        warmup=args.warmup,
        iterations=args.iterations,
        compare=("lowered",),
        cv_threshold=float("inf"),
    )
    print(f"median latency over {args.iterations} runs: {result.runs[0].latency_ms.median:.2f} ms")
    return 0


def add_lower_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("factory", nargs="?", help="MODULE:FACTORY, a function returning your nn.Module")
    p.add_argument("--model", choices=sorted(demo_models.MODELS), help="a demo model instead of a FACTORY")
    p.add_argument("--batch", type=int, default=1, help="batch of the demo model's input")
    cli_inputs.add_input(p)
    p.add_argument(
        "--dynamic",
        action="append",
        help="INPUT.DIM=MIN..MAX: dim DIM of input INPUT takes any size in range (opt: --input's)",
    )
    p.add_argument(
        "--verify-input",
        action="append",
        metavar="SHAPE[:DTYPE]",
        help="with --dynamic: the shapes of the random sample verification runs, one per forward argument as "
        "--input (default: the --input shapes)",
    )
    p.add_argument(
        "-o", "--output", required=True, type=output_file, help="the file to write (.trtl), in a directory that exists"
    )
    add_lowering_options(p)
    p.add_argument(
        "--sign-with", metavar="PEM", type=input_file, help="sign the file with this Ed25519 private key (keygen)"
    )
    p.add_argument(
        "--optimization-level",
        type=int,
        choices=OPTIMIZATION_LEVELS,
        help="TensorRT builder optimization level, 0 (fastest build) to 5 (default: TensorRT's, 3)",
    )
    renamed(
        p,
        "--workspace",
        p.add_argument("--workspace-bytes", type=int, metavar="BYTES", help="TensorRT workspace limit (default 4 GiB)"),
    )
    p.add_argument(
        "--tactic-sources",
        type=_names,
        metavar="NAMES",
        help=f"comma-separated TensorRT tactic sources ({', '.join(TACTIC_SOURCES)}; '' for none)",
    )
    p.add_argument(
        "--timing-cache",
        metavar="PATH",
        help="TensorRT timing cache file: read before each build if present, written back after",
    )
    add_collectives(p)
    add_draw(p)
    p.set_defaults(command_fn=lower)


def add_lowering_options(p: argparse.ArgumentParser) -> None:
    """lower_to_trt's options, as `lower` and `demo` take them."""
    add_backend(p)
    p.add_argument("--precision", default="fp32", choices=PRECISIONS, help="what the engines compute in")
    p.add_argument(
        "--trt-version",
        default=None,
        choices=TRT_VERSIONS,
        help="TensorRT version to target (default: the installed one, else 10.4)",
    )
    p.add_argument("--min-block-size", type=int, default=3, help="fewest ops an engine may hold")
    p.add_argument("--fallback-op", action="append", help="ATen op to keep in eager, e.g. aten.relu.default")


def lowering_options(args: argparse.Namespace) -> dict[str, Any]:
    """The lower_to_trt keywords of add_lowering_options' options."""
    return {
        "backend": args.backend,
        "precision": args.precision,
        "trt_version": args.trt_version,
        "min_block_size": args.min_block_size,
        "fallback_ops": args.fallback_op or (),
    }


def add_info_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=input_file, help="artifact written by trt_lower.save")
    p.set_defaults(command_fn=info)


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "file",
        type=cli_distributed.rank_file,
        help="artifact written by trt_lower.save; `{rank}` in it: torchrun's RANK",
    )
    cli_distributed.add_arguments(p)
    add_backend(p)
    add_loading(p)
    add_timing(p, iterations=20, warmup=3)
    p.set_defaults(command_fn=run)
