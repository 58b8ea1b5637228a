"""The on-disk engine cache: where it lives, what its key covers, and how it treats bad entries."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

from converters.core.segment import OnnxSegment
from trt_lower.engine.build_options import BuildOptions, InputProfile
from trt_lower.engine.cache import EngineCache, Key, default_dir

PROFILES = [[InputProfile("x", (2, 3), (2, 3), (2, 3))]]
KEY = Key("graph", "weights", "build")


def _segment(weight: float = 1.0, graph: str = "g") -> OnnxSegment:
    """A segment whose one large weight is kept beside its graph."""
    segment = OnnxSegment(onnx.ModelProto(graph=onnx.GraphProto(name=graph)))
    segment.model.graph.initializer.append(segment.initializer("w", np.full(2048, weight, np.float32)))
    return segment


def _cache(root: Path, version: str = "10.4.0", device: str = "Tesla V100 sm_70") -> EngineCache:
    return EngineCache(root, version, device)


def test_default_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TRT_LOWER_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_dir() == tmp_path / "xdg" / "trt_lower"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_dir() == Path.home() / ".cache" / "trt_lower"
    monkeypatch.setenv("TRT_LOWER_CACHE_DIR", str(tmp_path / "mine"))
    assert default_dir() == tmp_path / "mine"


def test_key_covers_network_profiles_settings_version_and_device(tmp_path: Path) -> None:
    key = _cache(tmp_path).key(_segment(), PROFILES, BuildOptions())
    others = [
        _cache(tmp_path).key(_segment(weight=2.0), PROFILES, BuildOptions()),
        _cache(tmp_path).key(_segment(graph="other"), PROFILES, BuildOptions()),
        _cache(tmp_path).key(_segment(), [[InputProfile("x", (1, 3), (2, 3), (4, 3))]], BuildOptions()),
        # Several optimization profiles: which, and in what order (the runtime numbers them so).
        _cache(tmp_path).key(_segment(), [*PROFILES, [InputProfile("x", (1, 3), (2, 3), (4, 3))]], BuildOptions()),
        _cache(tmp_path).key(_segment(), [[InputProfile("x", (1, 3), (2, 3), (4, 3))], *PROFILES], BuildOptions()),
        _cache(tmp_path).key(_segment(), PROFILES, BuildOptions(precision="fp16")),
        _cache(tmp_path).key(_segment(), PROFILES, BuildOptions(workspace_bytes=1 << 20)),
        _cache(tmp_path).key(_segment(), PROFILES, BuildOptions(optimization_level=5)),
        _cache(tmp_path, version="10.4.1").key(_segment(), PROFILES, BuildOptions()),
        _cache(tmp_path, device="NVIDIA H100 sm_90").key(_segment(), PROFILES, BuildOptions()),
    ]
    assert key not in others and len(set(others)) == len(others)
    assert key == _cache(tmp_path).key(_segment(), PROFILES, BuildOptions())


def test_entries_round_trip_and_leave_no_temporary_files(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = _cache(tmp_path / "engines")
    assert cache.load(KEY) is None and cache.load_timing_cache() == b""
    cache.store(KEY, b"plan bytes")
    cache.store_timing_cache(b"timings")
    assert cache.load(KEY) == b"plan bytes" and cache.load_timing_cache() == b"timings"
    assert sorted(p.name for p in (tmp_path / "engines").iterdir()) == sorted(
        [cache.engine_path(KEY).name, cache.timing_cache_path.name]
    )
    assert not caplog.records


def test_a_killed_writers_old_temporary_file_is_removed_by_the_next_write(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    tmp_path.mkdir(exist_ok=True)
    entry = cache.engine_path(KEY).name
    stale, fresh = tmp_path / f".{entry}.dead.tmp", tmp_path / f".{entry}.live.tmp"
    other = tmp_path / ".other.engine.dead.tmp"
    for path in (stale, fresh, other):
        path.write_bytes(b"half a plan")
    day_ago = time.time() - 86400
    for path in (stale, other):
        os.utime(path, (day_ago, day_ago))
    cache.store(KEY, b"plan")
    # An old leftover of this entry goes; one still being written (recent), or another entry's, stays.
    assert not stale.exists() and fresh.exists() and other.exists()
    assert cache.load(KEY) == b"plan"


def test_timing_cache_is_per_version_and_device(tmp_path: Path) -> None:
    paths = {
        _cache(tmp_path).timing_cache_path,
        _cache(tmp_path, version="8.6.1").timing_cache_path,
        _cache(tmp_path, device="NVIDIA H100 sm_90").timing_cache_path,
    }
    assert len(paths) == 3


@pytest.mark.parametrize(
    "content, why", [(b"", "not a trt_lower cache file"), (b"\x7fELF not ours", "not a trt_lower cache file")]
)
def test_foreign_file_is_discarded_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes, why: str
) -> None:
    cache = _cache(tmp_path)
    cache.engine_path(KEY).write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        assert cache.load(KEY) is None
    assert why in caplog.text and not cache.engine_path(KEY).exists()


def test_entry_of_another_key_or_device_is_discarded(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _cache(tmp_path, device="NVIDIA H100 sm_90").store(KEY, b"plan")
    other, renamed = Key("other graph", "weights", "build"), Key("graph", "weights", "other build")
    _cache(tmp_path).store(other, b"plan")
    os.replace(_cache(tmp_path).engine_path(other), _cache(tmp_path).engine_path(renamed))
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        assert _cache(tmp_path).load(KEY) is None
        assert _cache(tmp_path).load(renamed) is None
    assert "its device is 'NVIDIA H100 sm_90', expected 'Tesla V100 sm_70'" in caplog.text
    assert "its graph hash is 'other graph', expected 'graph' (it was built from something else)" in caplog.text


def test_unwritable_cache_dir_warns_and_goes_on(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "file").write_text("a file where the cache dir should be")
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        _cache(tmp_path / "file" / "engines").store(KEY, b"plan")
    assert "could not write to the engine cache" in caplog.text and "Not a directory" in caplog.text


def test_failed_write_leaves_the_old_entry_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cache = _cache(tmp_path)
    cache.store(KEY, b"old plan")

    def crash(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with caplog.at_level(logging.WARNING, logger="trt_lower"):
        cache.store(KEY, b"new plan")
    monkeypatch.undo()
    assert "disk full" in caplog.text
    assert [p.name for p in tmp_path.iterdir()] == [cache.engine_path(KEY).name] and cache.load(KEY) == b"old plan"
