"""The timing_cache option's file: TensorRT's kernel timings, read before a build and written back
after it, so that builds on this machine and others with the same GPU and TensorRT skip timing
what was timed once (docs/build-options.md). Without it the timings stay in the engine cache.

What TensorRT cannot use (corrupt, another version's, another GPU's) is refused by trt_builder.py
with a TimingCacheError naming the file, never overwritten: the file was given on purpose and may be
another machine's. Writes are atomic (a temporary file renamed over it), so concurrent lowerings
sharing the file leave a whole cache, the last writer's.
"""

from __future__ import annotations

import logging
from pathlib import Path

from trt_lower.engine.errors import TimingCacheError
from trt_lower.values.atomic_file import atomic_file

log = logging.getLogger("trt_lower")


def read(path: Path) -> bytes:
    """The file's bytes, or b"" (TensorRT's "start a new cache") when there is no file yet."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""
    except OSError as e:
        raise TimingCacheError(str(path), f"cannot be read ({type(e).__name__}: {e})") from e


def write(path: Path, serialized: bytes) -> None:
    """Replace the file with `serialized`; a file that cannot be written costs a warning, not the build."""
    try:
        with atomic_file(path, private=False) as f:
            f.write(serialized)
    except OSError as e:
        log.warning("trt_lower: could not write the timing cache %s (%s); the engine was built", path, e)
