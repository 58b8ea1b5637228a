"""argparse types for what `trt-lower` reads and writes: files read must be regular files,
files written go into a directory that exists, ports are ports. Each refusal names the
argument's value and what is wrong with it. And `renamed`: an option's old spelling, kept for a
release; the options several commands take, defined once (`add_...`)."""

from __future__ import annotations

import argparse
import os
import stat
import warnings
from pathlib import Path
from typing import Any

from trt_lower.values.collectives import COLLECTIVES
from trt_lower.values.settings import BACKENDS

_KINDS = [
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
]


def _not_a_file(mode: int) -> str:
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


def input_file(text: str) -> str:
    """A file to read: it exists and is a regular file (opening a FIFO would wait forever)."""
    try:
        mode = os.stat(text).st_mode
    except FileNotFoundError:
        raise argparse.ArgumentTypeError(f"{text}: no such file") from None
    except OSError as error:
        raise argparse.ArgumentTypeError(f"{text}: {error.strerror}") from None
    if not stat.S_ISREG(mode):
        raise argparse.ArgumentTypeError(f"{text} is {_not_a_file(mode)}, not a file")
    return text


def output_file(text: str) -> str:
    """A file to write: its directory exists (none is made), and it is no directory itself."""
    path = Path(text)
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: the directory {path.parent} does not exist (create it first)")
    if path.exists() and not path.is_file():
        raise argparse.ArgumentTypeError(f"{text} is {_not_a_file(path.stat().st_mode)}, not a file")
    return text


def port(text: str) -> int:
    """A TCP port, 1..65535."""
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1..65535)")
    return int(text)


class _Renamed(argparse.Action):
    """An option's former spelling: still accepted, with a warning naming the new one."""

    def __init__(self, option_strings: list[str], dest: str, *, new: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        warnings.warn(
            f"{option_string} is deprecated and goes in the next release: use {self.new}", FutureWarning, stacklevel=2
        )
        setattr(namespace, self.dest, values)


def renamed(parser: argparse.ArgumentParser, old: str, option: argparse.Action) -> None:
    """`old`, the spelling `option` had before the commands took one name per concept, kept for one
    release: hidden from --help, and warned about when used."""
    parser.add_argument(
        old,
        action=_Renamed,
        new="/".join(option.option_strings),
        dest=option.dest,
        type=option.type or str,
        metavar=option.metavar,
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
    )


def add_backend(parser: argparse.ArgumentParser) -> None:
    """`--backend`, where engines run, as every command that lowers or loads a model takes it."""
    parser.add_argument(
        "--backend", default="auto", choices=BACKENDS, help="where engines run (auto: TensorRT if usable)"
    )


def add_collectives(parser: argparse.ArgumentParser) -> None:
    """`--collectives`, where a tensor-parallel model's collectives run (lower_to_trt's collectives)."""
    parser.add_argument(
        "--collectives",
        default="eager",
        choices=COLLECTIVES,
        help="where a tensor-parallel model's collectives run: eager (between engines, through torch.distributed) "
        "or engine (inside TensorRT 11 engines, over NCCL)",
    )


def add_draw(parser: argparse.ArgumentParser) -> None:
    """`--draw PATH`, the picture of the split, as every command that lowers takes it."""
    parser.add_argument(
        "--draw", metavar="PATH", type=output_file, help="write a picture of the split (.svg, .png, .html or .dot)"
    )


def add_timing(p: argparse.ArgumentParser, *, iterations: int, warmup: int) -> None:
    """`--iterations` (formerly `--iters`) and `--warmup`, as every timing command takes them."""
    renamed(p, "--iters", p.add_argument("--iterations", type=int, default=iterations, help="timed calls"))
    p.add_argument("--warmup", type=int, default=warmup, help="untimed calls first")


def _byte_count(text: str) -> int:
    """A positive number of bytes, as an int (load's max_eager_allocation)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of bytes")
    return int(text)


def add_loading(parser: argparse.ArgumentParser) -> None:
    """`--trusted-key PEM` (repeatable) and `--max-eager-allocation BYTES`, as every command that
    loads a saved model takes them (load's trusted_keys and max_eager_allocation)."""
    parser.add_argument(
        "--trusted-key",
        action="append",
        metavar="PEM",
        type=input_file,
        help="a trusted Ed25519 public key: only files signed by one of these load (repeatable; "
        "default: the keys $TRT_LOWER_TRUSTED_KEYS lists, else unsigned files load too)",
    )
    parser.add_argument(
        "--max-eager-allocation",
        type=_byte_count,
        metavar="BYTES",
        help="the most bytes one call of an eager node may allocate from sizes computed at run time "
        "(default: trt_lower.load's, 2 GiB)",
    )


def loading(args: argparse.Namespace) -> dict[str, Any]:
    """trt_lower.load's trusted_keys and max_eager_allocation from add_loading's options (the
    budget's default imported only once a model is loaded: with the parser, it would import torch
    for --help)."""
    from trt_lower.deploy.allocations import DEFAULT_MAX_EAGER_ALLOCATION

    given: int | None = args.max_eager_allocation
    return {
        "trusted_keys": args.trusted_key,
        "max_eager_allocation": DEFAULT_MAX_EAGER_ALLOCATION if given is None else given,
    }
