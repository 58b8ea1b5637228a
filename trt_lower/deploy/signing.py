"""Signed artifacts: an Ed25519 signature (the `cryptography` package) over every byte of the file
but the signature itself.

The signature is the zip's archive comment, the last bytes of the file, in a fixed-length form:

    trt_lower signature 1 ed25519 <public key, 64 hex digits> <signature, 128 hex digits>

It signs a SHA-256 of everything before it (every member, the manifest, the zip's own records, the
comment's length), so it is checked by reading the file's tail and hashing the rest: before anything
in the file is parsed, and on the same open file the loader then reads (container.open_file), so what
was verified is what is parsed. A weights="separate" file's weight file is covered through its
digest, recorded in the signed manifest (signed_weights.py). Unsigned files still load;
`trusted_keys` (or $TRT_LOWER_TRUSTED_KEYS) makes load refuse any file that no trusted key signed.
docs/security.md says what that does and does not protect against.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import zipfile
from pathlib import Path
from typing import BinaryIO, Callable, Iterable

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from trt_lower.values.atomic_file import atomic_file

ENV_VAR = "TRT_LOWER_TRUSTED_KEYS"
_PREFIX = b"trt_lower signature 1 ed25519 "
_TRAILER = re.compile(re.escape(_PREFIX) + rb"([0-9a-f]{64}) ([0-9a-f]{128})")
TRAILER_BYTES = len(_PREFIX) + 64 + 1 + 128
# What is signed: this context, then the SHA-256 of the bytes before the trailer (so a trt_lower
# signature means nothing anywhere else, and a signature of anything else means nothing here).
_CONTEXT = b"trt_lower artifact signature 1\0"
_CHUNK = 1 << 24
# A PEM key is a few hundred bytes; a key file larger than this is not one, and is not read whole.
MAX_KEY_BYTES = 1 << 16

PathLike = str | os.PathLike[str]
PrivateKey = Ed25519PrivateKey | PathLike
PublicKey = Ed25519PublicKey | PathLike


# -- keys ------------------------------------------------------------------------------------------
def _pem(path: PathLike, what: str) -> bytes:
    """The bytes of the key file at `path`: a regular file of at most MAX_KEY_BYTES (a FIFO is not
    waited on, a device such as /dev/zero not read)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"a {what} is an Ed25519 key or the path of its PEM file, got {type(path).__name__}")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise ValueError(f"the {what} {path} is not a regular file")
        with os.fdopen(fd, "rb") as file:
            data = file.read(MAX_KEY_BYTES + 1)
    except OSError as e:
        raise type(e)(e.errno, f"cannot read the {what} {path}: {e.strerror}") from None
    if len(data) > MAX_KEY_BYTES:
        raise ValueError(f"the {what} {path} is larger than {MAX_KEY_BYTES} bytes: not a PEM key")
    return data


def private_key(key: PrivateKey) -> Ed25519PrivateKey:
    """`key`, or the unencrypted PEM private key in the file it names."""
    if isinstance(key, Ed25519PrivateKey):
        return key
    data = _pem(key, "signing key")
    try:
        loaded = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as e:  # not PEM, or encrypted (TypeError: no password given)
        raise ValueError(f"{key}: not an unencrypted PEM private key ({e})") from None
    if not isinstance(loaded, Ed25519PrivateKey):
        raise ValueError(f"{key}: a {type(loaded).__name__.lstrip('_')}; trt_lower signs with Ed25519 keys")
    return loaded


def public_key(key: PublicKey) -> Ed25519PublicKey:
    """`key`, or the PEM public key in the file it names."""
    if isinstance(key, Ed25519PublicKey):
        return key
    data = _pem(key, "trusted key")
    try:
        loaded = serialization.load_pem_public_key(data)
    except ValueError as e:
        raise ValueError(f"{key}: not a PEM public key ({e})") from None
    if not isinstance(loaded, Ed25519PublicKey):
        raise ValueError(f"{key}: a {type(loaded).__name__.lstrip('_')}; trt_lower signatures use Ed25519 keys")
    return loaded


