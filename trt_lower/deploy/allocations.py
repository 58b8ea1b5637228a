"""A per-call allocation budget for the eager nodes of a loaded graph, and a bound on the integers
its Python operators compute.

Sizes written in a file are bounded at load (operators.py). A size the graph computes at run time
(a dim read with sym_size, a tensor's value read with item(), arithmetic on either) is known only
at the call: `zeros(x.sum().item() * 2**40)` passes every check at load. So each node of an
operator whose output size its integer arguments set is called through a check that computes, from
the actual arguments, the bytes its output takes (elements x element size) and raises
EagerAllocationError, naming the node, the operator and the size, before the kernel runs when they
exceed the budget (`trt_lower.load(..., max_eager_allocation=...)`). `expand` allocates nothing
itself, but the next elementwise node materialises its view: its size is counted as if it did.
Run-time paddings get the bound literal ones get at load. A Python operator's (`operator.mul` on
sizes) integer result beyond MAX_NUMBER raises the same error: every integer a loaded graph
computes stays within 64 bits, as torch's sizes and item()'s results do, so arithmetic on them
stays cheap and any of them used as a size meets the budget.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable, Iterable

import torch
import torch.utils._pytree as pytree

from converters.core.errors import TrtLowerError
from splitter.index_check import check_indices
from trt_lower.deploy.graph_json import target_name
from trt_lower.deploy.operators import MAX_NUMBER, MAX_PAD
from trt_lower.deploy.safe_ops import PADDINGS, SIZES

# The default budget: what the largest size a file may write makes (operators.MAX_ELEMENTS
# elements) in the widest element type (8 bytes).
DEFAULT_MAX_EAGER_ALLOCATION = 2**31

Call = Callable[..., Any]
Wrapper = Callable[[Call], Call]
Given = dict[str, Any]


class EagerAllocationError(TrtLowerError, ValueError):
    """A call of a loaded module whose eager node would allocate more than its allocation budget,
    or compute an integer beyond 64 bits, from sizes computed at run time."""


def _ints(value: Any) -> list[int]:
    """A size argument's ints (torch refuses a single int where its schema takes a list)."""
    return [operator.index(v) for v in value] if isinstance(value, (list, tuple)) else [operator.index(value)]


def _tensor(given: Given) -> torch.Tensor:
    return next(v for v in given.values() if isinstance(v, torch.Tensor))


def _resized(given: Given) -> int:
    """An upsample's or adaptive pool's output: the input's leading dims times `output_size`, or
    its last dims each times its `scale_factors`."""
    shape, size = _tensor(given).shape, given.get("output_size")
    if size is not None:
        ints = _ints(size)
        return math.prod(shape[: len(shape) - len(ints)]) * math.prod(ints)
    scales: list[float] = given.get("scale_factors") or []
    leading = len(shape) - len(scales)
    return math.prod(shape[:leading]) * math.prod([math.floor(d * s) for d, s in zip(shape[leading:], scales)])


def _expanded(given: Given) -> int:
    """expand's view: -1 keeps the input's dim (dims aligned from the last)."""
    size, shape = _ints(given["size"]), _tensor(given).shape
    kept = [1] * (len(size) - len(shape)) + list(shape)
    return math.prod(k if s == -1 else s for s, k in zip(size, kept))


def _arange(given: Given) -> int:
    start, end, step = given.get("start", 0), given["end"], given.get("step", 1)
    return 0 if step == 0 else math.ceil(abs((end - start) / step))  # a zero step: torch refuses it


def _one_hot(given: Given) -> int:
    """one_hot's classes: its num_classes, or (-1) counted from the data as torch counts them."""
    tensor, classes = _tensor(given), operator.index(given.get("num_classes", -1))
    if classes < 0 and tensor.numel():
        classes = int(tensor.max()) + 1
    return tensor.numel() * classes


def _repeated(name: str) -> Callable[[Given], int]:
    return lambda given: _tensor(given).numel() * math.prod(_ints(given[name]))


def _sized(*names: str) -> Callable[[Given], int]:
    """A count set by arguments alone: the product of their ints (eye's m defaults to its n)."""
    return lambda given: math.prod(math.prod(_ints(given.get(n, given[names[0]]))) for n in names)


