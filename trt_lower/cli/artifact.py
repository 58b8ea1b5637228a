"""`trt-lower lower | info | run`: make an artifact, show what is inside one, run one."""

from __future__ import annotations

import argparse
import importlib
import re
import time
from pathlib import Path
from typing import Any, Sequence

import torch

import trt_lower
from trt_lower.benchmarking import models as demo_models
from trt_lower.cli import distributed as cli_distributed
from trt_lower.cli.arguments import input_file, output_file
from trt_lower.cli.dispatch import UsageError
from trt_lower.deploy import artifact, signing
from trt_lower.deploy.container import open_file
from trt_lower.lowering_options import BACKENDS, PRECISIONS, TRT_VERSIONS
from trt_lower.runtime.guard import InputGuard

_SHAPE = re.compile(r"^(\d+(?:x\d+)*)?(?::([a-z0-9]+))?$")
_DYNAMIC = re.compile(r"^(\d+)\.(\d+)=(\d+)\.\.(\d+)$")


def _parse_input(text: str) -> tuple[tuple[int, ...], torch.dtype]:
    """'1x3x224x224:float32' (dtype defaults to float32; '' or ':int64' is a scalar)."""
    match = _SHAPE.match(text)
    dtype = getattr(torch, match[2] or "float32", None) if match else None
    if match is None or not isinstance(dtype, torch.dtype):
        raise UsageError(f"--input {text!r}: expected SHAPE[:DTYPE], e.g. 1x3x224x224:float32 or 2x128:int64")
    return tuple(int(d) for d in match[1].split("x")) if match[1] else (), dtype


def _example(shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """A random tensor; integers in {0, 1} (valid indices of any embedding table)."""
    if dtype.is_floating_point:
        return torch.randn(tuple(shape)).to(dtype)
    return torch.randint(0, 2, tuple(shape)).to(dtype)


def _specs(inputs: list[str], dynamic: list[str]) -> list[trt_lower.TensorSpec]:
    """One spec per --input (static), with --dynamic INPUT.DIM=MIN..MAX ranges (opt: the --input size)."""
    parsed = [_parse_input(text) for text in inputs]
    ranges: dict[int, dict[int, tuple[int, int]]] = {}
    for text in dynamic:
        match = _DYNAMIC.match(text)
        if match is None:
            raise UsageError(f"--dynamic {text!r}: expected INPUT.DIM=MIN..MAX, e.g. 0.0=1..32")
        index, dim, low, high = (int(g) for g in match.groups())
        if index >= len(parsed) or dim >= len(parsed[index][0]):
            raise UsageError(f"--dynamic {text!r}: there is no input {index} with a dim {dim}")
        ranges.setdefault(index, {})[dim] = (low, high)
    specs = []
    for index, (shape, dtype) in enumerate(parsed):
        dims = ranges.get(index, {})
        lows = [dims.get(i, (d, d))[0] for i, d in enumerate(shape)]
        highs = [dims.get(i, (d, d))[1] for i, d in enumerate(shape)]
        try:
            specs.append(trt_lower.TensorSpec(lows, shape, highs, dtype))
        except ValueError as e:
            raise UsageError(f"input {index}: {e}") from None
    return specs


def _factory_model(path: str) -> torch.nn.Module:
    """`package.module:function`, called without arguments, must return an nn.Module."""
    module_name, _, name = path.partition(":")
    if not module_name or not name:
        raise UsageError(f"{path!r}: expected MODULE:FACTORY, e.g. my_pkg.models:make_model")
    factory = getattr(importlib.import_module(module_name), name, None)
    if not callable(factory):
        raise UsageError(f"{path!r}: {module_name} has no callable {name}")
    model = factory()
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"{path!r} returned {type(model).__name__}, not a torch.nn.Module")
    return model.eval()