def _raw(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def fingerprint(key: Ed25519PublicKey | bytes) -> str:
    """How keys are named to people: SHA-256 of the raw 32-byte public key."""
    return "sha256:" + hashlib.sha256(key if isinstance(key, bytes) else _raw(key)).hexdigest()


def trusted(keys: Iterable[PublicKey] | PublicKey | None) -> list[Ed25519PublicKey] | None:
    """The keys load trusts: `keys`, else the PEM files $TRT_LOWER_TRUSTED_KEYS lists (separated by
    os.pathsep), else None (unsigned files load). A variable that is set but names no file (":")
    is an error, not "no checking"."""
    if keys is None:
        value = os.environ.get(ENV_VAR, "")
        if not value:
            return None
        keys = [p for p in value.split(os.pathsep) if p]
        if not keys:
            raise ValueError(
                f"${ENV_VAR} is {value[:40]!r}, which names no key file; list the trusted public keys' "
                "PEM files, or unset it to load unsigned files"
            )
    if isinstance(keys, (str, os.PathLike, Ed25519PublicKey)):  # one key, not a list of them
        keys = [keys]
    if isinstance(keys, (bytes, bytearray, memoryview)) or not isinstance(keys, Iterable):
        raise TypeError(
            f"trusted_keys takes Ed25519 public keys or paths of their PEM files (one, or a list), got "
            f"{type(keys).__name__}; for PEM text, pass load_pem_public_key(text) (cryptography)"
        )
    loaded = [public_key(k) for k in keys]
    if not loaded:
        raise ValueError("trusted_keys is empty: no file could load; pass None to load unsigned files")
    return loaded


def generate(private_path: Path, public_path: Path) -> Ed25519PublicKey:
    """A new key pair: the private key as unencrypted PEM (PKCS#8, readable by its owner only), the
    public key as PEM (SubjectPublicKeyInfo). Existing files are not overwritten."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    for path in (private_path, public_path):
        if path.exists():
            raise FileExistsError(f"{path} exists; not overwriting a key")
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(private)
    public_path.write_bytes(public)
    return key.public_key()


# -- signing ---------------------------------------------------------------------------------------
def _digest(file: BinaryIO, length: int) -> bytes:
    """SHA-256 of the first `length` bytes of `file`, read in chunks."""
    digest = hashlib.sha256()
    file.seek(0)
    while length > 0:
        chunk = file.read(min(_CHUNK, length))
        if not chunk:
            raise ValueError("the file ended early")
        digest.update(chunk)
        length -= len(chunk)
    return digest.digest()


def sign(file: BinaryIO, key: PrivateKey) -> str:
    """Sign the complete zip open in `file` (read-write) with `key`, replacing any signature it
    had; returns the key's fingerprint. The comment is first set to a placeholder of the trailer's
    length (zipfile rewrites its end records), then the bytes before it are hashed and it is
    overwritten in place with the signature."""
    signer = private_key(key)
    file.seek(0)
    if not zipfile.is_zipfile(file):
        raise ValueError("not a zip file: only trt_lower artifacts are signed")
    with zipfile.ZipFile(file, "a") as archive:
        archive.comment = bytes(TRAILER_BYTES)
    size = file.seek(0, os.SEEK_END)
    signature = signer.sign(_CONTEXT + _digest(file, size - TRAILER_BYTES))
    public = _raw(signer.public_key())
    file.seek(size - TRAILER_BYTES)
    file.write(_PREFIX + public.hex().encode() + b" " + signature.hex().encode())
    file.flush()
    return fingerprint(public)


def sign_file(source: Path, target: Path, key: PrivateKey, check: Callable[[BinaryIO], object] | None = None) -> str:
    """`source` signed with `key`, written to `target` (may be `source`) atomically. `check` (which
    raises on a file that may not be signed) reads the copy that is signed, not `source` again."""
    signer = private_key(key)  # a bad key fails before the copy
    with open(source, "rb") as original, atomic_file(target, private=False) as copy:
        shutil.copyfileobj(original, copy, _CHUNK)
        copy.flush()
        if check is not None:
            check(copy)
        return sign(copy, signer)


# -- checking --------------------------------------------------------------------------------------
def _signature(file: BinaryIO) -> tuple[bytes, bytes, bytes] | None:
    """The public key and signature the trailer of the open `file` holds, and the digest of what
    they sign; None when the file has no trailer."""
    size = file.seek(0, os.SEEK_END)
    if size < TRAILER_BYTES:
        return None
    file.seek(size - TRAILER_BYTES)
    match = _TRAILER.fullmatch(file.read(TRAILER_BYTES))
    if match is None:
        return None
    return bytes.fromhex(match[1].decode()), bytes.fromhex(match[2].decode()), _digest(file, size - TRAILER_BYTES)


def _valid(public: bytes, signature: bytes, digest: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, _CONTEXT + digest)
    except (InvalidSignature, ValueError):
        return False
    return True


def untrusted(file: BinaryIO, path: PathLike, required: list[Ed25519PublicKey] | None) -> str | None:
    """Why the open `file` (at `path`) may not be loaded under the `required` keys (`trusted`), or
    None: it is signed by one of them (or no keys are required). Reads the file's tail and hashes
    the rest; parses nothing else."""
    if required is None:
        return None
    found = _signature(file)
    if found is None:
        return f"{path} is not signed, and only files signed by a trusted key may be loaded"
    public, signature, digest = found
    if public not in {_raw(k) for k in required}:
        return (
            f"{path} is signed by key {fingerprint(public)}, which is not trusted "
            f"(trusted: {', '.join(fingerprint(k) for k in required)})"
        )
    if not _valid(public, signature, digest):
        return f"{path}: its signature does not match its contents (the file was changed after it was signed)"
    return None


def describe(file: BinaryIO) -> str:
    """Who signed the open `file`, and whether the signature matches the file (not whether that
    key is trusted: that is the loader's list)."""
    found = _signature(file)
    if found is None:
        return "none (unsigned)"
    public, signature, digest = found
    state = "valid" if _valid(public, signature, digest) else "INVALID: the file was changed after it was signed"
    return f"Ed25519 key {fingerprint(public)} ({state})"