_RESIZED = (
    "upsample_nearest1d upsample_nearest2d upsample_nearest3d upsample_bilinear2d upsample_bicubic2d upsample_linear1d "
    "upsample_trilinear3d _upsample_nearest_exact1d _upsample_nearest_exact2d _upsample_nearest_exact3d "
    "adaptive_avg_pool1d _adaptive_avg_pool2d _adaptive_avg_pool3d adaptive_max_pool1d adaptive_max_pool2d"
).split()
_CONSTRUCTORS = "ones zeros full new_ones new_zeros new_full rand randn randint".split()
# The elements of each operator's output, from its arguments by name (and its input's shape).
COUNTS: dict[str, Callable[[Given], int]] = {
    **{f"aten.{name}": _sized("size") for name in _CONSTRUCTORS},
    "aten.linspace": _sized("steps"),
    "aten.randperm": _sized("n"),
    "aten.histc": _sized("bins"),
    "aten.eye": _sized("n", "m"),
    "aten.arange": _arange,
    "aten.one_hot": _one_hot,
    "aten.repeat": _repeated("repeats"),
    "aten.tile": _repeated("dims"),
    "aten.expand": _expanded,
    **{f"aten.{name}": _resized for name in _RESIZED},
}
# Operators whose count their size arguments alone set (literals are checked at load): checked
# at run time only where one of those is computed. The others' counts scale with their input.
_LITERAL = {
    **{f"aten.{name}": SIZES[f"aten.{name}"] for name in (*_CONSTRUCTORS, "linspace", "randperm", "histc", "eye")},
    "aten.arange": ("start", "end", "step"),
}
# Element sizes where no dtype is given and no tensor is passed: arange, randint and randperm make
# int64; the rest take the default dtype.
_INT64 = frozenset({"aten.arange", "aten.randint", "aten.randperm"})


def _itemsize(packet: str, given: Given) -> int:
    dtype = given.get("dtype")
    if isinstance(dtype, torch.dtype):
        return dtype.itemsize
    tensor = next((v for v in given.values() if isinstance(v, torch.Tensor)), None)
    if tensor is not None:
        return tensor.element_size()
    return 8 if packet in _INT64 else torch.get_default_dtype().itemsize


def _budgeted(node: str, op: torch._ops.OpOverload, budget: int) -> Wrapper:
    """The check before `op` allocates: its output's bytes from the actual arguments, within `budget`."""
    packet, names = str(op).rpartition(".")[0], [a.name for a in op._schema.arguments]
    count = COUNTS[packet]

    def wrap(call: Call) -> Call:
        def checked(*args: Any, **kwargs: Any) -> Any:
            given = dict(zip(names, args), **kwargs)
            size: float
            try:
                size = count(given) * _itemsize(packet, given)
            except (OverflowError, ValueError):  # an infinite or NaN scale or count: over any budget
                size = math.inf
            if size > budget:
                raise EagerAllocationError(
                    f"node '{node}' ({op}) would allocate {size} bytes in one call, over the eager allocation "
                    f"budget of {budget} bytes (raise it with trt_lower.load(..., max_eager_allocation=...))"
                )
            return call(*args, **kwargs)

        return _named(checked, node)

    return wrap


def _padded(node: str, op: torch._ops.OpOverload) -> Wrapper:
    """The bound a literal padding gets at load (operators.py), on the paddings computed at run time."""
    names = [a.name for a in op._schema.arguments]
    pads = PADDINGS[str(op).rpartition(".")[0]]

    def wrap(call: Call) -> Call:
        def checked(*args: Any, **kwargs: Any) -> Any:
            given = dict(zip(names, args), **kwargs)
            for name in pads:
                if given.get(name) is not None and any(abs(v) > MAX_PAD for v in _ints(given[name])):
                    raise EagerAllocationError(
                        f"node '{node}' ({op}) pads by {str(given[name])[:80]}, more than {MAX_PAD} (its '{name}')"
                    )
            return call(*args, **kwargs)

        return _named(checked, node)

    return wrap


def _bounded(node: str, called: str) -> Wrapper:
    """The bound on a Python operator's integer result."""

    def wrap(call: Call) -> Call:
        def checked(*args: Any, **kwargs: Any) -> Any:
            result = call(*args, **kwargs)
            if type(result) is int and not -MAX_NUMBER <= result <= MAX_NUMBER:
                raise EagerAllocationError(
                    f"node '{node}' ({called}) computes an integer of {result.bit_length()} bits, beyond 2**63"
                )
            return result

        return _named(checked, node)

    return wrap


def _named(fn: Call, node: str) -> Call:
    """The name the generated forward (and a traceback) gives the check."""
    fn.__name__ = fn.__qualname__ = f"checked_{node}"
    return fn


def _computed(node: torch.fx.Node, names: Iterable[str]) -> bool:
    """Whether an argument of `node` of those `names` is known only at run time."""
    op = node.target
    assert isinstance(op, torch._ops.OpOverload)
    given = dict(zip((a.name for a in op._schema.arguments), node.args), **node.kwargs)
    return any(isinstance(v, torch.fx.Node) for name in names for v in pytree.tree_leaves(given.get(name)))


def checks(graph: torch.fx.Graph, budget: int) -> dict[str, Wrapper]:
    """The run-time checks of a loaded graph's nodes, by node name (LoweredModule.call_checks)."""
    found: dict[str, Wrapper] = {}
    for node in graph.nodes:
        target = node.target
        if node.op != "call_function":
            continue
        if isinstance(target, torch._ops.OpOverload):
            packet = str(target).rpartition(".")[0]
            if packet in COUNTS and (packet not in _LITERAL or _computed(node, _LITERAL[packet])):
                found[node.name] = _budgeted(node.name, target, budget)
            elif packet in PADDINGS and _computed(node, PADDINGS[packet]):
                found[node.name] = _padded(node.name, target)
        elif target not in (operator.getitem, check_indices) and node.all_input_nodes:
            found[node.name] = _bounded(node.name, target_name(node))
    return found
