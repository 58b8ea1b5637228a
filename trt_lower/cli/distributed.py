"""`trt-lower` under torchrun: a command that loads a model joins the job torchrun started (its
RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT), so that each rank loads its own file
(`model.rank{rank}.trtl`) and the collectives between engines run (docs/distributed.md)."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
from typing import Any, Iterator

from trt_lower.cli.arguments import input_file


def _world_size() -> int:
    text = os.environ.get("WORLD_SIZE", "1")
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"WORLD_SIZE={text!r} is not a number of processes")
    return int(text)


def rank_file(text: str) -> str:
    """An artifact to read, `{rank}` in its name replaced by torchrun's RANK (0 outside torchrun)."""
    return input_file(text.replace("{rank}", os.environ.get("RANK", "0")))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--collective-timeout",
        type=float,
        metavar="SECONDS",
        help="under torchrun: how long a collective waits for the other ranks before failing "
        "(default: torch.distributed's, 30 minutes on gloo, 10 on NCCL)",
    )


@contextlib.contextmanager
def joined(args: argparse.Namespace) -> Iterator[None]:
    """Inside: this process is its rank of torchrun's job (gloo on CPUs, NCCL on GPUs, its GPU the
    LOCAL_RANKth) when WORLD_SIZE > 1; nothing is done for a single process."""
    if _world_size() == 1:
        yield
        return
    import torch
    import torch.distributed as dist

    options: dict[str, Any] = {}
    if args.collective_timeout is not None:
        options["timeout"] = datetime.timedelta(seconds=args.collective_timeout)
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", **options)
    try:
        yield
    finally:
        dist.destroy_process_group()