def lower(args: argparse.Namespace) -> int:
    torch.manual_seed(0)
    inputs: Sequence[Any]
    if args.model is not None:
        if args.factory or args.input or args.dynamic:
            raise UsageError("--model takes its inputs from the demo model; no FACTORY, --input or --dynamic")
        model, inputs = demo_models.build(args.model, args.batch)
    elif args.factory:
        if not args.input:
            raise UsageError("a FACTORY needs its inputs: --input SHAPE[:DTYPE], once per forward argument")
        model = _factory_model(args.factory)
        specs = _specs(args.input, args.dynamic or [])
        inputs = [s if s.dynamic_dims else _example(s.opt_shape, s.dtype) for s in specs]
    else:
        raise UsageError("name a model: --model NAME (a demo model) or MODULE:FACTORY with --input")
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
    print(f"lowered in {time.perf_counter() - start:.1f} s")
    print(lowered.report)
    if args.draw:
        print(f"picture of the split: {lowered.report.draw(args.draw)}")
    trt_lower.save(lowered, args.output)
    print(f"saved {args.output}")
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
    from trt_lower.values import device

    where = device.current().torch_device() if lowered.report.backend == "tensorrt" else torch.device("cpu")
    guard = lowered.get_submodule(artifact.GUARD)
    assert isinstance(guard, InputGuard)
    return [_example(sig.opt_shape, sig.dtype).to(where) for sig in guard.inputs]


def run(args: argparse.Namespace) -> int:
    with cli_distributed.joined(args):  # under torchrun: this rank of its job
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    lowered = trt_lower.load(args.file, backend=args.backend)
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
        iterations=args.iters,
        compare=("lowered",),
        cv_threshold=float("inf"),
    )
    print(f"median latency over {args.iters} runs: {result.runs[0].latency_ms.median:.2f} ms")
    return 0


def add_commands(sub: Any) -> None:
    """Register `lower`, `info` and `run` on the CLI's subparsers."""
    p = sub.add_parser("lower", help="lower a model and save it as one file (load it with trt_lower.load)")
    p.add_argument("factory", nargs="?", help="MODULE:FACTORY, a function returning your nn.Module")
    p.add_argument("--model", choices=sorted(demo_models.MODELS), help="a demo model instead of a FACTORY")
    p.add_argument("--batch", type=int, default=1, help="batch of the demo model's input")
    p.add_argument("--input", action="append", help="SHAPE[:DTYPE] per forward argument, e.g. 1x3x224x224:float32")
    p.add_argument(
        "--dynamic",
        action="append",
        help="INPUT.DIM=MIN..MAX: dim DIM of input INPUT takes any size in range (opt: --input's)",
    )
    p.add_argument(
        "-o", "--output", required=True, type=output_file, help="the file to write (.trtl), in a directory that exists"
    )
    p.add_argument("--backend", default="auto", choices=BACKENDS)
    p.add_argument("--precision", default="fp32", choices=PRECISIONS)
    p.add_argument("--trt-version", default=None, choices=TRT_VERSIONS)
    p.add_argument("--min-block-size", type=int, default=3)
    p.add_argument("--fallback-op", action="append", help="ATen op to keep in eager, e.g. aten.relu.default")
    p.add_argument(
        "--draw", metavar="PATH", type=output_file, help="write a picture of the split (.svg, .png, .html or .dot)"
    )
    p.set_defaults(command_fn=lower)

    p = sub.add_parser("info", help="show an artifact's versions, inputs, engines, TensorRT plans and report")
    p.add_argument("file", type=input_file)
    p.set_defaults(command_fn=info)

    p = sub.add_parser("run", help="load an artifact, run it on random inputs of its shapes, print latency")
    p.add_argument("file", type=cli_distributed.rank_file, help="`{rank}` in it: torchrun's RANK")
    cli_distributed.add_arguments(p)
    p.add_argument("--backend", default="auto", choices=BACKENDS)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.set_defaults(command_fn=run)
