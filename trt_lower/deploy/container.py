"""The artifact's zip container, read as untrusted input: which members there are, where their
bytes lie, and that each is what the manifest's SHA-256 says, checked as it is read.

Rules, each checked before a member's bytes are used:
- every member is stored (not compressed), its stored and declared sizes agree, and its bytes lie
  inside the file: no member can inflate (a zip bomb) or reach past the end;
- no name appears twice, and the members are exactly those the manifest lists (plus the manifest);
- a member is hashed while it is read into memory this process owns, and refused on a mismatch:
  what was checked is what is used, whatever happens to the file afterwards (it may be
  overwritten, truncated or replaced while the model runs; nothing of it is memory-mapped);
- the file is opened once (`open_file`), and its structure, its members and its signature
  (signing.py) are all read from that one open file: replacing the path while it is read
  changes nothing of what is loaded.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import struct
import weakref
import zipfile
from pathlib import Path
from typing import Any, BinaryIO, cast

import numpy as np
from numpy.typing import NDArray

from converters.core.errors import TrtLowerError
from converters.core.segment import ALIGNMENT
from trt_lower.values.digest import Hashing

MANIFEST = "manifest.json"
# The deepest nesting of lists and objects a manifest may have (a stored graph nests a few levels
# per argument or pytree level; far fewer than this).
MAX_DEPTH = 64
# The largest manifest read (parsed JSON takes up to ~30 times its text in memory): a large
# model's graph and report take a few MB.
MAX_MANIFEST_BYTES = 16 << 20
_CHUNK = 1 << 24
_LOCAL_HEADER = 30  # bytes of a zip local file header before its name and extra field


class ArtifactError(TrtLowerError, ValueError):
    """A file that is not a loadable trt_lower artifact, or a module that cannot be saved as one."""


def _depth(value: Any) -> int:
    """The nesting depth of parsed JSON, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


class Container:
    """An artifact's zip, its structure checked; members read on demand, each verified as read.
    `manifest` is the parsed manifest (checked only for being a JSON object of bounded depth
    with its checksums: its schema is manifest.py's)."""

    def __init__(self, path: Path, file: BinaryIO) -> None:
        self.path = path
        self.file = file  # the one open file everything is read from (`open_file`)
        # The file's logical end, not fstat's: a buffered file still holding written bytes has them counted.
        self.size = file.seek(0, os.SEEK_END)
        try:
            with zipfile.ZipFile(file) as archive:
                infos = archive.infolist()
        except zipfile.BadZipFile as e:
            raise ArtifactError(f"{path} is not a trt_lower artifact, or is truncated or corrupted ({e})") from None
        if MANIFEST not in {info.filename for info in infos}:
            raise ArtifactError(f"{path} is not a trt_lower artifact (it has no {MANIFEST})")
        named: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            self._check_stored(info)
            if info.filename in named:
                raise ArtifactError(f"{path}: member '{info.filename}' appears twice in the file")
            named[info.filename] = info
        self._verified: set[str] = set()
        self.sha256: dict[str, str] = {}
        manifest = named.pop(MANIFEST)
        if manifest.file_size > MAX_MANIFEST_BYTES:
            raise self.error(f"{MANIFEST} is {manifest.file_size} bytes; at most {MAX_MANIFEST_BYTES} are read")
        self.manifest = self._parse_manifest(self._read(manifest, None))
        self.infos = named  # the members besides the manifest
        self.sha256 = self._checksums()

    def error(self, message: str) -> ArtifactError:
        return ArtifactError(f"{self.path}: {message}")

    def _check_stored(self, info: zipfile.ZipInfo) -> None:
        name = info.filename
        if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
            raise self.error(f"member '{name}' is compressed; an artifact's members are stored as they are")
        if info.header_offset + _LOCAL_HEADER + len(name) + info.file_size > self.size:
            raise self.error(f"member '{name}' runs past the end of the file (truncated?)")

    def _parse_manifest(self, data: bytes) -> dict[str, Any]:
        try:
            manifest = json.loads(data)
        except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
            raise self.error(f"{MANIFEST} is not JSON ({type(e).__name__}: {e})") from None
        if not isinstance(manifest, dict):
            raise ArtifactError(f"{self.path} is not a trt_lower artifact (its {MANIFEST} is not one)")
        if _depth(manifest) > MAX_DEPTH:
            raise self.error(f"{MANIFEST} nests deeper than {MAX_DEPTH} levels")
        return manifest

    def _checksums(self) -> dict[str, str]:
        listed = self.manifest.get("sha256")
        if not isinstance(listed, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in listed.items()
        ):
            raise self.error("the manifest has no checksums (field 'sha256': member name -> SHA-256)")
        for name in self.infos:
            if name not in listed:
                raise self.error(f"member '{name}' is not listed in the manifest; refusing the file")
        for name in listed:
            if name not in self.infos:
                raise self.error(f"member '{name}' is missing (truncated file?)")
        return dict(listed)

    def _start(self, file: BinaryIO, info: zipfile.ZipInfo) -> int:
        """Where `info`'s bytes start in the file (after its local header)."""
        file.seek(info.header_offset)
        header = file.read(_LOCAL_HEADER)
        if len(header) != _LOCAL_HEADER or header[:4] != b"PK\x03\x04":
            raise self.error(f"member '{info.filename}' has no local header (the file is corrupted)")
        name_length, extra_length = struct.unpack("<HH", header[26:30])
        start: int = info.header_offset + _LOCAL_HEADER + name_length + extra_length
        if start + info.file_size > self.size:
            raise self.error(f"member '{info.filename}' runs past the end of the file (truncated?)")
        return start

    def _read(self, info: zipfile.ZipInfo, into: memoryview | None, keep: bool = True) -> bytes:
        """The member's bytes (b"" when read into `into` or not kept), hashed on the way; refused
        when the hash is not the manifest's (once the manifest is read)."""
        digest = hashlib.sha256()
        parts = []
        file = self.file
        file.seek(self._start(file, info))
        done = 0
        while done < info.file_size:
            n = min(_CHUNK, info.file_size - done)
            if into is None:
                chunk = file.read(n)
                if keep:
                    parts.append(chunk)
                got = len(chunk)
                digest.update(chunk)
            else:
                got = cast(io.BufferedIOBase, file).readinto(into[done : done + n])  # every open binary file has it
                digest.update(into[done : done + got])
            if got != n:
                raise self.error(f"member '{info.filename}' runs past the end of the file (truncated?)")
            done += n
        if info.filename != MANIFEST and digest.hexdigest() != self.sha256.get(info.filename):
            raise self.error(f"checksum mismatch in member '{info.filename}' (the file is corrupted)")
        self._verified.add(info.filename)
        return b"".join(parts)

    def _info(self, name: str) -> zipfile.ZipInfo:
        if name not in self.sha256:
            raise self.error(f"the manifest names member '{name}', which the file does not hold")
        return self.infos[name]

    def read(self, name: str) -> bytes:
        """Member `name`'s bytes, verified."""
        return self._read(self._info(name), None)

    def read_aligned(self, name: str) -> NDArray[np.uint8]:
        """Member `name`'s bytes, verified, in a buffer this process owns that lies as the member
        lies in the file modulo ALIGNMENT (arrays the writer placed aligned in the file are
        aligned in memory too)."""
        info = self._info(name)
        start = self._start(self.file, info)
        raw = np.empty(info.file_size + ALIGNMENT, dtype=np.uint8)
        offset = (start - raw.ctypes.data) % ALIGNMENT
        buffer = raw[offset : offset + info.file_size]
        self._read(info, memoryview(buffer.data).cast("B"))
        return buffer

    def verify(self) -> None:
        """Check the checksum of every member not read yet."""
        for name in self.sha256:
            if name not in self._verified:
                self._read(self.infos[name], None, keep=False)


