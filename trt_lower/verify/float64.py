"""The float64 reference verification measures errors against: a run of captured-graph nodes in
float64, fed the eager values at their inputs (widened). Eager's own distance from it is the
rounding error eager makes in that computation, which an engine may make too (scaled to its
precision): what tells a cancellation's noise from a wrong value (tolerance.py).

Floating tensors and explicit floating dtypes (a cast, a `full`) become float64; a node that
refuses float64 (a quantize expecting float32) runs in the dtypes eager gave it, its result widened.
A selection (an embedding, index_select, gather) reads a weight unwidened and widens what it
picked: the same float64 values, without a float64 copy of a table it reads a few rows of (BERT's
embedding reads 128 of 30522).

Beside each value goes its magnitude: the size of what was added up to make it, which rounding
noise is proportional to (the running error bound of numerical analysis: |a| + |b| for a - b,
the sum of |x| for x.sum()). Eager's own error at one output can be zero by luck (a softmax that
sums to exactly 1.0 in float32 while another order of the same additions gives 1 - 2^-24), so
the noise an engine may make is bounded by its precision at this magnitude, not by eager's luck.
Sums, differences, products, means and layout ops carry magnitudes through; any other op starts
again from its value's own size (a nonlinear op's relative error is what the tolerance bounds),
as do matrix products and convolutions (their outputs are large enough for eager's own error to
measure the noise, and running them twice would double the cost). Only the magnitudes something
reads are computed: those of the values kept, and of the operands of a carrying op whose own is.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from typing import Any, Callable, Collection, Sequence

import torch
import torch.utils._pytree as pytree

from trt_lower.verify.nodes import Node

_NARROW = (torch.float32, torch.float16, torch.bfloat16)
aten = torch.ops.aten
# Ops whose result's magnitude is the op applied to its operands' magnitudes (all >= 0, so a
# difference of them becomes a sum), by the op to apply.
_CARRY: dict[Any, Any] = {
    aten.add.Tensor: aten.add.Tensor,
    aten.add.Scalar: aten.add.Scalar,
    aten.sub.Tensor: aten.add.Tensor,
    aten.sub.Scalar: aten.add.Scalar,
    aten.rsub.Scalar: aten.add.Scalar,
    aten.mul.Tensor: aten.mul.Tensor,
    aten.mul.Scalar: aten.mul.Scalar,
    aten.div.Scalar: aten.div.Scalar,
    aten.neg.default: aten.abs.default,
    aten.sum.default: aten.sum.default,
    aten.sum.dim_IntList: aten.sum.dim_IntList,
    aten.mean.default: aten.mean.default,
    aten.mean.dim: aten.mean.dim,
    aten.cumsum.default: aten.cumsum.default,
    operator.getitem: operator.getitem,
}
# ... of those, the ones whose second operand may be a number (its size counts, not its sign).
_ARITHMETIC = {aten.add.Tensor, aten.add.Scalar, aten.mul.Tensor, aten.mul.Scalar, aten.div.Scalar}
# Layout ops: the magnitudes move with the values.
_LAYOUT = {
    aten.view.default,
    aten._unsafe_view.default,
    aten.reshape.default,
    aten.permute.default,
    aten.transpose.int,
    aten.t.default,
    aten.expand.default,
    aten.unsqueeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.slice.Tensor,
    aten.select.int,
    aten.cat.default,
    aten.stack.default,
    aten.clone.default,
    aten.alias.default,
}
# Selections: each entry of the result is an entry of the first operand, so widening commutes with
# them (exactly) and is cheaper after.
_SELECTIONS = {aten.embedding.default, aten.index_select.default, aten.gather.default, aten.index.Tensor}


@dataclass(frozen=True)
class Reference:
    """A value computed in float64 and its magnitude (the size of what was added up to make it)."""

    value: torch.Tensor
    magnitude: torch.Tensor


def _widen(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype in _NARROW:
        return value.to(torch.float64)
    if isinstance(value, torch.dtype) and value in _NARROW:
        return torch.float64
    return value


def widened(value: Any) -> Any:
    """`value` (a tensor, or a tuple of them) with its floating tensors in float64."""
    return pytree.tree_map(_widen, value)


def _size(value: Any) -> Any:
    """|value| for number tensors, floating or integer (also inside tuples), else value."""
    return pytree.tree_map(lambda v: v.abs() if isinstance(v, torch.Tensor) and v.dtype != torch.bool else v, value)


def _magnitude(node: Node, value: Any, magnitude_of: Callable[[Node], Any]) -> Any:
    """`node`'s magnitude (module docstring), from its operands' (`magnitude_of`); its value's own
    size where it carries none."""
    if not (isinstance(value, torch.Tensor) and value.is_floating_point()):
        return _size(value)
    carry = _CARRY.get(node.target) or (node.target if node.target in _LAYOUT else None)
    if carry is not None:
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), magnitude_of)
        kwargs = dict(kwargs)
        kwargs.pop("alpha", None)  # |alpha| * b: alpha is 1 in every graph export makes
        if carry in _ARITHMETIC and isinstance(args[1], (int, float)):  # the number of `x - 3`, `x * -2`
            args = (args[0], abs(args[1]), *args[2:])
        try:
            found = carry(*args, **kwargs)
        except (RuntimeError, TypeError):  # an operand without a magnitude (an integer tensor)
            found = None
        if isinstance(found, torch.Tensor) and found.shape == value.shape:
            return found
    return value.abs()


def _carries(node: Node) -> bool:
    return node.target in _CARRY or node.target in _LAYOUT


def _magnitudes_read(nodes: Sequence[Node], keep: Collection[Node]) -> set[Node]:
    """The nodes among `nodes` whose magnitude is read: those in `keep`, and the operands of a
    carrying op whose own is (a weight's magnitude, through the transpose a matrix product reads,
    is not: the product starts from its value's size)."""
    needed = set(keep)
    for n in reversed(nodes):
        if n in needed and _carries(n):
            needed.update(n.all_input_nodes)
    return needed


def run_float64(nodes: Sequence[Node], given: Callable[[Node], Any], keep: Collection[Node]) -> dict[Node, Any]:
    """The values of `keep` among `nodes` (call_function nodes in graph order) computed in float64,
    each floating tensor as a Reference with its magnitude; a node outside them that one reads is
    `given` its eager value. Every other value is dropped after its last read: a float64 copy of
    each weight lives only while its node runs."""
    last = {a: i for i, n in enumerate(nodes) for a in n.all_input_nodes}
    wanted = _magnitudes_read(nodes, keep)
    values: dict[Node, Any] = {}
    magnitudes: dict[Node, Any] = {}

    def unwidened(a: Node) -> Any:
        return values[a] if a in values else given(a)

    def read(a: Node) -> Any:
        return values[a] if a in values else widened(given(a))

    def magnitude_of(a: Node) -> Any:
        return magnitudes[a] if a in magnitudes else _size(read(a))

    def as_eager(a: Node) -> Any:
        value, val = read(a), a.meta.get("val")
        return value.to(val.dtype) if isinstance(value, torch.Tensor) and isinstance(val, torch.Tensor) else value

    with torch.no_grad():
        for i, n in enumerate(nodes):
            selection = n.target in _SELECTIONS
            args, kwargs = torch.fx.node.map_arg((n.args, n.kwargs), unwidened if selection else read)
            if not selection:
                args, kwargs = widened((args, kwargs))
            try:
                value = n.target(*args, **kwargs)  # type: ignore[operator]
                values[n] = widened(value) if selection else value
            except (RuntimeError, TypeError, NotImplementedError, AssertionError):
                args, kwargs = torch.fx.node.map_arg((n.args, n.kwargs), as_eager)
                values[n] = widened(n.target(*args, **kwargs))  # type: ignore[operator]
            del args, kwargs
            if n in wanted:
                magnitudes[n] = _magnitude(n, values[n], magnitude_of)
            for a in n.all_input_nodes:
                if last[a] == i and a not in keep:
                    values.pop(a, None)
                    magnitudes.pop(a, None)
    return {n: _reference(values[n], magnitudes[n]) for n in keep if n in values}


def _reference(value: Any, magnitude: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return Reference(value, magnitude)
    return value


def graph_float64(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> list[Any]:
    """The outputs of FX graph module `gm` (an engine's subgraph) called with `inputs`, computed
    in float64."""
    fed = dict(zip((n for n in gm.graph.nodes if n.op == "placeholder"), inputs))

    def given(a: Node) -> Any:
        return fed[a] if a.op == "placeholder" else functools.reduce(getattr, str(a.target).split("."), gm)

    out = gm.graph.output_node().args[0]
    outputs: list[Node] = []
    torch.fx.node.map_arg(out, outputs.append)
    values = run_float64([n for n in gm.graph.nodes if n.op == "call_function"], given, outputs)
    results = torch.fx.node.map_arg(out, lambda a: values[a] if a in values else widened(given(a)))
    return list(results) if isinstance(results, (tuple, list)) else [results]
