"""Dependencies run one way, read from the source with `ast`: every import a module runs, at the
top or inside a function (imports under `if TYPE_CHECKING:` only name types for the checker and
never run, so they are left out).

The rules (README, "How it works"):
- converters/ and splitter/ never import trt_lower;
- each part of trt_lower imports only parts of a lower rank than its own (RANK), or its own
  package: values/ at the bottom, the stages above it, the public API above them, the uses on top;
- values/ takes from converters/ only the ONNX container, the TensorRT versions and the error base;
- runtime/ imports nothing of the build side, of converters/ (but its error base) or of splitter/, not even through
  the modules it imports;
- stitch/ imports neither convert/ nor converters/;
- no module imports another module's `_private` names;
- no circles among modules.
Each rule is also shown to catch a breach of it, on a small tree written for the purpose.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = ("trt_lower", "converters", "splitter")

# The parts of trt_lower (a sub-package or a top-level module) by layer; a part imports only from
# lower layers (and within itself). `trt_lower` itself is the package's __init__, the public face.
RANK = {
    "values": 0,
    "runtime": 1,
    "report": 1,
    "capture": 2,
    "convert": 2,
    "engine": 2,
    # build: the deprecated alias of engine/ (trt_lower/build/__init__.py), which nothing of ours imports.
    "stitch": 3,
    "lowering_options": 3,
    "verify": 3,
    "build": 3,
    "api": 4,
    "profile": 4,
    "deploy": 5,
    "benchmarking": 5,
    "debug": 6,
    "dynamo_backend": 6,
    "llm": 6,
    "quantization": 6,
    "trt_lower": 7,
    "refit": 7,
    # distributed: lowering a tensor-parallel model (over the API and trt_lower.llm's generation).
    "distributed": 7,
    "testing": 8,
    "triton": 8,
    "cli": 9,
    "__main__": 10,
}
# What values/ may take from converters/: the ONNX container segments travel in, the TensorRT
# versions settings are checked against, and the base of every error.
VALUES_FROM_CONVERTERS = ("converters.core.segment", "converters.core.target", "converters.core.errors")
RUNTIME_MUST_NOT_REACH = (
    "trt_lower.engine",
    "trt_lower.build",
    "trt_lower.convert",
    "trt_lower.capture",
    "converters",
    "splitter",
)
# ... except the base of every error (it imports nothing) and the packages around it (converters/
# imports its public names lazily).
RUNTIME_MAY_REACH = frozenset({"converters", "converters.core", "converters.core.errors"})


def module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the nodes inside `if TYPE_CHECKING:` blocks."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            inside.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return inside


def imports(root: Path, path: Path) -> list[tuple[str, str]]:
    """(module, name) for every import the file runs: ("a.b", "") for `import a.b`, ("a", "b") for
    `from a import b`; relative imports resolved."""
    name = module_name(root, path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_only(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.extend((alias.name, "") for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            found.extend((module, alias.name) for alias in node.names)
    return found


class Tree:
    """The modules of trt_lower/, converters/ and splitter/ under `root`, and what each imports."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files = {module_name(root, p): p for top in OURS for p in sorted((root / top).rglob("*.py"))}
        self.edges = {m: imports(root, p) for m, p in self.files.items()}

    def resolve(self, module: str, name: str) -> str | None:
        """The module of ours an import loads: `from a import b` loads a.b where b is a module."""
        for candidate in (f"{module}.{name}" if name else "", module):
            if candidate in self.files:
                return candidate
        return None

    def deps(self, module: str) -> set[str]:
        """Our modules `module` imports directly (each import also runs the packages above it)."""
        out = set()
        for mod, name in self.edges[module]:
            target = self.resolve(mod, name)
            if target is not None and target != module:
                out.add(target)
        return out

    def reach(self, module: str) -> set[str]:
        seen, todo = set(), [module]
        while todo:
            for dep in self.deps(todo.pop()):
                chain = dep.split(".")
                for i in range(1, len(chain) + 1):  # importing a.b.c runs a and a.b first
                    parent = ".".join(chain[:i])
                    if parent in self.files and parent not in seen:
                        seen.add(parent)
                        todo.append(parent)
        return seen


def part(module: str) -> str | None:
    """The part of trt_lower a module belongs to ("engine" for trt_lower.engine.cache)."""
    pieces = module.split(".")
    if pieces[0] != "trt_lower":
        return None
    return pieces[1] if len(pieces) > 1 else "trt_lower"


