"""SizeConditions: what torch.export assumed about a call's input sizes beyond their ranges."""
from __future__ import annotations

import ast
import math
from types import SimpleNamespace
from typing import Any, Callable, Sequence

import torch

from trt_lower.values.signature import EngineInputError

# What a condition may use besides its inputs' `.shape[i]`: the arithmetic, comparisons and
# functions torch's shape printer writes, nothing else (artifacts carry conditions as text).
_NODES = (ast.Expression, ast.Compare, ast.BoolOp, ast.UnaryOp, ast.BinOp, ast.Constant, ast.Name, ast.Load,
          ast.Attribute, ast.Subscript, ast.Call, ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd, ast.Add, ast.Sub,
          ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_FUNCTIONS = {"min": min, "max": max, "abs": abs}
_MATH = {"floor", "ceil", "trunc"}
# torch's symbolic-size functions, as they act on plain ints (the only `torch.` names allowed).
_TORCH = SimpleNamespace(sym_float=float, sym_int=int, sym_max=max, sym_min=min)
_REMEMBERED = 1024  # the most met input shapes a SizeConditions keeps
_MODULE_FUNCTIONS = {("math", f) for f in _MATH} | {("torch", f) for f in vars(_TORCH)}


def _check_syntax(text: str, names: Sequence[str]) -> ast.Expression:
    """`text` parsed, if it is a condition on the sizes of the inputs `names`; else ValueError."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        raise ValueError(f"size condition {text!r} is not an expression: {e}") from None
    for node in ast.walk(tree):
        ok = isinstance(node, _NODES) and not (
            isinstance(node, ast.Constant) and type(node.value) not in (int, float, bool)
            or isinstance(node, ast.Name) and node.id not in (*names, *_FUNCTIONS, "math", "torch")
            or isinstance(node, ast.Attribute) and not (
                node.attr == "shape" and isinstance(node.value, ast.Name) and node.value.id in names
                or isinstance(node.value, ast.Name) and (node.value.id, node.attr) in _MODULE_FUNCTIONS)
            or isinstance(node, ast.Call) and (node.keywords or not (
                isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS
                or isinstance(node.func, ast.Attribute) and node.func.attr != "shape")))
        if not ok:
            raise ValueError(f"size condition {text!r}: {ast.unparse(node)!r} is not allowed in one")
    return tree


def compile_condition(text: str, names: Sequence[str]) -> Callable[..., Any]:
    """A function of the inputs `names` (anything with a `.shape`) returning `text`'s value."""
    if any(not n.isidentifier() or n in _FUNCTIONS or n in ("math", "torch") for n in names):
        raise ValueError(f"size condition {text!r}: input names {list(names)} cannot all be read in one")
    tree = _check_syntax(text, names)
    code = compile(ast.fix_missing_locations(ast.Expression(ast.Lambda(
        ast.arguments(posonlyargs=[], args=[ast.arg(n) for n in names], kwonlyargs=[], kw_defaults=[], defaults=[]),
        tree.body))), "<size condition>", "eval")
    function: Callable[..., Any] = eval(code, {"__builtins__": {}, "math": math, "torch": _TORCH, **_FUNCTIONS})
    return function


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
        self._all = compile_condition(" and ".join(f"({t})" for t in self.texts), self.names)
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
                    "example shape that takes the other branch")
