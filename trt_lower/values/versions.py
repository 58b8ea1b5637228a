"""Version strings as numbers."""

from __future__ import annotations

import re


def parse_version(version: str) -> tuple[int, int]:
    """(major, minor) of a version string such as TensorRT's '10.4.0.26'; (0, 0) if it has none."""
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match[1]), int(match[2])) if match else (0, 0)