def breaches(tree: Tree) -> list[str]:
    wrong = []
    for module in tree.files:
        here = part(module)
        top = module.split(".")[0]
        for mod, name in tree.edges[module]:
            target = tree.resolve(mod, name) or mod
            there = part(target)
            if top in ("converters", "splitter") and target.split(".")[0] == "trt_lower":
                wrong.append(f"{module} imports {target}: converters/ and splitter/ know nothing of trt_lower")
            if here is not None and there is not None and here != there and RANK[there] >= RANK[here]:
                wrong.append(
                    f"{module} imports {target}: {here} (layer {RANK[here]}) may only import "
                    f"lower layers, {there} is layer {RANK[there]}"
                )
            if here == "values" and target.startswith("converters") and not target.startswith(VALUES_FROM_CONVERTERS):
                wrong.append(f"{module} imports {target}: values/ takes only {VALUES_FROM_CONVERTERS} from converters/")
            if here == "stitch" and (there == "convert" or target.startswith("converters")):
                wrong.append(f"{module} imports {target}: stitching knows nothing of converting")
            if name.startswith("_") and f"{mod}.{name}" not in tree.files and mod.split(".")[0] in OURS:
                wrong.append(f"{module} imports {mod}.{name}: another module's private name")
        if here == "runtime":
            wrong.extend(
                f"{module} reaches {r}: the runtime knows nothing of building or converting"
                for r in sorted(tree.reach(module))
                if r.startswith(RUNTIME_MUST_NOT_REACH) and r not in RUNTIME_MAY_REACH
            )
    return wrong


def circles(tree: Tree) -> list[list[str]]:
    """The import cycles among our modules (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in tree.deps(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(tree.files):
        if v not in index:
            visit(v)
    return found


def test_imports_run_one_way() -> None:
    tree = Tree(ROOT)
    unranked = {part(m) for m in tree.files} - set(RANK) - {None}
    assert not unranked, f"parts of trt_lower with no layer in RANK: {unranked}"
    wrong = breaches(tree)
    assert not wrong, "\n".join(wrong)


def test_no_import_circles() -> None:
    found = circles(Tree(ROOT))
    assert not found, "\n".join(" <-> ".join(c) for c in found)


def test_top_level_holds_only_the_public_face_and_sub_packages() -> None:
    modules = sorted(p.name for p in (ROOT / "trt_lower").glob("*.py"))
    assert modules == ["__init__.py", "__main__.py", "api.py", "dynamo_backend.py", "lowering_options.py", "testing.py"]
    for package in sorted(p for p in (ROOT / "trt_lower").iterdir() if (p / "__init__.py").exists()):
        assert ast.get_docstring(ast.parse((package / "__init__.py").read_text())), f"{package.name}/ says nothing"


# Each rule, broken on purpose: a tree with the real layout and one offending file.
BREACHES = {
    "runtime imports converters": ("trt_lower/runtime/bad.py", "from converters.core.dtypes import ONNX_TYPES\n"),
    "values imports a stage": ("trt_lower/values/bad.py", "from trt_lower.engine import cache\n"),
    "stitch imports convert": ("trt_lower/stitch/bad.py", "from trt_lower.convert.driver import convert\n"),
    "converters import trt_lower": ("converters/ops/bad.py", "import trt_lower.values.signature\n"),
    "a private name": ("trt_lower/deploy/bad.py", "from trt_lower.engine.backend import _warned_unusable\n"),
    "an import up the layers inside a function": (
        "trt_lower/engine/bad.py",
        "def f():\n    from trt_lower.debug import accuracy\n",
    ),
}


def _tree_with(tmp_path: Path, path: str, source: str) -> Tree:
    for top in OURS:
        for file in (ROOT / top).rglob("*.py"):
            copy = tmp_path / file.relative_to(ROOT)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(file.read_text())
    (tmp_path / path).write_text(source)
    return Tree(tmp_path)


@pytest.mark.parametrize("case", sorted(BREACHES))
def test_each_rule_catches_its_breach(tmp_path: Path, case: str) -> None:
    path, source = BREACHES[case]
    assert breaches(_tree_with(tmp_path, path, source))


def test_a_circle_closed_inside_a_function_is_found(tmp_path: Path) -> None:
    tree = _tree_with(
        tmp_path,
        "trt_lower/debug/compare.py",
        (ROOT / "trt_lower/debug/compare.py").read_text()
        + "\n\ndef _late():\n    from trt_lower.debug import accuracy\n",
    )
    assert any("trt_lower.debug.compare" in c and "trt_lower.debug.accuracy" in c for c in circles(tree))


def test_the_runtime_is_checked_through_what_it_imports(tmp_path: Path) -> None:
    signature = (ROOT / "trt_lower/values/signature.py").read_text()
    tree = _tree_with(tmp_path, "trt_lower/values/signature.py", signature + "\nimport splitter.support\n")
    assert any("trt_lower.runtime" in w and "reaches splitter" in w for w in breaches(tree))


def test_type_checking_imports_are_left_out() -> None:
    found = imports(ROOT, ROOT / "trt_lower" / "report" / "draw.py")
    assert ("trt_lower.report.entries", "GraphNode") in found
    assert ("trt_lower.report.report", "LoweringReport") not in found  # under TYPE_CHECKING
