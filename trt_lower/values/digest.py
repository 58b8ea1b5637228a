"""A SHA-256 taken of what is written through it: weights hashed where they lie, as they are written."""

from __future__ import annotations

import hashlib
from typing import IO


class Hashing:
    """Writes go to `file` (when given) and into the hash."""

    def __init__(self, file: IO[bytes] | None = None) -> None:
        self.file = file
        self.digest = hashlib.sha256()

    def write(self, data: bytes | memoryview) -> int:
        self.digest.update(data)
        return len(data) if self.file is None else self.file.write(data)

    def hexdigest(self) -> str:
        return self.digest.hexdigest()
