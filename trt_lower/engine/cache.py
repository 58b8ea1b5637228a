"""On-disk engine cache: one file per serialized engine, keyed by everything the plan depends on.

A plan is tied to the TensorRT version and the GPU it was built on, and to the network (ONNX bytes,
weights included), the input profiles and the builder options: the key hashes all of them. Each
file is an envelope — magic, a JSON header (what the plan was built from: the hashes of the exact
graph, its weights and the build options; TensorRT version, device, size and SHA-256 of the
payload), the payload — so a truncated, corrupted or foreign entry, or one built from another
graph than the one being built, is detected, discarded with a warning and rebuilt instead of being
handed to TensorRT. The header and the size it declares are checked before the payload is read
(a huge entry that is not ours costs no memory), and an entry that cannot be read (an I/O error,
no memory for it) is discarded and rebuilt too: a bad entry costs one rebuild, not every lowering.

The directory may be shared or planted, and TensorRT runs whatever plan it is given, so only
entries the current user wrote are used (docs/security.md). The directory is created private
(0700); one owned by another user or writable by others (group or world) is refused with one
warning, and engines are built without it; an entry owned by another user, writable by others, a
symbolic link or a special file is discarded with a warning and rebuilt. Writes go to a temporary
file renamed into place, so a crash or a concurrent lowering never leaves a half-written entry
behind (a killed writer's temporary file is deleted by the next write of that entry, once it is
old), and `exclusive(key)` (a lock file per key) lets one process build an engine while the others
lowering the same model wait and then load it; a wait past a few seconds is logged, naming the
holder (its process id, host and start, which it records beside the lock), and a wait is given up
after $TRT_LOWER_CACHE_LOCK_TIMEOUT seconds (default 10 minutes): then the engine is built without
the lock. A directory
that cannot be written (read-only, full, not a directory) costs one warning: lowering goes on,
building without caching.
The TensorRT timing cache (kernel timings, which speed up later builds) is kept beside the engines.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import socket
import stat
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO, Iterator, Sequence

import filelock

from converters.core.segment import OnnxSegment
from trt_lower.engine.build_options import BuildOptions, InputProfile
from trt_lower.values.atomic_file import write_atomic
from trt_lower.values.digest import Hashing

log = logging.getLogger("trt_lower")

ENV_VAR = "TRT_LOWER_CACHE_DIR"
MAGIC = b"trt_lower cache\n"
# 2: 8.x plans share their optimization profile between execution contexts. 3: keyed on the graph
# and its weights hashed apart (not on the self-contained ONNX). 4: the header records what the
# plan was built from (graph, weights, build), checked before use. 5: plans are built with
# DETAILED profiling verbosity (their layers described for LoweredModule.profile).
FORMAT = 5
_LENGTH_BYTES = 4
# A header is a few hundred bytes of JSON: a longer one is not ours, and is not read.
_MAX_HEADER_BYTES = 1 << 16
# How long a lowering waits for another process building the same engine before building it too
# (TensorRT builds take minutes; a holder that hangs must not hang everyone else for ever; set by
# LOCK_TIMEOUT_VAR), and after how long the wait is logged (so that a hung holder is seen, not
# waited on in silence).
LOCK_TIMEOUT_VAR = "TRT_LOWER_CACHE_LOCK_TIMEOUT"
LOCK_TIMEOUT_S = 600.0
LOCK_REPORT_S = 5.0
# The refused directories this process has warned about (once each).
_refused_dirs: set[tuple[Path, str]] = set()
# What the timing cache is "built from": no one engine (its file name and header name the TensorRT
# version and device).
_TIMING = {"timing cache": "kernel timings"}


@dataclass(frozen=True)
class Key:
    """What an engine is built from, as SHA-256 hex digests: its exact ONNX graph, its weights'
    bytes, and the build (options, profiles, TensorRT version, device). The entry's file is named
    by a hash of the three, and its header records them, checked before the entry is used."""

    graph: str
    weights: str
    build: str

    @property
    def name(self) -> str:
        return hashlib.sha256(f"{self.graph}\0{self.weights}\0{self.build}".encode()).hexdigest()

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def refusal(status: os.stat_result, *, directory: bool = False) -> str | None:
    """Why a cache directory (or entry) with `status` may hold what someone else wrote, or None."""
    if directory and not stat.S_ISDIR(status.st_mode):
        return "not a directory"
    if not directory and not stat.S_ISREG(status.st_mode):
        return "not a regular file"
    if os.name != "posix":  # no owner ids, and the mode bits say little
        return None
    if status.st_uid != os.getuid():
        return f"owned by uid {status.st_uid}, not by this user (uid {os.getuid()})"
    if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"writable by others (mode {stat.S_IMODE(status.st_mode):o})"
    return None


def default_dir() -> Path:
    """$TRT_LOWER_CACHE_DIR, else the user's cache dir ($XDG_CACHE_HOME or ~/.cache)/trt_lower."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trt_lower"


