"""The documentation keeps its promises: every public name has a reference entry with an example,
the examples run, CONTRIBUTING's converter walk-through adds a working converter, and the README
stays short while linking every page of the site."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Iterator

import pytest

from converters.core import registry
from converters.core.target import TrtTarget

ROOT = Path(__file__).resolve().parent.parent
API = ROOT / "docs" / "api"
# The modules whose __all__ is the public API, and the pages documenting them.
PUBLIC_MODULES = (
    "trt_lower",
    "trt_lower.debug",
    "trt_lower.llm",
    "trt_lower.quantization",
    "trt_lower.triton",
    "trt_lower.testing",
)
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _public_names() -> set[str]:
    names = set()
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        exported = getattr(module, "__all__", None)
        if exported is None:  # a package re-exporting with `import x as x`
            exported = [
                n
                for n, v in vars(module).items()
                if not n.startswith("_") and getattr(v, "__module__", "").startswith(module_name)
            ]
        names |= {f"{module_name}.{n}" for n in exported}
    return names


def _entries() -> dict[str, str]:
    """`::: name` -> the text up to the next entry (where its example must be)."""
    entries: dict[str, str] = {}
    for page in API.glob("*.md"):
        parts = re.split(r"^::: (\S+)\n", page.read_text(), flags=re.M)
        entries.update(zip(parts[1::2], parts[2::2]))
    return entries


def test_every_public_name_has_a_reference_entry_with_an_example() -> None:
    entries = _entries()
    missing = sorted(_public_names() - entries.keys())
    assert not missing, f"public names without a `::: name` entry in docs/api/: {missing}"
    without_example = sorted(name for name, text in entries.items() if not FENCE.search(text))
    assert not without_example, f"reference entries without a python example: {without_example}"


def test_every_public_name_has_a_docstring_of_its_own() -> None:
    """The reference renders docstrings: a dataclass's generated `Name(field, ...)` is not one."""
    undocumented = []
    for name in sorted(_public_names()):
        module_name, _, attr = name.rpartition(".")
        value = getattr(importlib.import_module(module_name), attr)
        if not callable(value):
            continue
        doc = vars(value).get("__doc__") if isinstance(value, type) else value.__doc__
        if not doc or doc.startswith(f"{attr}("):
            undocumented.append(name)
    assert not undocumented, f"public names without a docstring: {undocumented}"


@contextlib.contextmanager
def _registry_restored() -> Iterator[None]:
    """The converter registry put back as it was: it is process-wide, and a converter an example
    registers (trt_lower.converter) stayed registered for the tests after it (test_converters.py's
    every converter has a case)."""
    registry.supported_ops()  # the built-in families registered first: they are part of what is kept
    before = dict(registry._REGISTRY)
    try:
        yield
    finally:
        registry._REGISTRY.clear()
        registry._REGISTRY.update(before)


def _run_examples(page: Path) -> None:
    """A page's examples run in order in one namespace, as a reader would paste them (the registry restored after)."""
    where = page.relative_to(ROOT)
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    with _registry_restored():
        for i, block in enumerate(FENCE.findall(page.read_text())):
            try:
                exec(compile(block, f"{where} example {i + 1}", "exec"), namespace)
            except Exception as e:
                raise AssertionError(f"{where}, example {i + 1} failed:\n{block}") from e


