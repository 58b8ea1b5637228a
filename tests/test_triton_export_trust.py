"""export_model_repository of a saved artifact's path: the file is verified before anything in it
is parsed, and the repository receives the bytes that were verified, not whatever the path holds
later."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch

import trt_lower
from trt_lower.deploy import signing
from trt_lower.triton import repository
from trt_lower.triton.generation import causal_lm_step


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A signed artifact, the public key that signed it, and an unsigned artifact of another model."""
    folder = tmp_path_factory.mktemp("signed")
    signing.generate(folder / "key.pem", folder / "key.pub.pem")
    torch.manual_seed(0)
    lowered = trt_lower.lower_to_trt(torch.nn.Linear(3, 2).eval(), (torch.randn(2, 3),), backend="onnxruntime")
    trt_lower.save(lowered, folder / "signed.trtl", sign_with=folder / "key.pem")
    other = trt_lower.lower_to_trt(torch.nn.Linear(3, 2).eval(), (torch.randn(2, 3),), backend="onnxruntime")
    trt_lower.save(other, folder / "other.trtl")
    return folder / "signed.trtl", folder / "key.pub.pem", folder / "other.trtl"


def test_a_changed_signed_file_is_refused_by_its_signature_before_its_manifest_is_parsed(
    signed: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """The attack: a signed file whose manifest was changed into one that does not parse. Read before
    the signature was checked, it was refused as "manifest.json is not JSON" (untrusted JSON parsed)."""
    path, key, _ = signed
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        manifest = archive.getinfo("manifest.json")
    start = manifest.header_offset + 30 + len(manifest.filename) + len(manifest.extra)
    assert data[start : start + 1] == b"{"
    data[start] = ord("[")  # no longer the JSON object it was
    changed = tmp_path / "changed.trtl"
    changed.write_bytes(bytes(data))
    with pytest.raises(trt_lower.ArtifactError, match=r"changed\.trtl: its signature does not match its contents"):
        repository.export_model_repository(changed, tmp_path / "repo", "m", platform="python", trusted_keys=key)
    assert not (tmp_path / "repo").exists()


def test_a_file_swapped_after_it_was_verified_does_not_reach_the_repository(
    signed: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack: the path replaced by another (unsigned) artifact once the export has verified and
    loaded it; a copy made from the path afterwards published the unverified file."""
    path, key, other = signed
    source = tmp_path / "model.trtl"
    source.write_bytes(path.read_bytes())

    def swapped_after_loading(lowered: Any) -> Any:
        source.write_bytes(other.read_bytes())
        return causal_lm_step(lowered)

    # Called on the loaded model, before its files are written.
    monkeypatch.setattr(repository, "causal_lm_step", swapped_after_loading)
    model = repository.export_model_repository(source, tmp_path / "repo", "m", platform="python", trusted_keys=key)
    assert (model.path / "1" / repository.ARTIFACT).read_bytes() == path.read_bytes()
    assert trt_lower.load(model.path / "1" / repository.ARTIFACT, trusted_keys=key) is not None


def test_a_file_whose_tail_is_still_in_the_copys_buffer_exports(
    signed: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fault: the private copy's last chunk still in its write buffer when the copy was measured
    (fstat), so a whole file was refused as truncated whenever its size left a short last chunk."""
    _, _, unsigned = signed  # no signature check to read (and so flush) the copy first
    monkeypatch.delenv("TRT_LOWER_TRUSTED_KEYS", raising=False)
    with zipfile.ZipFile(unsigned) as archive:
        data_end = max(i.header_offset + 30 + len(i.filename) + len(i.extra) + i.file_size for i in archive.infolist())
    # Copied in two chunks, the second (from the last member's last byte on) small enough to stay buffered.
    monkeypatch.setattr("shutil.COPY_BUFSIZE", data_end - 1)
    model = repository.export_model_repository(unsigned, tmp_path / "repo", "m", platform="python")
    assert (model.path / "1" / repository.ARTIFACT).read_bytes() == unsigned.read_bytes()
