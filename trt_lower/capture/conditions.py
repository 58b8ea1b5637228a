"""What torch.export assumed about the input sizes beyond their ranges (part of stage 1, capture).

Tracing with dynamic dims, torch records a guard for every test on a size the model makes
(`if x.shape[1] % 7:`, and the shape checks of its ops). A guard the input ranges imply needs no
check. torch narrows a range where a guard bounds one size, but not where the bound is not
linear (`x.shape[1] // 32 == 1`), nor does a range express a guard on several sizes or on a
remainder. Those guards are what the captured graph is valid under: a call that breaks one would
run the branch the model does not take. Here each is settled when it can be (provably true over
the ranges, or true on an interval of one size, which then becomes that size's range) and kept,
as text over `<input>.shape[<dim>]`, for the input guard to check per call when it cannot.
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
from typing import Any, Callable, Sequence

import sympy
import torch
from torch.utils._sympy.printers import PythonPrinter
from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

from trt_lower.runtime.conditions import compile_condition
from trt_lower.values.spec import TensorSpec

log = logging.getLogger("trt_lower")

# The most size values (or combinations of values) a condition is evaluated on to settle it here.
_TRIES = 100_000


def input_dims(program: torch.export.ExportedProgram) -> list[tuple[str, tuple[int | torch.SymInt, ...]]]:
    user_inputs = set(program.graph_signature.user_inputs)
    return [
        (n.name, tuple(n.meta["val"].shape))
        for n in program.graph.find_nodes(op="placeholder")
        if n.name in user_inputs and isinstance(n.meta.get("val"), torch.Tensor)
    ]


def _guards(dims: list[tuple[str, tuple[int | torch.SymInt, ...]]], symbols: set[sympy.Symbol]) -> list[sympy.Basic]:
    """The shape environment's guards and runtime assertions on the input sizes alone."""
    sizes = [d for _, shape in dims for d in shape if isinstance(d, torch.SymInt)]
    env = sizes[0].node.shape_env if sizes else None
    if env is None:
        return []
    exprs = [g.expr for g in env.guards] + [
        a.expr for asserts in env.deferred_runtime_asserts.values() for a in asserts
    ]
    found: dict[sympy.Basic, None] = {}
    for expr in exprs:
        if expr.free_symbols and expr.free_symbols <= symbols and expr is not sympy.true:
            found.setdefault(expr)
    return list(found)


@functools.lru_cache(maxsize=1024)
def _function(expr: sympy.Basic) -> Callable[..., Any] | None:
    """`expr` as a function of its symbols' values, in name order; None where it prints with a
    function a condition may not call. Compiled once per expression (the narrowing loop asks
    again)."""
    try:
        return compile_condition(PythonPrinter().doprint(expr), [str(s) for s in _variables(expr)])
    except ValueError:
        return None


def _variables(expr: sympy.Basic) -> list[sympy.Symbol]:
    return sorted(expr.free_symbols, key=str)


def _checkable(expr: sympy.Basic) -> bool:
    return _function(expr) is not None


def _holds(function: Callable[..., Any], *values: int) -> bool:
    try:
        return bool(function(*values))
    except ArithmeticError:
        return False


def _proved(expr: sympy.Basic, ranges: dict[sympy.Symbol, tuple[int, int]]) -> bool:
    """True for every size in the ranges: by interval arithmetic, else by trying every combination
    where there are few."""
    try:
        bound = bound_sympy(expr, {s: ValueRanges(lo, hi) for s, (lo, hi) in ranges.items()})
        if bound.lower is sympy.true:
            return True
    except Exception:  # an expression torch's range analysis does not handle: try the values
        pass
    spans = [range(ranges[s][0], ranges[s][1] + 1) for s in _variables(expr)]
    function = _function(expr) if _checkable(expr) else None
    if function is None or math.prod(len(r) for r in spans) > _TRIES:
        return False
    return all(_holds(function, *values) for values in itertools.product(*spans))