class EngineCache:
    """The entries of one cache directory for one TensorRT version on one device."""

    def __init__(self, root: Path, tensorrt_version: str, device: str) -> None:
        self.root = root
        self.tensorrt_version = tensorrt_version
        self.device = device
        self._unwritable: str | None = None
        self._refused: str | None = None  # the directory: nothing is read from it or written to it
        self._checked = False

    def key(self, segment: OnnxSegment, profiles: Sequence[Sequence[InputProfile]], options: BuildOptions) -> Key:
        """The entry of a segment built with `profiles` (per optimization profile, each input's
        range) and `options`: hashes of those, of the graph and of the weights' bytes (hashed
        where they lie, not serialized first)."""
        # One profile hashes as its inputs' list, as before several were possible: existing
        # entries stay valid.
        ranges = [[asdict(p) for p in profile] for profile in profiles]
        build = {
            "format": FORMAT,
            "tensorrt": self.tensorrt_version,
            "device": self.device,
            "profiles": ranges[0] if len(ranges) == 1 else ranges,
            "settings": options.as_dict(),  # the key's name is hashed into every entry
        }
        weights = Hashing()
        segment.write_weights(weights)
        return Key(
            hashlib.sha256(segment.graph_bytes("")).hexdigest(),
            weights.hexdigest(),
            hashlib.sha256(json.dumps(build, sort_keys=True).encode()).hexdigest(),
        )

    def engine_path(self, key: Key) -> Path:
        return self.root / f"{key.name}.engine"

    @property
    def timing_cache_path(self) -> Path:
        # Kernel timings are only valid for one TensorRT version on one GPU model.
        tag = hashlib.sha256(f"{self.tensorrt_version}\0{self.device}".encode()).hexdigest()[:16]
        return self.root / f"timing-{tag}.cache"

    @contextlib.contextmanager
    def exclusive(self, key: Key) -> Iterator[None]:
        """Held while looking `key` up and building it: concurrent lowerings of the same engine
        (other processes or threads) wait, then find the entry the first one stored."""
        lock = filelock.FileLock(self.root / f"{key.name}.lock")
        locked = False
        try:
            locked = self._usable() and _acquire(lock, lock_timeout())
            if locked:
                write_atomic(_holder_path(lock), _holder().encode())
        except OSError as e:
            self._cannot_write(e)
        try:
            yield
        finally:
            if locked:
                _holder_path(lock).unlink(missing_ok=True)
                lock.release()

    def load(self, key: Key) -> bytes | None:
        """The cached plan for `key`, or None (absent, or refused or discarded with a warning)."""
        return self._read(self.engine_path(key), key.as_dict())

    def store(self, key: Key, plan: bytes) -> None:
        self._write(self.engine_path(key), key.as_dict(), plan)

    def discard(self, key: Key, why: str) -> None:
        self._discard(self.engine_path(key), why)

    def load_timing_cache(self) -> bytes:
        """The serialized timing cache, or b"" (TensorRT's "start a new one")."""
        return self._read(self.timing_cache_path, _TIMING) or b""

    def store_timing_cache(self, data: bytes) -> None:
        self._write(self.timing_cache_path, _TIMING, data)

    # -- the directory ------------------------------------------------------------------------
    def _usable(self) -> bool:
        """Whether the directory may be used: made private if absent; refused (one warning, and
        nothing read from or written to it) when someone else may have written in it."""
        if not self._checked:
            self._checked = True
            try:
                self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
                self._refused = refusal(self.root.stat(), directory=True)
            except OSError as e:
                self._cannot_write(e)
                self._refused = str(e)
            else:
                if self._refused is not None and (self.root, self._refused) not in _refused_dirs:
                    _refused_dirs.add((self.root, self._refused))
                    log.warning(
                        "trt_lower: refusing the engine cache %s (%s: whoever can write there could "
                        "plant engines); building engines without it",
                        self.root,
                        self._refused,
                    )
        return self._refused is None

    # -- envelope ---------------------------------------------------------------------------
    def _header(self, built_from: dict[str, str], payload: bytes) -> dict[str, object]:
        return {
            "format": FORMAT,
            "built_from": built_from,
            "tensorrt": self.tensorrt_version,
            "device": self.device,
            "size": len(payload),
            "sha256": hashlib.sha256(payload).hexdigest(),
        }

    def _write(self, path: Path, built_from: dict[str, str], payload: bytes) -> None:
        if not self._usable() or self._unwritable is not None:
            return
        header = json.dumps(self._header(built_from, payload), sort_keys=True).encode()
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

    def _read(self, path: Path, built_from: dict[str, str]) -> bytes | None:
        if not self._usable():
            return None
        try:
            payload, problem = self._entry(path, built_from)
        except FileNotFoundError:
            return None
        except (OSError, MemoryError) as e:  # the entry is ours but cannot be read: it would fail every time
            payload, problem = b"", f"unreadable: {type(e).__name__}: {e}"
        if problem is not None:
            self._discard(path, problem)
            return None
        return payload

    def _entry(self, path: Path, built_from: dict[str, str]) -> tuple[bytes, str | None]:
        """The entry's payload, or why it is not used: refused, or its header (read first, alone)
        not this entry's, or its payload not what the header declares."""
        with _open_own(path) as file:
            if isinstance(file, str):
                return b"", f"{file}: someone else may have written it"
            header, problem = self._check_header(file, built_from)
            if problem is not None:
                return b"", problem
            payload = file.read()
        if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
            return b"", "checksum mismatch (corrupted)"
        return payload, None

    def _check_header(self, file: BinaryIO, built_from: dict[str, str]) -> tuple[dict[str, object], str | None]:
        """The entry's header, checked; `file` left at the payload, whose size is the header's."""
        size = os.fstat(file.fileno()).st_size
        start = len(MAGIC) + _LENGTH_BYTES
        prefix = file.read(start)
        if not prefix.startswith(MAGIC) or len(prefix) != start:
            return {}, "not a trt_lower cache file"
        length = int.from_bytes(prefix[len(MAGIC) :], "big")
        try:
            header = json.loads(file.read(length)) if length <= min(_MAX_HEADER_BYTES, size - start) else None
        except ValueError:
            header = None
        if not isinstance(header, dict):
            return {}, "unreadable header (truncated or corrupted)"
        expected = {"format": FORMAT, "tensorrt": self.tensorrt_version, "device": self.device}
        for field, value in expected.items():
            if header.get(field) != value:
                return {}, f"its {field} is {header.get(field)!r}, expected {value!r}"
        recorded = header.get("built_from")
        for part, digest in built_from.items():
            found = recorded.get(part) if isinstance(recorded, dict) else None
            if found != digest:
                return {}, f"its {part} hash is {found!r}, expected {digest!r} (it was built from something else)"
        if size - start - length != header.get("size"):
            return (
                {},
                f"truncated or padded: {size - start - length} bytes of payload, its header says {header.get('size')!r}",
            )
        return header, None

    def _discard(self, path: Path, why: str) -> None:
        log.warning("trt_lower: discarding cache entry %s (%s); it will be rebuilt", path, why)
        try:
            path.unlink(missing_ok=True)
        except OSError as e:
            self._cannot_write(e)


