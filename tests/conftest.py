import contextlib
import os
import sys
import tempfile
import zlib
from pathlib import Path
from types import ModuleType
from typing import Iterator

import pytest
import torch
from support_audit import SupportAudit

# TRT_LOWER_TEST_TENSORRT=double: the whole session runs as on a machine where TensorRT imports
# and CUDA works, the TensorRT double standing in for both (see docs/guarantees.md, "What is verified where").
DOUBLE_SESSION = os.environ.get("TRT_LOWER_TEST_TENSORRT") == "double"


_session = contextlib.ExitStack()


def pytest_configure(config: pytest.Config) -> None:
    if not DOUBLE_SESSION:
        return
    from trt_double import PATH
    from trt_double.device import HostDevice

    from trt_lower.values import device

    sys.path.insert(0, str(PATH))  # `import tensorrt` finds the double (tests/trt_double/tensorrt)
    sys.modules.pop("tensorrt", None)
    # CUDA as TensorRT engines see it: usable, on the host.
    _session.enter_context(device.using(HostDevice()))
    patch = _session.enter_context(pytest.MonkeyPatch.context())
    patch.setenv("TRT_LOWER_CACHE_DIR", _session.enter_context(tempfile.TemporaryDirectory()))


def pytest_unconfigure(config: pytest.Config) -> None:
    _session.close()


# The quick subset (`pytest -m quick`), which CI also runs against the newest ONNX Runtime, onnx and
# transformers (.ci/run): these files whole (models, saved artifacts, the CLI, the engine runtime
# on ONNX Runtime, generation through transformers' generate()) and an eighth of the converter tests, picked by a hash of their id, so the same
# ones whatever else is selected.
QUICK_FILES = frozenset(
    {
        "test_models.py",
        "test_artifact.py",
        "test_cli.py",
        "test_engine_runtime.py",
        "test_ort_runtime.py",
        "test_llm.py",
    }
)


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
    assert not audit.found, (
        f"{len(audit.found)} emitted ONNX node(s) break their TensorRT version's table:\n" + "\n".join(audit.found)
    )


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _fresh_double() -> None:
    """Under TRT_LOWER_TEST_TENSORRT=double, no test sees the failure knobs another one set."""
    if DOUBLE_SESSION:
        from trt_double import double

        double.reset()


@pytest.fixture
def trt_double(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ModuleType]:
    """`tensorrt` is the TensorRT double, trt_lower's device seam is on the CPU, and the engine
    cache is empty. The TensorRT version is the indirect parameter (default 10.13.0)."""
    from trt_double.activate import trt_double

    with trt_double(getattr(request, "param", "10.13.0"), tmp_path / "engines") as double:
        yield double
