"""The suite-wide audit of emitted ONNX against converters/passes/trt_support.py (see conftest.py)."""

from __future__ import annotations

import onnx

from converters.core.target import TrtTarget
from converters.passes import trt_support


class SupportAudit:
    """Registered with the convert stage (trt_lower.convert.driver.ON_SEGMENT): checks every segment's
    final ONNX against the table of the version being lowered for, and keeps what breaks it."""

    def __init__(self) -> None:
        self.models = 0
        self.found: list[str] = []

    def check(self, model: onnx.ModelProto, goal: TrtTarget) -> list[str]:
        self.models += 1
        problems = [
            f"{model.graph.name} for TensorRT {goal.version}: {v}" for v in trt_support.violations(model, goal.version)
        ]
        self.found += problems
        return problems

    def take(self) -> list[str]:
        """The violations found so far, forgotten (for tests that cause them on purpose)."""
        taken, self.found = self.found, []
        return taken
