"""SizeConditions: what torch.export assumed about a call's input sizes beyond their ranges."""

from __future__ import annotations

import ast
import math
import unicodedata
from types import SimpleNamespace
from typing import Any, Callable, Sequence

import torch

from trt_lower.values.signature import EngineInputError

# What a condition may use besides its inputs' `.shape[i]`: the arithmetic, comparisons and
# functions torch's shape printer writes, nothing else (artifacts carry conditions as text).
_NODES = (
    ast.Expression,
    ast.Compare,
    ast.BoolOp,
    ast.UnaryOp,
    ast.BinOp,
    ast.Constant,
    ast.Name,
    ast.Load,
    ast.Attribute,
    ast.Subscript,
    ast.Call,
    ast.And,
    ast.Or,
    ast.Not,
    ast.USub,
    ast.UAdd,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.Mod,
    ast.Pow,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
)
_FUNCTIONS = {"min": min, "max": max, "abs": abs}
_MATH = {"floor", "ceil", "trunc"}
# torch's symbolic-size functions, as they act on plain ints (the only `torch.` names allowed).
_TORCH = SimpleNamespace(sym_float=float, sym_int=int, sym_max=max, sym_min=min)
_REMEMBERED = 1024  # the most met input shapes a SizeConditions keeps
_MODULE_FUNCTIONS = {("math", f) for f in _MATH} | {("torch", f) for f in vars(_TORCH)}
# Bounds that keep a condition's parsing and evaluation small whatever its text (artifacts are
# untrusted input): its length, its nesting, and its powers (a tower of them is a number too big to
# compute); torch's shape guards stay far inside them.
MAX_LENGTH = 2000
MAX_DEPTH = 40
MAX_POWERS = 2
MAX_EXPONENT = 8


def _depth(tree: ast.AST) -> int:
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _check_bounds(text: str, tree: ast.Expression) -> None:
    if _depth(tree) > MAX_DEPTH:
        raise ValueError(f"size condition {text[:80]!r}...: nests deeper than {MAX_DEPTH} levels")
    powers = [node for node in ast.walk(tree) if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow)]
    if len(powers) > MAX_POWERS:
        raise ValueError(f"size condition {text[:80]!r}: more than {MAX_POWERS} powers")
    for node in powers:
        exponent = node.right.value if isinstance(node.right, ast.Constant) else None
        if not (
            isinstance(exponent, (int, float)) and not isinstance(exponent, bool) and 0 <= exponent <= MAX_EXPONENT
        ):
            raise ValueError(
                f"size condition {text[:80]!r}: {ast.unparse(node)[:80]!r} is not allowed in one "
                f"(an exponent must be a constant from 0 to {MAX_EXPONENT})"
            )


def _check_syntax(text: str, names: Sequence[str], bounded: bool = True) -> tuple[ast.Expression, dict[ast.Name, int]]:
    """`text` parsed, if it is a condition on the sizes of the inputs `names` (within the bounds,
    where `bounded`), and which input each of its input names reads; else ValueError."""
    if bounded and len(text) > MAX_LENGTH:
        raise ValueError(f"size condition {text[:80]!r}... is {len(text)} characters long; at most {MAX_LENGTH}")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, RecursionError, MemoryError) as e:  # the parser's own limits on nesting
        raise ValueError(f"size condition {text[:200]!r} is not an expression: {e}") from None
    if bounded:
        _check_bounds(text, tree)
    # Python reads identifiers NFKC-normalized (`ﬁ` is `fi`), so the names are matched that way.
    index = {unicodedata.normalize("NFKC", n): k for k, n in enumerate(names)}
    if len(index) != len(names):
        raise ValueError(f"size condition {text!r}: input names {list(names)} cannot all be read in one")
    # A name is read by its place, not its spelling: `min(...)` and `math.floor(...)` call
    # functions, any other name is an input, whatever the inputs are called (`min`, `math`).
    functions: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id in _FUNCTIONS:
                functions.add(f)
            elif (
                isinstance(f, ast.Attribute)
                and isinstance(f.value, ast.Name)
                and (f.value.id, f.attr) in _MODULE_FUNCTIONS
            ):
                functions |= {f, f.value}
    inputs = {
        node: index[node.id]
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and node not in functions and node.id in index
    }
    for node in ast.walk(tree):
        ok = isinstance(node, _NODES) and not (
            isinstance(node, ast.Constant)
            and type(node.value) not in (int, float, bool)
            or isinstance(node, ast.Name)
            and node not in functions
            and node not in inputs
            or isinstance(node, ast.Attribute)
            and node not in functions
            and not (node.attr == "shape" and node.value in inputs)
            or isinstance(node, ast.Call)
            and (node.keywords or node.func not in functions)
        )
        if not ok:
            raise ValueError(f"size condition {text!r}: {ast.unparse(node)!r} is not allowed in one")
    return tree, inputs


