"""One base class under every error trt_lower raises on purpose, each keeping its builtin base;
every public error exported from `trt_lower`; the version in the package, the CLI and artifacts."""

from __future__ import annotations

import ast
import builtins
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import torch

import trt_lower
from trt_lower.values.versions import own_version

ROOT = Path(__file__).resolve().parent.parent
BUILTIN_EXCEPTIONS = {name for name in dir(builtins) if name.endswith("Error")} | {"Exception"}

# Public error -> the builtin it must stay (callers that catch ValueError keep working).
PUBLIC_ERRORS = {
    "ArtifactError": ValueError,
    "CalibrationError": ValueError,
    "CaptureError": RuntimeError,
    "ConversionError": RuntimeError,
    "EngineBuildError": RuntimeError,
    "EngineInputError": ValueError,
    "GenerationLimitError": ValueError,
    "IndexOutOfRangeError": IndexError,
    "InputStructureError": ValueError,
    "LoweredMismatch": AssertionError,
    "UnsupportedOpsError": RuntimeError,
    "VerificationError": RuntimeError,
    "WeightUpdateError": ValueError,
}


@pytest.mark.parametrize("name", sorted(PUBLIC_ERRORS))
def test_public_error_is_exported_with_common_and_builtin_base(name: str) -> None:
    error = getattr(trt_lower, name)
    assert name in trt_lower.__all__
    assert issubclass(error, trt_lower.TrtLowerError)
    assert issubclass(error, PUBLIC_ERRORS[name])


def _errors_without_base(files: list[Path]) -> list[str]:
    """Public classes deriving from a builtin exception without also deriving from TrtLowerError
    (private ones, `_Dispatched`, stop a call inside trt_lower and never reach a user)."""
    wrong = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_") and node.name != "TrtLowerError":
                bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
                if bases & BUILTIN_EXCEPTIONS and "TrtLowerError" not in bases:
                    wrong.append(f"{path.name}: {node.name}")
    return wrong


def test_every_error_class_of_ours_derives_from_the_base() -> None:
    files = [p for top in ("trt_lower", "converters", "splitter") for p in (ROOT / top).rglob("*.py")]
    assert _errors_without_base(files) == []


def test_an_error_class_without_the_base_is_found(tmp_path: Path) -> None:
    planted = tmp_path / "bad.py"
    planted.write_text(
        "class Oops(ValueError):\n    pass\n\nclass _Flow(Exception):\n    pass\n\nclass Fine(TrtLowerError, ValueError):\n    pass\n"
    )
    assert _errors_without_base([planted]) == ["bad.py: Oops"]


def test_require_full_raises_one_type_for_a_failed_engine_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every way require_full refuses is an UnsupportedOpsError (here: the engine build fails)."""
    from trt_lower.engine import engines
    from trt_lower.engine.errors import EngineBuildError

    def refuse(segments: object, *args: object, **kwargs: object) -> None:
        raise EngineBuildError("engine_0", "simulated build failure", {"relu": "simulated"})

    monkeypatch.setattr("trt_lower.api.build", refuse)
    assert engines.build is not refuse  # only the pipeline's reference is replaced
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    with pytest.raises(trt_lower.UnsupportedOpsError, match="simulated build failure") as e:
        trt_lower.lower_to_trt(model, (torch.randn(2, 4),), backend="onnxruntime", require_full=True)
    assert isinstance(e.value.__cause__, trt_lower.EngineBuildError)


def test_version_is_the_package_metadata() -> None:
    assert trt_lower.__version__ == metadata.version("trt_lower") == own_version()
    assert "__version__" in dir(trt_lower)


def test_cli_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trt_lower", "--version"], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"trt-lower {trt_lower.__version__}"
