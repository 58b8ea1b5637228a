import sys
from pathlib import Path
from types import ModuleType
from typing import Iterator

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))


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