@contextlib.contextmanager
def _open_own(path: Path) -> Iterator[BinaryIO | str]:
    """The entry at `path`, open, or why it is refused (`refusal`, checked on the open file). A
    symbolic link is not followed and a FIFO not waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        yield "a symbolic link"
        return
    with os.fdopen(fd, "rb") as file:
        yield refusal(os.fstat(fd)) or file


def lock_timeout() -> float:
    """How long to wait for another process's lock: $TRT_LOWER_CACHE_LOCK_TIMEOUT seconds, else LOCK_TIMEOUT_S."""
    text = os.environ.get(LOCK_TIMEOUT_VAR, "").strip()
    if not text:
        return LOCK_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise ValueError(f"${LOCK_TIMEOUT_VAR} is {text[:40]!r}; it takes a number of seconds (0 or more)")
    return seconds


def _holder_path(lock: filelock.FileLock) -> Path:
    # Beside the lock file, not in it: a waiter opening the lock file truncates it.
    return Path(f"{lock.lock_file}.holder")


def _holder() -> str:
    return f"process {os.getpid()} on {socket.gethostname()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}"


def _holder_of(lock: filelock.FileLock) -> str:
    """Who holds `lock`, as it recorded itself (a bounded read; refused like an entry), or why unknown."""
    try:
        with _open_own(_holder_path(lock)) as file:
            text = "" if isinstance(file, str) else file.read(200).decode("utf-8", "replace")
    except OSError:
        text = ""
    shown = "".join(c if c.isprintable() else "?" for c in text.strip())
    return shown or "a process that did not record itself (not trt_lower, or an older one)"


def _acquire(lock: filelock.FileLock, timeout: float) -> bool:
    """Take `lock`, waiting for its holder: after LOCK_REPORT_S the wait is logged, naming the
    holder; after `timeout` it is given up (False: build without it)."""
    try:
        lock.acquire(timeout=min(LOCK_REPORT_S, timeout))
        return True
    except filelock.Timeout:
        log.warning(
            "trt_lower: the engine cache lock %s is held by %s (building the same engine, or hung); "
            "waited %g s, waiting up to %g s more (%s), then building without it",
            lock.lock_file,
            _holder_of(lock),
            min(LOCK_REPORT_S, timeout),
            max(timeout - LOCK_REPORT_S, 0),
            LOCK_TIMEOUT_VAR,
        )
    try:
        lock.acquire(timeout=max(timeout - LOCK_REPORT_S, 0))
        return True
    except filelock.Timeout:
        log.warning(
            "trt_lower: waited %g s for the engine cache lock %s (held by %s); building without it",
            timeout,
            lock.lock_file,
            _holder_of(lock),
        )
        return False