def open_file(path: Path) -> BinaryIO:
    """The artifact file at `path`, opened once for everything read from it; FileNotFoundError when
    there is none, ArtifactError for a directory, FIFO or device (not read, nor waited on)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise FileNotFoundError(f"trt_lower.load: no such file: {path}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ArtifactError(f"{path} is not a regular file")
    return os.fdopen(fd, "rb")


def open_container(path: Path) -> Container:
    """The container at `path`, holding its own open file (closed with it)."""
    file = open_file(path)
    try:
        container = Container(path, file)
    except BaseException:
        file.close()
        raise
    weakref.finalize(container, file.close)
    return container


class Writer:
    """Members written into a zip as they are made, each stored, each one's SHA-256 taken on the way."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        self.zip = zipfile.ZipFile(file, "w", zipfile.ZIP_STORED, allowZip64=True)
        self.sha256: dict[str, str] = {}

    def add(self, name: str, data: bytes) -> None:
        self.zip.writestr(name, data)
        self.sha256[name] = hashlib.sha256(data).hexdigest()

    def add_aligned(self, name: str, write: Any) -> int:
        """A member whose content `write(file)` writes, its data starting at a multiple of
        ALIGNMENT in the file (padding first); returns the padding's length."""
        with self.zip.open(zipfile.ZipInfo(name), "w", force_zip64=True) as member:
            writer = Hashing(member)
            pad = -self.file.tell() % ALIGNMENT  # the member's data starts where the file is now
            writer.write(bytes(pad))
            write(writer)
        self.sha256[name] = writer.hexdigest()
        return pad

    def close(self, manifest: dict[str, Any]) -> None:
        """Write the manifest (with the checksums) and the zip's directory."""
        manifest["sha256"] = self.sha256
        with self.zip:
            self.zip.writestr(MANIFEST, json.dumps(manifest, indent=1, allow_nan=False))
