"""argparse types for what `trt-lower` reads and writes: files read must be regular files,
files written go into a directory that exists, ports are ports. Each refusal names the
argument's value and what is wrong with it."""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path

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