@pytest.mark.parametrize("page", sorted(p.name for p in API.glob("*.md")))
def test_reference_examples_run(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _run_examples(API / page)


def test_a_converter_an_example_registers_is_unregistered_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """converters.md registers docs_example.scaled_tanh; left in the registry, test_converters.py's
    test_every_converter_has_a_case failed when it ran after this file."""
    monkeypatch.chdir(tmp_path)
    before = registry.supported_ops()
    _run_examples(API / "converters.md")
    assert registry.supported_ops() == before


def test_getting_started_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _run_examples(ROOT / "docs" / "getting-started.md")


def test_contributing_walkthrough_adds_a_working_converter() -> None:
    """The converter of CONTRIBUTING.md's worked example, registered as a contributor would, runs
    inside an engine and matches eager (in a subprocess: the registry is process-wide)."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    example = text.split("<!-- contributing-example", 1)[1]
    converter_code = FENCE.search(example)
    assert converter_code is not None, "CONTRIBUTING.md's marked converter example is missing"
    check = textwrap.dedent("""
        import torch
        from harness import lower_and_compare
        x, y = torch.randn(3, 4), torch.rand(3, 4)
        x[0, 0] = 0.0
        lower_and_compare(lambda a, b: torch.special.xlog1py(a, b), (x, y),
                          ops=[torch.ops.aten.special_xlog1py.default])
        print("converter ran in an engine")
    """)
    result = subprocess.run(
        [sys.executable, "-c", converter_code.group(1) + check],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "converter ran in an engine" in result.stdout


def test_readme_is_short_and_links_every_guide() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    nav = (ROOT / "mkdocs.yml").read_text()
    # The guides and the reference's overview; the overview links each reference page.
    pages = {
        p
        for p in re.findall(r":\s+(\S+\.md)\s*$", nav, flags=re.M)
        if p != "index.md" and (not p.startswith("api/") or p == "api/index.md")
    }
    unlinked = sorted(p for p in pages if f"docs/{p}" not in readme)
    assert not unlinked, f"README.md does not link these pages of the site: {unlinked}"


# Each public function that takes options -> the guides that explain them.
GUIDES = {
    "trt_lower.api:lower_to_trt": "lowering.md",
    "trt_lower.debug.accuracy:check_accuracy": "accuracy.md",
    "trt_lower.testing:assert_lowered_close": "accuracy.md",
    "trt_lower.debug.divergence:first_divergence": "accuracy.md",
    "trt_lower.debug.fp16:fp16_sensitive": "accuracy.md",
    "trt_lower.benchmarking.measure:benchmark": "benchmarking.md",
    "trt_lower.deploy.artifact:save": "deploy.md security.md",
    "trt_lower.deploy.artifact:load": "deploy.md security.md",
    "trt_lower.quantization.quantizer:quantize": "quantization.md",
    "trt_lower.stitch.lowered:LoweredModule.update_weights": "refit.md",
    "trt_lower.stitch.lowered:LoweredModule.profile": "performance.md",
    "trt_lower.profile.profile:Profile.table": "performance.md",
    "trt_lower.llm.lower:lower_causal_lm": "generation.md",
    "trt_lower.triton.repository:export_model_repository": "triton.md",
}


def _options(function: object) -> list[str]:
    """The parameters a caller chooses: keyword-only ones and those with a default."""
    return [
        p.name
        for p in inspect.signature(function).parameters.values()  # type: ignore[arg-type]
        if p.kind is inspect.Parameter.KEYWORD_ONLY
        or (p.default is not inspect.Parameter.empty and p.kind is not inspect.Parameter.VAR_KEYWORD)
    ]


def _undocumented(options: list[str], page: str) -> list[str]:
    """The options no code of `page` mentions: a fenced example or an inline span (`name`,
    `name=...`, a signature)."""
    blocks = re.findall(r"^```\w*\n(.*?)^```", page, flags=re.S | re.M)
    prose = re.sub(r"^```.*?^```", "", page, flags=re.S | re.M)
    spans = " ".join(blocks + re.findall(r"`([^`]+)`", prose))
    return [o for o in options if not re.search(rf"\b{o}\b", spans)]


@pytest.mark.parametrize("where", sorted(GUIDES))
def test_every_option_appears_in_its_guide(where: str) -> None:
    module, _, path = where.partition(":")
    function: object = importlib.import_module(module)
    for attr in path.split("."):
        function = getattr(function, attr)
    pages = GUIDES[where].split()
    missing = _undocumented(_options(function), "\n".join((ROOT / "docs" / p).read_text() for p in pages))
    assert not missing, f"docs/{' and docs/'.join(pages)} do not mention {path}'s options {missing}"


def test_a_removed_option_is_found() -> None:
    def lower(model: object, inputs: object, *, backend: str = "auto", verify: bool = True) -> None: ...

    page = "`lower(model, inputs, backend=...)`\n```python\nlower(m, x, backend='auto')\n```\n"
    assert _undocumented(_options(lower), page) == ["verify"]


FUSED = 23


def _refused_below_10_4(node: object, trt_target: TrtTarget) -> str | None:
    if node is not None and not trt_target.at_least("10.4"):
        return f"a node of {node} ({trt_target.label} cannot)"
    return _fused(node, trt_target)


def _fused(node: object, trt_target: TrtTarget) -> str | None:
    return "no fused op" if trt_target.opset < FUSED else None


def test_the_operators_page_reads_each_targets_limits_from_the_check() -> None:
    """A check's uses of the target (here one in a function it calls) become the target columns,
    with what the check returns there; a target it does not limit shows ✓."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        page = importlib.import_module("supported_ops")
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    cells = page._per_target(type("Entry", (), {"capability": staticmethod(_refused_below_10_4)}))
    assert cells == ["a node of … (TensorRT 8.6 cannot); no fused op", "no fused op", "no fused op", "✓"]


def test_supported_operators_page_is_the_registry() -> None:
    """docs/operators.md is generated (scripts/supported_ops.py): a converter added or removed
    without regenerating it fails here. In a fresh process: converters other tests register (a
    user's, torchao's by name) are no part of the page."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "supported_ops.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
