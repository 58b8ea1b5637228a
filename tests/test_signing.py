"""Signed artifacts: a file signed by a trusted key loads; a one-byte change anywhere, a file
re-signed by another key and an unsigned file are refused under trusted keys, before anything in
the file is parsed; the keygen/sign/info commands."""

from __future__ import annotations

import os
import re
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from safetensors.torch import load_file
from test_pipeline import Sandwich

import trt_lower
from trt_lower.cli import commands as cli
from trt_lower.deploy import artifact, signing

X = torch.randn(2, 3, 8, 8)


@pytest.fixture(scope="module")
def keys() -> dict[str, Ed25519PrivateKey]:
    return {"ours": Ed25519PrivateKey.generate(), "theirs": Ed25519PrivateKey.generate()}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, keys: dict[str, Ed25519PrivateKey]) -> dict[str, Path]:
    """The same lowered model saved signed by our key, and unsigned."""
    root = tmp_path_factory.mktemp("signed")
    lowered = trt_lower.lower_to_trt(_model(), (X,), backend="onnxruntime")
    trt_lower.save(lowered, root / "signed.trtl", sign_with=keys["ours"])
    trt_lower.save(lowered, root / "plain.trtl")
    return {"signed": root / "signed.trtl", "plain": root / "plain.trtl"}


def _public_pem(key: Ed25519PrivateKey, path: Path) -> Path:
    path.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return path


def _load(path: Path, **kwargs: Any) -> Any:
    return trt_lower.load(path, backend="onnxruntime", **kwargs)


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return Sandwich().eval()


def _matches_eager(loaded: Any) -> None:
    with torch.no_grad():
        torch.testing.assert_close(loaded(X), _model()(X))


@pytest.fixture(autouse=True)
def _no_trusted_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(signing.ENV_VAR, raising=False)


