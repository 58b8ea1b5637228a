"""Dependencies run one way: stages -> engine-building layer -> runtime modules, and the
converters and splitter know nothing of trt_lower. Read from the source with `ast`."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Package folder -> the trt_lower modules its files may import (by prefix).
ALLOWED = {
    "trt_lower/runtime": ("trt_lower.runtime.", "trt_lower.device"),
    "trt_lower/engine": ("trt_lower.engine.", "trt_lower.runtime.", "trt_lower.device"),
    "converters": (),
    "splitter": (),
}


def imported(path: Path) -> set[str]:
    """Every module (or module.name) a file imports, anywhere in it, relative imports resolved."""
    package = ".".join(path.relative_to(ROOT).parent.parts)
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_imports_run_one_way(folder: str) -> None:
    files = sorted((ROOT / folder).rglob("*.py"))
    assert files, f"{folder} has no Python files"
    wrong = [f"{path.relative_to(ROOT)} imports {name}"
             for path in files for name in sorted(imported(path))
             if (name == "trt_lower" or name.startswith("trt_lower."))
             and not name.startswith(ALLOWED[folder])]
    assert not wrong, "\n".join(wrong)


def test_imports_are_read_with_their_names() -> None:
    source = ROOT / "trt_lower" / "runtime" / "guard.py"
    names = imported(source)
    assert "trt_lower.runtime.signature.TensorSig" in names
    assert not any(n.startswith("trt_lower.engine") for n in names)
    assert "trt_lower.convert.ConvertedSegment" in imported(ROOT / "trt_lower" / "build.py")
