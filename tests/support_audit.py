"""The suite-wide audit of emitted ONNX against converters/passes/trt_support.py (see conftest.py)."""
from __future__ import annotations

from typing import Any, Callable

import onnx

from converters.core.target import Target
from converters.passes import trt_support
from converters.passes.weights import OnnxSegment


class SupportAudit:
    """Wraps the function that makes each engine's final ONNX; checks every model it returns
    against the table of the version being lowered for, and keeps what breaks it."""

    def __init__(self) -> None:
        self.models = 0
        self.found: list[str] = []

    def check(self, model: onnx.ModelProto, version: str) -> list[str]:
        self.models += 1
        problems = [f"{model.graph.name} for TensorRT {version}: {v}" for v in trt_support.violations(model, version)]
        self.found += problems
        return problems

    def wrap(self, segment_onnx: Callable[..., OnnxSegment]) -> Callable[..., OnnxSegment]:
        def audited(*args: Any, **kwargs: Any) -> OnnxSegment:
            segment = segment_onnx(*args, **kwargs)
            goal = kwargs.get("target", args[-1])
            assert isinstance(goal, Target)
            self.check(segment.model, goal.version)
            return segment

        return audited

    def take(self) -> list[str]:
        """The violations found so far, forgotten (for tests that cause them on purpose)."""
        taken, self.found = self.found, []
        return taken
