"""Files a user ships (artifacts, weight files, signed copies) get the mode the umask gives, as
torch.save's do, so that a server running as another user can read them; engine cache entries and
private keys stay readable by their owner only."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest
import torch

import trt_lower
from trt_lower.deploy import signing


@pytest.fixture
def umask() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def _lowered() -> trt_lower.LoweredModule:
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    return trt_lower.lower_to_trt(model, (torch.randn(2, 4),), backend="onnxruntime")


def test_saved_files_follow_the_umask(tmp_path: Path, umask: None) -> None:
    lowered = _lowered()
    trt_lower.save(lowered, tmp_path / "model.trtl")
    assert _mode(tmp_path / "model.trtl") == 0o644
    torch.save({}, tmp_path / "torch.pt")  # what users compare with
    assert _mode(tmp_path / "torch.pt") == 0o644
    os.umask(0o077)
    trt_lower.save(lowered, tmp_path / "private.trtl")
    assert _mode(tmp_path / "private.trtl") == 0o600


def test_signed_copy_follows_the_umask_and_the_private_key_stays_private(tmp_path: Path, umask: None) -> None:
    trt_lower.save(_lowered(), tmp_path / "model.trtl")
    signing.generate(tmp_path / "key", tmp_path / "key.pub")
    assert _mode(tmp_path / "key") == 0o600
    signing.sign_file(tmp_path / "model.trtl", tmp_path / "signed.trtl", tmp_path / "key")
    assert _mode(tmp_path / "signed.trtl") == 0o644


def test_engine_cache_entries_stay_private(tmp_path: Path, umask: None) -> None:
    from trt_lower.values.atomic_file import write_atomic

    write_atomic(tmp_path / "entry.plan", b"plan")
    assert _mode(tmp_path / "entry.plan") == 0o600
