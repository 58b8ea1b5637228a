"""Files written whole or not at all: a temporary file beside the target, renamed over it once
complete. The engine cache, saved models and signed copies write through it; it imports nothing of
the stages, so the key and signing commands stay light."""

from __future__ import annotations

import contextlib
import glob
import os
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import BinaryIO, Iterator

# A killed writer's temporary file is deleted once older than this: no live writer takes that long.
_STALE_TEMPORARY_S = 1800.0


def _temporary_prefix(path: Path) -> str:
    return f".{path.name}."


def _remove_stale_temporaries(path: Path) -> None:
    """Delete what writers of `path` that were killed mid-write left (plans are large), once old."""
    now = time.time()
    for tmp in path.parent.glob(f"{glob.escape(_temporary_prefix(path))}*.tmp"):
        with contextlib.suppress(OSError):  # another process cleaning up, or not ours to remove
            if now - tmp.stat().st_mtime > _STALE_TEMPORARY_S:
                tmp.unlink()


_UMASK_LOCK = threading.Lock()


def _umask() -> int:
    with _UMASK_LOCK:  # reading the umask means setting it: no other thread of ours may see 0 meanwhile
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


def _check_replaceable(path: Path) -> None:
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise FileExistsError(f"{path} exists and is not a regular file (a FIFO, device or directory): not replaced")


@contextlib.contextmanager
def atomic_file(path: Path, *, private: bool = True) -> Iterator[BinaryIO]:
    """A file to write `path` through: a temporary file in the same directory, renamed over `path`
    once the block ends without an error (an interrupted write leaves the old file, or none).

    private: readable and writable by its owner only (engine cache entries, which the cache refuses
    when others may write them); else the mode a plain `open` gives, by the umask (a saved model
    that a server running as another user must read).

    Only a regular file is replaced: the rename would put the file in place of a FIFO or a device
    (as root, /dev/null), so anything else at `path` is refused before a byte is written."""
    _check_replaceable(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_temporary_prefix(path), suffix=".tmp")
    try:
        if not private:
            os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w+b") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: Path, data: bytes) -> None:
    with atomic_file(path) as f:
        f.write(data)
