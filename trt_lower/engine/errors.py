"""What the TensorRT engine layer raises to the lowering, importable without TensorRT."""

from __future__ import annotations

from typing import Mapping

from converters.core.errors import TrtLowerError


class EngineBuildError(TrtLowerError, RuntimeError):
    """TensorRT could not build (or load) a segment's engine, or ONNX Runtime could not load it.

    `nodes` maps the FX nodes that run in eager PyTorch instead to the reason: the one node
    TensorRT's ONNX parser rejected when it names one, else every node of the segment.
    """

    def __init__(self, segment: str, reason: str, nodes: Mapping[str, str], runtime: str = "TensorRT") -> None:
        self.segment = segment
        self.reason = reason
        self.nodes = dict(nodes)
        super().__init__(f"{runtime} could not build {segment}: {reason}")


class TimingCacheError(TrtLowerError, ValueError):
    """The timing_cache file given cannot be used: unreadable, or TensorRT refuses what it holds
    (corrupt, or written by another TensorRT version or for another GPU). `path` is the file."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        super().__init__(
            f"timing_cache {path}: {reason} (delete it, or give another path, to start a new timing cache there)"
        )
