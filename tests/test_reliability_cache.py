"""The engine cache under concurrency and faults (TensorRT double): processes lowering the same
model into one cache_dir at once, a read-only or full directory, a writer killed mid-write."""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

import pytest
from reliability_workers import lower_static_and_check, worker, worker_env
from trt_double.device import HostDevice

from trt_lower.engine.cache import EngineCache, Key

PROCESSES = 4
KEY = Key("graph", "weights", "build")


def _wait_for(done: Callable[[], bool], what: str, seconds: float = 240) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[subprocess.Popen[str]]]:
    """Processes this test starts, always ended."""
    processes: list[subprocess.Popen[str]] = []
    yield processes
    for p in processes:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=30)


def test_four_processes_lowering_into_one_cache_build_each_engine_once(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    go, cache = tmp_path / "go", tmp_path / "engines"
    for _ in range(PROCESSES):
        started.append(
            subprocess.Popen(
                worker("cache", str(go)),
                env=worker_env(cache),
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        )
    _wait_for(lambda: len(list(tmp_path.glob("ready-*"))) == PROCESSES, "the workers to start")
    go.touch()
    outs = [p.communicate(timeout=240) for p in started]
    for p, (out, err) in zip(started, outs):
        assert p.returncode == 0, err[-3000:]  # each compared its results with eager
        assert "discarding cache entry" not in err and "could not" not in err, err
    results = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    # Two engines (keys): each built by exactly one process, loaded by the three others.
    assert sum(r["builds"] for r in results) == 2, results
    assert all(r["builds"] == r["hits"].count(False) for r in results), results
    assert [sum(not r["hits"][k] for r in results) for k in range(2)] == [1, 1], results
    assert len(list(cache.glob("*.engine"))) == 2 and not list(cache.glob(".*.tmp"))


# -- faults ------------------------------------------------------------------------------------
def _fail_under(monkeypatch: pytest.MonkeyPatch, root: Path, code: int, *, writes: bool, sync: bool) -> None:
    """File system faults below `root`: opening for writing, unlinking (`writes`, as on a read-only
    mount) or fsync (`sync`, as on a full disk) fail with `code`."""
    real_open, real_unlink, real_fsync = os.open, os.unlink, os.fsync
    inside = str(root)

    def fault(name: object) -> OSError:
        return OSError(code, os.strerror(code), str(name))

    def open_(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if writes and str(path).startswith(inside) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise fault(path)
        return real_open(path, flags, *args, **kwargs)

    def unlink(path: Any, *args: Any, **kwargs: Any) -> None:
        if writes and str(path).startswith(inside):
            raise fault(path)
        real_unlink(path, *args, **kwargs)

    def fsync(fd: int) -> None:
        if sync:
            raise fault(f"fd {fd}")
        real_fsync(fd)

    monkeypatch.setattr(os, "open", open_)
    monkeypatch.setattr(os, "unlink", unlink)
    monkeypatch.setattr(os, "fsync", fsync)


def _lower_and_check(expect_hits: list[bool]) -> None:
    assert [e.cache_hit for e in lower_static_and_check("tensorrt").report.engines] == expect_hits


@pytest.mark.parametrize(
    "code, writes, sync",
    [
        (errno.EROFS, True, False),  # read-only mount
        (errno.EACCES, True, False),  # a directory we may not write to
        (errno.ENOSPC, False, True),  # disk full
    ],
)
def test_unwritable_cache_dir_warns_and_lowering_goes_on_without_caching(
    trt_double: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    code: int,
    writes: bool,
    sync: bool,
) -> None:
    cache = Path(os.environ["TRT_LOWER_CACHE_DIR"])
    cache.mkdir()
    _fail_under(monkeypatch, cache, code, writes=writes, sync=sync)
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        _lower_and_check([False, False])
        _lower_and_check([False, False])  # nothing was cached: built again
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings and all("lowering goes on without caching" in w and os.strerror(code) in w for w in warnings)
    assert len(warnings) <= 4  # one per engine and lowering, not one per file
    assert trt_double.state.builds == 4
    assert [p.name for p in cache.iterdir() if not p.name.endswith(".lock")] == []


def test_damaged_entry_in_a_read_only_cache_dir_is_skipped_and_rebuilt(
    trt_double: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cache = Path(os.environ["TRT_LOWER_CACHE_DIR"])
    _lower_and_check([False, False])
    entry = sorted(cache.glob("*.engine"))[0]
    entry.write_bytes(entry.read_bytes()[:-10])
    _fail_under(monkeypatch, cache, errno.EROFS, writes=True, sync=False)
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        lowered = lower_static_and_check("tensorrt")
    assert sorted(e.cache_hit for e in lowered.report.engines) == [False, True]
    assert f"discarding cache entry {entry} (truncated" in caplog.text
    assert "lowering goes on without caching" in caplog.text


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes to read-only directories")
def test_chmod_read_only_cache_dir_warns_and_goes_on(trt_double: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    cache = Path(os.environ["TRT_LOWER_CACHE_DIR"])
    cache.mkdir()
    cache.chmod(0o555)
    try:
        with caplog.at_level(logging.WARNING, logger="trt_lower"):
            _lower_and_check([False, False])
    finally:
        cache.chmod(0o755)
    assert "lowering goes on without caching" in caplog.text and not list(cache.iterdir())


def _entry(root: Path) -> tuple[EngineCache, bytes]:
    cache = EngineCache(root, "10.13.0", HostDevice().identity())
    cache.store(KEY, b"plan " * 1000)
    return cache, cache.engine_path(KEY).read_bytes()


def test_an_entry_cut_short_anywhere_is_never_loaded(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache, data = _entry(tmp_path)
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        for length in [*range(0, 80), *range(80, len(data), 97), len(data) - 1]:
            cache.engine_path(KEY).write_bytes(data[:length])
            assert cache.load(KEY) is None, f"an entry cut at {length} of {len(data)} bytes was loaded"
            assert not cache.engine_path(KEY).exists()
    cache.engine_path(KEY).write_bytes(data)
    assert cache.load(KEY) == b"plan " * 1000


_KILLED_WRITER = """
import os, sys, time
from pathlib import Path
from trt_lower.engine.cache import EngineCache, Key

def stall(fd):  # the payload is written, not yet renamed into place: die here
    Path(sys.argv[2]).touch()
    time.sleep(120)

os.fsync = stall
EngineCache(Path(sys.argv[1]), "10.13.0", "trt_double host").store(Key("graph", "weights", "build"), b"plan" * (1 << 20))
"""


def test_a_writer_killed_mid_write_leaves_no_entry(
    tmp_path: Path, started: list[subprocess.Popen[str]], caplog: pytest.LogCaptureFixture
) -> None:
    marker = tmp_path / "writing"
    started.append(
        subprocess.Popen(
            [sys.executable, "-c", _KILLED_WRITER, str(tmp_path / "engines"), str(marker)],
            env=worker_env(tmp_path / "engines"),
            text=True,
        )
    )
    _wait_for(marker.exists, "the writer to write")
    started[0].send_signal(signal.SIGKILL)
    started[0].wait(timeout=30)
    cache = EngineCache(tmp_path / "engines", "10.13.0", "trt_double host")
    assert [p.name.endswith(".tmp") for p in (tmp_path / "engines").iterdir()] == [True]  # the dead temp file
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        assert cache.load(KEY) is None and not caplog.records
    cache.store(KEY, b"plan")  # the next writer is not disturbed by the leftover
    assert cache.load(KEY) == b"plan"
