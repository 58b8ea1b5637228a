from pathlib import Path
from types import ModuleType
from typing import Iterator

import pytest
import torch

from support_audit import SupportAudit


@pytest.fixture(scope="session", autouse=True)
def support_audit() -> Iterator[SupportAudit]:
    """Every engine's ONNX the suite produces is checked against the support table of the
    TensorRT version it was lowered for; the session fails (at its last teardown) if any broke
    it. Tests that make violations on purpose take theirs back with `audit.take()`."""
    from trt_lower.convert import driver as convert
    audit = SupportAudit()
    convert.ON_SEGMENT.append(audit.check)
    try:
        yield audit
    finally:
        convert.ON_SEGMENT.remove(audit.check)
    assert not audit.found, f"{len(audit.found)} emitted ONNX node(s) break their TensorRT version's table:\n" + \
        "\n".join(audit.found)


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.fixture
def trt_double(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ModuleType]:
    """`tensorrt` is the TensorRT double, trt_lower's device seam is on the CPU, and the engine
    cache is empty. The TensorRT version is the indirect parameter (default 10.13.0)."""
    from trt_double.activate import trt_double

    with trt_double(getattr(request, "param", "10.13.0"), tmp_path / "engines") as double:
        yield double
