from pathlib import Path
from types import ModuleType
from typing import Iterator
import zlib

import pytest
import torch

from support_audit import SupportAudit


# The quick subset (`pytest -m quick`), which CI also runs against the newest ONNX Runtime, onnx and
# transformers (.ci/run): these files whole (models, saved artifacts, the CLI, the engine runtime
# on ONNX Runtime) and an eighth of the converter tests, picked by a hash of their id, so the same
# ones whatever else is selected.
QUICK_FILES = frozenset({"test_models.py", "test_artifact.py", "test_cli.py", "test_engine_runtime.py",
                         "test_ort_runtime.py"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        name = item.path.name
        if name in QUICK_FILES or (name == "test_converters.py" and zlib.crc32(item.nodeid.encode()) % 8 == 0):
            item.add_marker(pytest.mark.quick)


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