def size_conditions(
    program: torch.export.ExportedProgram, specs: Sequence[TensorSpec]
) -> tuple[list[TensorSpec], tuple[str, ...], tuple[str, ...]]:
    """The specs narrowed where a guard on one size holds on an interval of it, the guards left
    for the input guard to check per call (SizeConditions texts), and a note for each of both."""
    dims = input_dims(program)
    # Each input-dim symbol: the dims it sizes (the first names it in texts), and its range.
    reads: dict[sympy.Symbol, list[tuple[int, int]]] = {}
    ranges: dict[sympy.Symbol, tuple[int, int]] = {}
    for k, ((name, shape), spec) in enumerate(zip(dims, specs)):
        for i in spec.dynamic_dims:
            d = shape[i]
            if isinstance(d, torch.SymInt) and isinstance(d.node.expr, sympy.Symbol):
                reads.setdefault(d.node.expr, []).append((k, i))
                ranges.setdefault(d.node.expr, (spec.min_shape[i], spec.max_shape[i]))
    where = {s: f"{dims[k][0]}.shape[{i}]" for s, ((k, i), *_) in reads.items()}
    pending = [g for g in _guards(dims, set(where)) if not _proved(g, ranges)]
    notes = _narrow(pending, ranges, where)
    for guard in [g for g in pending if not _checkable(g)]:
        pending.remove(guard)
        log.warning(
            "trt_lower: a size test the model was captured under cannot be checked per call: %s", _text(guard, where)
        )
        notes.append(
            f"not checked: {_shortened(_text(guard, where))}, a size test the model was captured "
            "under; a call that breaks it gets the captured branch's result"
        )
    texts = tuple(dict.fromkeys(_text(g, where) for g in pending))
    notes.extend(
        f"calls must meet {_shortened(t)}, a size test the model was captured under; others raise EngineInputError"
        for t in texts
    )
    narrowed_specs = list(specs)
    for symbol, dims_read in reads.items():
        for k, i in dims_read:
            narrowed_specs[k] = narrowed_specs[k].narrowed(i, *ranges[symbol])
    return narrowed_specs, texts, tuple(notes)


def _narrow(
    pending: list[sympy.Basic], ranges: dict[sympy.Symbol, tuple[int, int]], where: dict[sympy.Symbol, str]
) -> list[str]:
    """Settle what can be of `pending` (in place): a guard the ranges now imply goes, a guard on one
    size true on an interval of it narrows that size's range (in `ranges`) and goes. A note per
    narrowing; repeated while one narrowing may prove another guard."""
    notes: list[str] = []
    narrowed = True
    while narrowed:
        narrowed = False
        for guard in list(pending):
            if _proved(guard, ranges):
                pending.remove(guard)
                continue
            function = _function(guard) if _checkable(guard) else None
            if len(guard.free_symbols) != 1 or function is None:
                continue
            (symbol,) = guard.free_symbols
            lo, hi = ranges[symbol]
            if hi - lo >= _TRIES:
                continue
            valid = [v for v in range(lo, hi + 1) if _holds(function, v)]
            if valid and valid == list(range(valid[0], valid[-1] + 1)):
                ranges[symbol] = (valid[0], valid[-1])
                notes.append(
                    f"{where[symbol]}: asked for {lo}..{hi}, the captured graph holds for "
                    f"{valid[0]}..{valid[-1]} ({_shortened(_text(guard, where))}); engines take that range"
                )
                pending.remove(guard)
                narrowed = True
    return notes


def _shortened(text: str, most: int = 160) -> str:
    return text if len(text) <= most else text[:most] + " ..."


def _text(expr: sympy.Basic, where: dict[sympy.Symbol, str]) -> str:
    text: str = PythonPrinter().doprint(expr.xreplace({s: sympy.Symbol(where[s]) for s in expr.free_symbols}))
    return text