# -- the happy path ----------------------------------------------------------------------------------
def test_a_signed_file_loads_under_its_key(
    files: dict[str, Path], keys: dict[str, Ed25519PrivateKey], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _matches_eager(_load(files["signed"], trusted_keys=[keys["ours"].public_key()]))
    # The keys as PEM files, in $TRT_LOWER_TRUSTED_KEYS (one of several).
    pems = [
        _public_pem(keys["theirs"], tmp_path / "theirs.pub.pem"),
        _public_pem(keys["ours"], tmp_path / "ours.pub.pem"),
    ]
    monkeypatch.setenv(signing.ENV_VAR, os.pathsep.join(map(str, pems)))
    _matches_eager(_load(files["signed"]))
    # Without trusted keys, signed and unsigned files load as before.
    monkeypatch.delenv(signing.ENV_VAR)
    _matches_eager(_load(files["signed"]))
    _matches_eager(_load(files["plain"]))


def test_sign_with_a_pem_file_and_sign_an_existing_file(files: dict[str, Path], tmp_path: Path) -> None:
    assert cli.main(["keygen", str(tmp_path / "release")]) == 0
    private, public = tmp_path / "release.pem", tmp_path / "release.pub.pem"
    assert private.stat().st_mode & 0o777 == 0o600
    lowered = _load(files["plain"])
    trt_lower.save(lowered, tmp_path / "a.trtl", sign_with=private)
    shutil.copy(files["plain"], tmp_path / "b.trtl")
    assert cli.main(["sign", str(tmp_path / "b.trtl"), "--sign-with", str(private)]) == 0
    _matches_eager(_load(tmp_path / "a.trtl", trusted_keys=[public]))
    _matches_eager(_load(tmp_path / "b.trtl", trusted_keys=str(public)))  # one key, not in a list


# -- the three attacks ---------------------------------------------------------------------------------
def _positions(data: bytes) -> dict[str, int]:
    """Bytes to change, one in each part of a signed file: members' headers and data, the manifest,
    the zip's central directory and end record, the signature itself."""
    end = len(data) - signing.TRAILER_BYTES
    return {
        "first local header": 5,
        "weights": data.index(b"weights.safetensors", data.index(b"weights.safetensors") + 1) + 200,
        "middle": len(data) // 2,
        "manifest": data.index(b'"format_version"') + 3,
        "central directory": data.index(b"PK\x01\x02") + 12,
        "comment length": end - 1,
        "signature": len(data) - 7,
    }


@pytest.mark.parametrize(
    "part", ["first local header", "weights", "middle", "manifest", "central directory", "comment length", "signature"]
)
def test_a_one_byte_change_anywhere_is_refused(
    files: dict[str, Path], keys: dict[str, Ed25519PrivateKey], tmp_path: Path, part: str
) -> None:
    data = bytearray(files["signed"].read_bytes())
    at = _positions(bytes(data))[part]
    data[at] = ord("0") if data[at] != ord("0") else ord("1")  # a hex digit stays one in the signature
    tampered = tmp_path / "tampered.trtl"
    tampered.write_bytes(data)
    # The signature's refusal, not the reader's (checksum, zip CRC, JSON): it is checked first.
    with pytest.raises(artifact.ArtifactError, match="signature does not match its contents"):
        _load(tampered, trusted_keys=[keys["ours"].public_key()])


def test_a_file_re_signed_by_another_key_is_refused(
    files: dict[str, Path], keys: dict[str, Ed25519PrivateKey], tmp_path: Path
) -> None:
    resigned = tmp_path / "resigned.trtl"
    signing.sign_file(files["signed"], resigned, keys["theirs"])
    theirs = signing.fingerprint(keys["theirs"].public_key())
    with pytest.raises(artifact.ArtifactError, match=f"signed by key {theirs}, which is not trusted"):
        _load(resigned, trusted_keys=[keys["ours"].public_key()])
    _matches_eager(_load(resigned, trusted_keys=[keys["theirs"].public_key()]))  # a valid signature, untrusted key


def test_an_unsigned_file_is_refused(
    files: dict[str, Path], keys: dict[str, Ed25519PrivateKey], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(signing.ENV_VAR, str(_public_pem(keys["ours"], tmp_path / "ours.pub.pem")))
    with pytest.raises(artifact.ArtifactError, match="is not signed, and only files signed by a trusted key"):
        _load(files["plain"])


def test_nothing_in_the_file_is_parsed_before_the_signature_is_checked(
    files: dict[str, Path], keys: dict[str, Ed25519PrivateKey], monkeypatch: pytest.MonkeyPatch
) -> None:
    def parse(path: Any) -> None:
        raise AssertionError("the file was parsed before its signature was checked")

    monkeypatch.setattr(artifact, "read", parse)
    with pytest.raises(artifact.ArtifactError, match="is not signed"):
        _load(files["plain"], trusted_keys=[keys["ours"].public_key()])


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_or_a_directory_is_refused_not_waited_on(keys: dict[str, Ed25519PrivateKey], tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.trtl")
    (tmp_path / "dir.trtl").mkdir()
    errors: list[BaseException] = []

    def load_all() -> None:
        for name in ("fifo.trtl", "dir.trtl"):
            with pytest.raises(artifact.ArtifactError, match=f"{name} is not a regular file") as refused:
                _load(tmp_path / name, trusted_keys=[keys["ours"].public_key()])
            errors.append(refused.value)

    loader = threading.Thread(target=load_all, daemon=True)
    loader.start()
    loader.join(timeout=60)
    if loader.is_alive():
        os.close(os.open(tmp_path / "fifo.trtl", os.O_WRONLY | os.O_NONBLOCK))  # let the loader go
        pytest.fail("load waited on a FIFO")
    assert len(errors) == 2


# -- what is verified is what is loaded ------------------------------------------------------------
@pytest.fixture(scope="module")
def another(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another model of the same shape (other weights), saved unsigned."""
    torch.manual_seed(1)
    lowered = trt_lower.lower_to_trt(Sandwich().eval(), (X,), backend="onnxruntime")
    path = tmp_path_factory.mktemp("another") / "another.trtl"
    trt_lower.save(lowered, path)
    return path


def test_a_file_swapped_after_its_signature_is_checked_is_not_what_loads(
    files: dict[str, Path],
    another: Path,
    keys: dict[str, Ed25519PrivateKey],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The signature was checked on one open of the path and the file parsed from another: an
    # unsigned file renamed over the path in between (an inotify watcher did it) was loaded.
    path = tmp_path / "model.trtl"
    shutil.copy(files["signed"], path)
    shutil.copy(another, tmp_path / "unsigned.trtl")
    check = signing.untrusted

    def check_then_swap(*args: Any) -> str | None:
        refused = check(*args)
        os.replace(tmp_path / "unsigned.trtl", path)
        return refused

    monkeypatch.setattr(signing, "untrusted", check_then_swap)
    _matches_eager(_load(path, trusted_keys=[keys["ours"].public_key()]))  # the signed model, not the other
    assert not (tmp_path / "unsigned.trtl").exists()


def test_cli_sign_signs_the_bytes_it_checked(
    files: dict[str, Path],
    another: Path,
    keys: dict[str, Ed25519PrivateKey],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `trt-lower sign` checked one open of the file and signed a copy made from another.
    assert cli.main(["keygen", str(tmp_path / "k")]) == 0
    (tmp_path / "notes.txt").write_text("not an artifact")
    read = artifact.read

    def read_then_swap(*args: Any) -> Any:
        checked = read(*args)
        shutil.copy(tmp_path / "notes.txt", tmp_path / "m.trtl")
        return checked

    shutil.copy(files["plain"], tmp_path / "m.trtl")
    monkeypatch.setattr(artifact, "read", read_then_swap)
    assert (
        cli.main(
            ["sign", str(tmp_path / "m.trtl"), "--sign-with", str(tmp_path / "k.pem"), "-o", str(tmp_path / "s.trtl")]
        )
        == 0
    )
    monkeypatch.undo()
    _matches_eager(_load(tmp_path / "s.trtl", trusted_keys=[tmp_path / "k.pub.pem"]))


@pytest.fixture(scope="module")
def stripped(tmp_path_factory: pytest.TempPathFactory, keys: dict[str, Ed25519PrivateKey]) -> Path:
    """The model saved signed with weights="separate" (stripped.trtl + stripped.safetensors), and
    another model's weights for the same graph (other.safetensors)."""
    root = tmp_path_factory.mktemp("stripped")
    trt_lower.save(
        trt_lower.lower_to_trt(_model(), (X,), backend="onnxruntime"),
        root / "stripped.trtl",
        weights="separate",
        sign_with=keys["ours"],
    )
    torch.manual_seed(1)
    other = trt_lower.lower_to_trt(Sandwich().eval(), (X,), backend="onnxruntime")
    trt_lower.save(other, root / "other.trtl", weights="separate")
    return root


def test_a_signature_covers_the_separate_weight_file(
    stripped: Path, keys: dict[str, Ed25519PrivateKey], tmp_path: Path
) -> None:
    trusted = [keys["ours"].public_key()]
    _matches_eager(_load(stripped / "stripped.trtl", weights=stripped / "stripped.safetensors", trusted_keys=trusted))
    # Another weight file for the same graph, swapped in beside the signed artifact: it loaded.
    with pytest.raises(artifact.ArtifactError, match="are not those it was signed with"):
        _load(stripped / "stripped.trtl", weights=stripped / "other.safetensors", trusted_keys=trusted)
    # As a state dict too; the signed weights as a state dict load.
    with pytest.raises(artifact.ArtifactError, match="the weights in the state dict are not those it was signed"):
        _load(stripped / "stripped.trtl", weights=load_file(stripped / "other.safetensors"), trusted_keys=trusted)
    _matches_eager(
        _load(stripped / "stripped.trtl", weights=load_file(stripped / "stripped.safetensors"), trusted_keys=trusted)
    )
    # Without trusted keys, any weights of the graph's keys, dtypes and shapes still load (a fine-tuned copy).
    _load(stripped / "stripped.trtl", weights=stripped / "other.safetensors")
    # The model's own state dict (its parameter names) is the signed weights too, and another
    # model's is refused the same way.
    _matches_eager(_load(stripped / "stripped.trtl", weights=_model().state_dict(), trusted_keys=trusted))
    other = _model()
    with torch.no_grad():
        next(other.parameters()).add_(1.0)
    with pytest.raises(artifact.ArtifactError, match="are not those it was signed with"):
        _load(stripped / "stripped.trtl", weights=other.state_dict(), trusted_keys=trusted)


# -- keys that cannot be used ------------------------------------------------------------------------
def test_keys_that_cannot_be_used_are_named(
    files: dict[str, Path], keys: dict[str, Ed25519PrivateKey], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rsa_key = tmp_path / "rsa.pub.pem"
    rsa_key.write_bytes(
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    with pytest.raises(
        ValueError, match=f"{re.escape(str(rsa_key))}: a RSAPublicKey; trt_lower signatures use Ed25519"
    ):
        _load(files["signed"], trusted_keys=[rsa_key])
    with pytest.raises(ValueError, match="trusted_keys is empty"):
        _load(files["signed"], trusted_keys=[])
    monkeypatch.setenv(signing.ENV_VAR, str(tmp_path / "missing.pem"))
    with pytest.raises(FileNotFoundError, match="cannot read the trusted key .*missing.pem"):
        _load(files["signed"])
    monkeypatch.delenv(signing.ENV_VAR)
    with pytest.raises(ValueError, match="not an unencrypted PEM private key"):
        trt_lower.save(_load(files["plain"]), tmp_path / "x.trtl", sign_with=rsa_key)
    assert not (tmp_path / "x.trtl").exists()


@pytest.mark.parametrize("value", [":", os.pathsep * 3])
def test_a_trusted_keys_variable_that_names_no_key_is_an_error(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    # It silently turned checking off: an unsigned file loaded.
    monkeypatch.setenv(signing.ENV_VAR, value)
    with pytest.raises(ValueError, match=r"\$TRT_LOWER_TRUSTED_KEYS is .*, which names no key file"):
        _load(files["plain"])
    monkeypatch.setenv(signing.ENV_VAR, "")  # set but empty: no checking, as unset
    _matches_eager(_load(files["plain"]))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_key_files_are_read_with_type_and_size_checks(files: dict[str, Path], tmp_path: Path) -> None:
    # A FIFO key file hung the load, /dev/zero exhausted memory.
    os.mkfifo(tmp_path / "fifo.pem")
    (tmp_path / "big.pem").write_bytes(b"-" * (signing.MAX_KEY_BYTES + 1))
    errors: list[str] = []

    def load_all() -> None:
        for key in (tmp_path / "fifo.pem", Path("/dev/zero"), tmp_path, tmp_path / "big.pem"):
            with pytest.raises(ValueError) as refused:
                _load(files["signed"], trusted_keys=[key])
            errors.append(str(refused.value))

    loader = threading.Thread(target=load_all, daemon=True)
    loader.start()
    loader.join(timeout=60)
    if loader.is_alive():
        os.close(os.open(tmp_path / "fifo.pem", os.O_WRONLY | os.O_NONBLOCK))  # let the loader go
        pytest.fail("a key file was waited on, or read without end")
    assert errors[:3] == [
        f"the trusted key {k} is not a regular file" for k in (tmp_path / "fifo.pem", "/dev/zero", tmp_path)
    ]
    assert errors[3] == f"the trusted key {tmp_path / 'big.pem'} is larger than 65536 bytes: not a PEM key"


def test_trusted_keys_of_the_wrong_type_are_named(files: dict[str, Path], keys: dict[str, Ed25519PrivateKey]) -> None:
    pem = (
        keys["ours"]
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    with pytest.raises(
        TypeError, match="trusted_keys takes Ed25519 public keys or paths of their PEM files .* got bytes"
    ):
        _load(files["signed"], trusted_keys=pem)
    with pytest.raises(TypeError, match="a trusted key is an Ed25519 key or the path of its PEM file, got bytes"):
        _load(files["signed"], trusted_keys=[pem])
    with pytest.raises(TypeError, match="trusted_keys takes .* got int"):
        _load(files["signed"], trusted_keys=7)


# -- the CLI -----------------------------------------------------------------------------------------
def test_info_shows_the_signer(
    files: dict[str, Path], keys: dict[str, Ed25519PrivateKey], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fingerprint = signing.fingerprint(keys["ours"].public_key())
    assert cli.main(["info", str(files["signed"])]) == 0
    assert f"signature: Ed25519 key {fingerprint} (valid)" in capsys.readouterr().out
    assert cli.main(["info", str(files["plain"])]) == 0
    assert "signature: none (unsigned)" in capsys.readouterr().out


def test_cli_refuses_to_overwrite_a_key_or_sign_a_non_artifact(files: dict[str, Path], tmp_path: Path) -> None:
    assert cli.main(["keygen", str(tmp_path / "k")]) == 0
    with pytest.raises(SystemExit, match="trt-lower keygen: FileExistsError: .*k.pem exists; not overwriting a key"):
        cli.main(["keygen", str(tmp_path / "k")])
    (tmp_path / "notes.txt").write_text("not an artifact")
    with pytest.raises(SystemExit, match="trt-lower sign: ArtifactError: .*notes.txt is not a trt_lower artifact"):
        cli.main(["sign", str(tmp_path / "notes.txt"), "--sign-with", str(tmp_path / "k.pem")])
    assert (tmp_path / "notes.txt").read_text() == "not an artifact"
    with pytest.raises(SystemExit, match="trt-lower sign: FileNotFoundError: -o .*: no such directory: .*typo"):
        cli.main(
            [
                "sign",
                str(files["plain"]),
                "--sign-with",
                str(tmp_path / "k.pem"),
                "-o",
                str(tmp_path / "typo" / "x.trtl"),
            ]
        )
    assert not (tmp_path / "typo").exists()
