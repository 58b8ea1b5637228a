"""The engine cache against what others may have put in it (TensorRT double): another model's
engine planted under this model's key, a directory or entry owned by someone else or writable by
others, a link or a FIFO for an entry, a lock held by a hung process."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

import pytest
import torch
from reliability_workers import SHAPES, Mixed, lower_static_and_check
from trt_double.activate import trt_double as use_trt_double

import trt_lower
from trt_lower.engine import cache as engine_cache
from trt_lower.engine.cache import MAGIC, EngineCache, Key

KEY = Key("graph", "weights", "build")
ROOT = os.name == "posix" and os.geteuid() == 0
OTHER_UID = 4242


def _lower_and_check(expect_hits: list[bool]) -> None:
    """`Mixed` lowered on TensorRT (the double), compared with eager; which engines came from the cache."""
    assert [e.cache_hit for e in lower_static_and_check("tensorrt").report.engines] == expect_hits


def _cache_dir() -> Path:
    return Path(os.environ["TRT_LOWER_CACHE_DIR"])


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache directory holding the entries of `Mixed`'s two engines (TensorRT double 10.13.0)."""
    cache = tmp_path_factory.mktemp("warm") / "engines"
    with use_trt_double("10.13.0", cache):
        _lower_and_check([False, False])
    return cache


@pytest.fixture
def cached(trt_double: ModuleType, warm: Path) -> Path:
    """The TensorRT double, its cache directory holding `Mixed`'s entries."""
    shutil.copytree(warm, _cache_dir())
    return _cache_dir()


def _built_from(entry: Path) -> dict[str, str]:
    data = entry.read_bytes()
    start = len(MAGIC) + 4
    header = json.loads(data[start : start + int.from_bytes(data[len(MAGIC) : start], "big")])
    return dict(header["built_from"])


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


# -- a planted entry ---------------------------------------------------------------------------------
def test_another_models_engine_planted_under_this_key_is_rebuilt(
    cached: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Another model of the same shape (other weights), lowered into another cache: genuine entries
    # whose envelopes agree with themselves, each copied over ours for the same engine (same profiles).
    torch.manual_seed(1)
    theirs = tmp_path / "theirs"
    trt_lower.lower_to_trt(
        Mixed().eval(),
        (torch.randn(SHAPES[2]),),
        backend="tensorrt",
        min_block_size=1,
        fallback_ops=["aten.relu.default"],
        cache_dir=theirs,
    )
    by_build = {_built_from(e)["build"]: e for e in theirs.glob("*.engine")}
    ours = sorted(_cache_dir().glob("*.engine"))
    assert len(ours) == 2 and sorted(by_build) == sorted(_built_from(e)["build"] for e in ours)
    for entry in ours:
        shutil.copyfile(by_build[_built_from(entry)["build"]], entry)
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        _lower_and_check([False, False])  # rebuilt, and the outputs are this model's (checked against eager)
    planted = [w for w in _warnings(caplog) if "it was built from something else" in w]
    assert len(planted) == 2 and all("discarding cache entry" in w for w in planted), _warnings(caplog)
    _lower_and_check([True, True])  # the rebuilt entries are ours


# -- directories and entries others may have written --------------------------------------------------
def test_a_new_cache_directory_is_private(trt_double: ModuleType) -> None:
    old = os.umask(0)  # the most permissive umask: the mode is trt_lower's own
    try:
        _lower_and_check([False, False])
    finally:
        os.umask(old)
    assert _cache_dir().stat().st_mode & 0o777 == 0o700


def _chown(path: Path) -> None:
    os.chown(path, OTHER_UID, -1, follow_symlinks=False)


@pytest.mark.parametrize(
    "attack, why",
    [
        (lambda d: d.chmod(0o777), "writable by others (mode 777)"),
        (lambda d: d.chmod(0o770), "writable by others (mode 770)"),
        pytest.param(
            _chown,
            f"owned by uid {OTHER_UID}, not by this user",
            marks=pytest.mark.skipif(not ROOT, reason="chown needs root"),
        ),
    ],
    ids=["world-writable", "group-writable", "foreign owner"],
)
def test_a_directory_others_may_write_is_refused(
    cached: Path, caplog: pytest.LogCaptureFixture, attack: Callable[[Path], None], why: str
) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in _cache_dir().iterdir()}
    attack(_cache_dir())
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        _lower_and_check([False, False])  # nothing read: both built again
    (warning,) = _warnings(caplog)  # one, for the directory
    assert f"refusing the engine cache {_cache_dir()} ({why}" in warning and "building engines without it" in warning
    assert {p.name: p.stat().st_mtime_ns for p in _cache_dir().iterdir()} == before  # nothing written


