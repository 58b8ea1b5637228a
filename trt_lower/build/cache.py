"""On-disk engine cache: one file per serialized engine, keyed by everything the plan depends on.

A plan is tied to the TensorRT version and the GPU it was built on, and to the network (ONNX bytes,
weights included), the input profiles and the builder settings: the key hashes all of them. Each
file is an envelope — magic, a JSON header (key, TensorRT version, device, size and SHA-256 of the
payload), the payload — so a truncated, corrupted or foreign entry is detected, discarded with a
warning and rebuilt instead of being handed to TensorRT. Writes go to a temporary file renamed
into place, so a crash or a concurrent lowering never leaves a half-written entry behind (a killed
writer's temporary file is deleted by the next write of that entry, once it is old), and
`exclusive(key)` (a lock file per key) lets one process build an engine while the others lowering
the same model wait and then load it. A directory that cannot be written (read-only, full, not a
directory) costs one warning: lowering goes on, building without caching.
The TensorRT timing cache (kernel timings, which speed up later builds) is kept beside the engines.
"""
from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import logging
import os
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import BinaryIO, Iterator, Sequence

import filelock

from converters.core.segment import OnnxSegment
from trt_lower.build.settings import BuildSettings, InputProfile
from trt_lower.values.digest import Hashing

log = logging.getLogger("trt_lower")

ENV_VAR = "TRT_LOWER_CACHE_DIR"
MAGIC = b"trt_lower cache\n"
# 2: 8.x plans share their optimization profile between execution contexts. 3: keyed on the graph
# and its weights hashed apart (not on the self-contained ONNX).
FORMAT = 3
_LENGTH_BYTES = 4
# How long a lowering waits for another process building the same engine before building it too
# (TensorRT builds take minutes; a holder that hangs must not hang everyone else for ever).
LOCK_TIMEOUT_S = 1800.0


def default_dir() -> Path:
    """$TRT_LOWER_CACHE_DIR, else the user's cache dir ($XDG_CACHE_HOME or ~/.cache)/trt_lower."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trt_lower"


def _temporary_prefix(path: Path) -> str:
    return f".{path.name}."


def _remove_stale_temporaries(path: Path) -> None:
    """Delete what writers of `path` that were killed mid-write left (plans are large). Only
    files older than the lock time-out: no live writer takes that long to write one."""
    now = time.time()
    for tmp in path.parent.glob(f"{glob.escape(_temporary_prefix(path))}*.tmp"):
        with contextlib.suppress(OSError):  # another process cleaning up, or not ours to remove
            if now - tmp.stat().st_mtime > LOCK_TIMEOUT_S:
                tmp.unlink()


@contextlib.contextmanager
def atomic_file(path: Path) -> Iterator[BinaryIO]:
    """A file to write `path` through: a temporary file in the same directory, renamed over `path`
    once the block ends without an error (an interrupted write leaves the old file, or none)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_temporary_prefix(path), suffix=".tmp")
    try:
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


