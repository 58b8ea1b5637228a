"""Version strings as numbers, and trt_lower's own version."""

from __future__ import annotations

import configparser
import re
from importlib import metadata
from pathlib import Path


def parse_version(version: str) -> tuple[int, int]:
    """(major, minor) of a version string such as TensorRT's '10.4.0.26'; (0, 0) if it has none."""
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match[1]), int(match[2])) if match else (0, 0)


def own_version() -> str:
    """trt_lower's version: the installed package's metadata, else (a source tree on sys.path) the
    version setup.cfg declares beside the package."""
    try:
        return metadata.version("trt_lower")
    except metadata.PackageNotFoundError:
        config = configparser.ConfigParser()
        config.read(Path(__file__).resolve().parents[2] / "setup.cfg")
        return config.get("metadata", "version", fallback="0+unknown")