class _Positional(ast.NodeTransformer):
    """Each input name read as `inputs[k]`, so that no input name can hide a function."""

    def __init__(self, inputs: dict[ast.Name, int]) -> None:
        self.inputs = inputs

    def visit_Name(self, node: ast.Name) -> ast.expr:
        k = self.inputs.get(node)
        if k is None:
            return node
        return ast.copy_location(ast.Subscript(ast.Name("inputs", ast.Load()), ast.Constant(k), ast.Load()), node)


def compile_condition(text: str, names: Sequence[str], bounded: bool = True) -> Callable[..., Any]:
    """A function of the inputs `names` (anything with a `.shape`) returning `text`'s value.
    `bounded=False` only for conditions joined from ones already compiled bounded."""
    tree, inputs = _check_syntax(text, names, bounded)
    body = _Positional(inputs).visit(tree.body)
    code = compile(
        ast.fix_missing_locations(
            ast.Expression(
                ast.Lambda(
                    ast.arguments(
                        posonlyargs=[], args=[], vararg=ast.arg("inputs"), kwonlyargs=[], kw_defaults=[], defaults=[]
                    ),
                    body,
                )
            )
        ),
        "<size condition>",
        "eval",
    )
    function: Callable[..., Any] = eval(code, {"__builtins__": {}, "math": math, "torch": _TORCH, **_FUNCTIONS})
    return function


def renamed(text: str, names: Sequence[str], new_names: Sequence[str]) -> str:
    """`text`, a condition on the inputs `names`, with those inputs called `new_names`."""
    tree, inputs = _check_syntax(text, names)
    for node, k in inputs.items():
        node.id = new_names[k]
    return ast.unparse(tree)


class SizeConditions:
    """Conditions on the input sizes that torch.export traced the model under and that the inputs'
    ranges do not imply (a branch on `x.shape[1] % 7`, say), each a Python expression over
    `<input>.shape[<dim>]`. The input guard checks them on every call, after the ranges; a call
    that breaks one raises EngineInputError naming it, where the engines would compute the
    branch the model does not take."""

    def __init__(self, texts: Sequence[str], names: Sequence[str]) -> None:
        self.texts = tuple(texts)
        self.names = tuple(names)
        self._each = [compile_condition(t, self.names) for t in self.texts]
        self._all = compile_condition(" and ".join(f"({t})" for t in self.texts), self.names, bounded=False)
        # Input shapes that met every condition: a repeated shape is looked up, not evaluated
        # again (swin's 14 conditions take ~50 µs; the lookup well under one).
        self._met: set[tuple[torch.Size, ...]] = set()

    def __call__(self, tensors: Sequence[torch.Tensor]) -> None:
        shapes = tuple(t.shape for t in tensors)
        if shapes in self._met:
            return
        try:
            if self._all(*tensors):
                if len(self._met) < _REMEMBERED:
                    self._met.add(shapes)
                return
        except ArithmeticError:  # a modulo or division by a zero size: the condition does not hold
            pass
        for text, holds in zip(self.texts, self._each):
            try:
                broken = not holds(*tensors)
            except ArithmeticError:
                broken = True
            if broken:
                given = ", ".join(f"{n} {tuple(t.shape)}" for n, t in zip(self.names, tensors))
                raise EngineInputError(
                    f"input shapes {given} break a condition torch.export captured the model under: {text} "
                    "(the model branches on its input sizes, and the branch the example shapes took is the "
                    "one lowered); lower the model again with a range in which this holds, or with an "
                    "example shape that takes the other branch"
                )