class EngineCache:
    """The entries of one cache directory for one TensorRT version on one device."""

    def __init__(self, root: Path, tensorrt_version: str, device: str) -> None:
        self.root = root
        self.tensorrt_version = tensorrt_version
        self.device = device
        self._unwritable: str | None = None

    def key(self, segment: OnnxSegment, profiles: Sequence[InputProfile], settings: BuildSettings) -> str:
        """The entry of a segment built with `profiles` and `settings`: a hash of those, of the
        graph and of the weights' bytes (hashed where they lie, not serialized first)."""
        meta = {
            "format": FORMAT,
            "tensorrt": self.tensorrt_version,
            "device": self.device,
            "profiles": [asdict(p) for p in profiles],
            "settings": settings.as_dict(),
        }
        digest = Hashing()
        digest.write(json.dumps(meta, sort_keys=True).encode())
        digest.write(segment.graph_bytes(""))
        segment.write_weights(digest)
        return digest.hexdigest()

    def engine_path(self, key: str) -> Path:
        return self.root / f"{key}.engine"

    @property
    def timing_cache_path(self) -> Path:
        # Kernel timings are only valid for one TensorRT version on one GPU model.
        tag = hashlib.sha256(f"{self.tensorrt_version}\0{self.device}".encode()).hexdigest()[:16]
        return self.root / f"timing-{tag}.cache"

    @contextlib.contextmanager
    def exclusive(self, key: str) -> Iterator[None]:
        """Held while looking `key` up and building it: concurrent lowerings of the same engine
        (other processes or threads) wait, then find the entry the first one stored."""
        lock = filelock.FileLock(self.root / f"{key}.lock", timeout=LOCK_TIMEOUT_S)
        locked = False
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            lock.acquire()
            locked = True
        except filelock.Timeout:  # before OSError: it is one
            log.warning("trt_lower: waited %.0f s for the engine cache lock %s; building without it",
                        LOCK_TIMEOUT_S, lock.lock_file)
        except OSError as e:
            self._cannot_write(e)
        try:
            yield
        finally:
            if locked:
                lock.release()

    def load(self, key: str) -> bytes | None:
        """The cached plan for `key`, or None (absent, or discarded with a warning)."""
        return self._read(self.engine_path(key), key)

    def store(self, key: str, plan: bytes) -> None:
        self._write(self.engine_path(key), key, plan)

    def discard(self, key: str, why: str) -> None:
        self._discard(self.engine_path(key), why)

    def load_timing_cache(self) -> bytes:
        """The serialized timing cache, or b"" (TensorRT's "start a new one")."""
        return self._read(self.timing_cache_path, "timing") or b""

    def store_timing_cache(self, data: bytes) -> None:
        self._write(self.timing_cache_path, "timing", data)

    # -- envelope ---------------------------------------------------------------------------
    def _header(self, key: str, payload: bytes) -> dict[str, object]:
        return {
            "format": FORMAT,
            "key": key,
            "tensorrt": self.tensorrt_version,
            "device": self.device,
            "size": len(payload),
            "sha256": hashlib.sha256(payload).hexdigest(),
        }

    def _write(self, path: Path, key: str, payload: bytes) -> None:
        if self._unwritable is not None:
            return
        header = json.dumps(self._header(key, payload), sort_keys=True).encode()
        try:
            write_atomic(path, MAGIC + len(header).to_bytes(_LENGTH_BYTES, "big") + header + payload)
        except OSError as e:
            self._cannot_write(e, path)

    def _cannot_write(self, error: OSError, path: Path | None = None) -> None:
        """Warn once; the engines still run, only the next lowering pays for the builds again."""
        if self._unwritable is None:
            what = f"the engine cache entry {path}" if path is not None else f"to the engine cache {self.root}"
            log.warning("trt_lower: could not write %s: %s; lowering goes on without caching", what, error)
        self._unwritable = str(error)

    def _read(self, path: Path, key: str) -> bytes | None:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            log.warning("trt_lower: could not read the engine cache entry %s: %s; building it", path, e)
            return None
        payload, problem = self._unpack(data, key)
        if problem is not None:
            self._discard(path, problem)
            return None
        return payload

    def _unpack(self, data: bytes, key: str) -> tuple[bytes, str | None]:
        if not data.startswith(MAGIC):
            return b"", "not a trt_lower cache file"
        start = len(MAGIC) + _LENGTH_BYTES
        length = int.from_bytes(data[len(MAGIC):start], "big")
        try:
            header = json.loads(data[start:start + length])
        except ValueError:
            header = None
        if not isinstance(header, dict):
            return b"", "unreadable header (truncated or corrupted)"
        payload = data[start + length:]
        expected = {"format": FORMAT, "key": key, "tensorrt": self.tensorrt_version, "device": self.device}
        for field, value in expected.items():
            if header.get(field) != value:
                return b"", f"its {field} is {header.get(field)!r}, expected {value!r}"
        if len(payload) != header.get("size"):
            return b"", f"truncated: {len(payload)} of {header.get('size')} bytes"
        if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
            return b"", "checksum mismatch (corrupted)"
        return payload, None

    def _discard(self, path: Path, why: str) -> None:
        log.warning("trt_lower: discarding cache entry %s (%s); it will be rebuilt", path, why)
        try:
            path.unlink(missing_ok=True)
        except OSError as e:
            self._cannot_write(e)