def test_a_directory_of_another_user_is_refused_without_root(
    cached: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(os, "getuid", lambda: OTHER_UID)  # this user is someone else than the owner
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        _lower_and_check([False, False])
    (warning,) = _warnings(caplog)
    assert (
        f"refusing the engine cache {cached} (owned by uid {os.geteuid()}, not by this user (uid {OTHER_UID})"
        in warning
    )


def _symlink_to_a_copy(entry: Path) -> None:
    elsewhere = entry.parent.parent / "elsewhere.engine"
    os.replace(entry, elsewhere)
    entry.symlink_to(elsewhere)


@pytest.mark.parametrize(
    "attack, why",
    [
        (lambda e: e.chmod(0o666), "writable by others (mode 666)"),
        (lambda e: e.chmod(0o620), "writable by others (mode 620)"),
        pytest.param(
            _chown,
            f"owned by uid {OTHER_UID}, not by this user",
            marks=pytest.mark.skipif(not ROOT, reason="chown needs root"),
        ),
        (_symlink_to_a_copy, "a symbolic link"),
    ],
    ids=["world-writable", "group-writable", "foreign owner", "symlink"],
)
def test_an_entry_others_may_have_written_is_refused(
    cached: Path, caplog: pytest.LogCaptureFixture, attack: Callable[[Path], None], why: str
) -> None:
    entry = sorted(_cache_dir().glob("*.engine"))[0]
    attack(entry)
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        lowered = lower_static_and_check("tensorrt")
    assert sorted(e.cache_hit is True for e in lowered.report.engines) == [False, True]
    (warning,) = _warnings(caplog)
    assert f"discarding cache entry {entry} ({why}" in warning


def test_a_fifo_for_an_entry_is_refused_not_waited_on(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = EngineCache(tmp_path / "engines", "10.13.0", "trt_double host")
    cache.store(KEY, b"plan")
    cache.engine_path(KEY).unlink()
    os.mkfifo(cache.engine_path(KEY))
    found: list[bytes | None] = []
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        reader = threading.Thread(target=lambda: found.append(cache.load(KEY)), daemon=True)
        reader.start()
        reader.join(timeout=30)
    if reader.is_alive():
        os.close(os.open(cache.engine_path(KEY), os.O_WRONLY | os.O_NONBLOCK))  # let the reader go
        pytest.fail("reading the cache waited on a FIFO")
    assert found == [None] and "(not a regular file" in caplog.text


# -- a lock held by a hung process -----------------------------------------------------------------------
_HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
open(sys.argv[2], "w").close()
time.sleep(600)
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[Callable[[Path], None]]:
    """Starts a process that takes a lock file and hangs; always ended."""
    processes: list[subprocess.Popen[bytes]] = []

    def hold(lock: Path) -> None:
        ready = tmp_path / "holding"
        processes.append(subprocess.Popen([sys.executable, "-c", _HOLDER, str(lock), str(ready)]))
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert time.monotonic() < deadline and processes[-1].poll() is None, "the holder did not start"
            time.sleep(0.05)

    yield hold
    for p in processes:
        p.kill()
        p.wait(timeout=30)


@pytest.mark.skipif(os.name != "posix", reason="the holder takes the lock with fcntl.flock")
def test_a_lock_held_by_a_hung_process_is_reported_within_seconds(
    tmp_path: Path, holder: Callable[[Path], None], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(engine_cache, "LOCK_REPORT_S", 0.5)
    monkeypatch.setenv(engine_cache.LOCK_TIMEOUT_VAR, "3")
    cache = EngineCache(tmp_path / "engines", "10.13.0", "trt_double host")
    (tmp_path / "engines").mkdir(mode=0o700)
    holder(tmp_path / "engines" / f"{KEY.name}.lock")
    start = time.time()
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        with cache.exclusive(KEY):
            entered = time.time()
    report, gave_up = caplog.records
    assert "is held by a process that did not record itself" in report.getMessage()
    assert "waited 0.5 s, waiting up to 2.5 s more (TRT_LOWER_CACHE_LOCK_TIMEOUT)" in report.getMessage()
    assert report.created - start < 2.0 <= entered - start  # reported long before the wait ends
    assert "waited 3 s for the engine cache lock" in gave_up.getMessage()


def test_a_waiter_names_the_holder_and_gives_up_when_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The default wait is bounded (it was 30 minutes), and $TRT_LOWER_CACHE_LOCK_TIMEOUT sets it.
    assert engine_cache.LOCK_TIMEOUT_S <= 600
    monkeypatch.setattr(engine_cache, "LOCK_REPORT_S", 0.2)
    monkeypatch.setenv(engine_cache.LOCK_TIMEOUT_VAR, "0.5")
    holding, done = threading.Event(), threading.Event()

    def hold() -> None:  # another lowering of the same engine: a lock of its own on the same file
        with EngineCache(tmp_path / "engines", "10.13.0", "trt_double host").exclusive(KEY):
            holding.set()
            done.wait(timeout=60)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    try:
        assert holding.wait(timeout=30)
        start = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="trt_lower"):
            with EngineCache(tmp_path / "engines", "10.13.0", "trt_double host").exclusive(KEY):
                waited = time.monotonic() - start
    finally:
        done.set()
        thread.join(timeout=30)
    assert 0.5 <= waited < 10
    report, gave_up = _warnings(caplog)
    assert f"is held by process {os.getpid()} on " in report
    assert f"(held by process {os.getpid()} on " in gave_up and "building without it" in gave_up


def test_a_lock_timeout_that_is_not_a_number_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(engine_cache.LOCK_TIMEOUT_VAR, "ten minutes")
    with pytest.raises(ValueError, match=r"\$TRT_LOWER_CACHE_LOCK_TIMEOUT is 'ten minutes'; it takes a number"):
        with EngineCache(tmp_path / "engines", "10.13.0", "trt_double host").exclusive(KEY):
            pass


# -- an entry too large to read, or unreadable -----------------------------------------------------------
_SMALL_READ = 1 << 20


def _reads_bounded(monkeypatch: pytest.MonkeyPatch, fault: type[BaseException]) -> None:
    """Files the cache opens raise `fault` on any read of more than a MiB (or of everything)."""
    fdopen = os.fdopen

    class Bounded:
        def __init__(self, file: Any) -> None:
            self._file = file

        def read(self, n: int = -1) -> bytes:
            if n < 0 or n > _SMALL_READ:
                raise fault(f"read({n})")
            return bytes(self._file.read(n))

        def __getattr__(self, name: str) -> Any:
            return getattr(self._file, name)

        def __enter__(self) -> "Bounded":
            return self

        def __exit__(self, *exc: object) -> None:
            self._file.close()

    monkeypatch.setattr(os, "fdopen", lambda *a, **k: Bounded(fdopen(*a, **k)))


def _entry(cache: EngineCache, header_size: int | None, body: int) -> Path:
    """An entry for KEY: a genuine header (declaring `header_size` bytes of payload, when given) or
    zeros, then `body` bytes of zeros, sparse."""
    path = cache.engine_path(KEY)
    cache.store(KEY, b"plan")
    start = len(MAGIC) + 4
    data = path.read_bytes()
    header = json.loads(data[start : -len(b"plan")])
    header["size"] = header_size
    text = json.dumps(header).encode()
    data = MAGIC + len(text).to_bytes(4, "big") + text if header_size is not None else bytes(start + len(text))
    with open(path, "wb") as f:
        f.write(data)
        f.truncate(len(data) + body)
    return path


@pytest.mark.parametrize(
    "header_size, why",
    [
        (None, "not a trt_lower cache file"),
        (16 << 30, "truncated or padded: 4 bytes of payload, its header says 17179869184"),
    ],
    ids=["zeros", "declares 16 GiB"],
)
def test_a_huge_entry_is_discarded_before_its_body_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, header_size: int | None, why: str
) -> None:
    # A 16 GiB sparse entry was read whole before its header was looked at: MemoryError on every
    # lowering, and never discarded.
    cache = EngineCache(tmp_path / "engines", "10.13.0", "trt_double host")
    path = _entry(cache, header_size, 16 << 30 if header_size is None else 4)
    _reads_bounded(monkeypatch, AssertionError)
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        assert cache.load(KEY) is None
    assert f"discarding cache entry {path} ({why}" in caplog.text and not path.exists()


def test_an_entry_that_cannot_be_read_is_discarded_and_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cache = EngineCache(tmp_path / "engines", "10.13.0", "trt_double host")
    path = _entry(cache, 2 * _SMALL_READ, 2 * _SMALL_READ)  # genuine, but no memory to read it into
    _reads_bounded(monkeypatch, MemoryError)
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        assert cache.load(KEY) is None
    assert f"discarding cache entry {path} (unreadable: MemoryError" in caplog.text and not path.exists()
    monkeypatch.undo()
    cache.store(KEY, b"plan")  # rebuilt
    assert cache.load(KEY) == b"plan"
