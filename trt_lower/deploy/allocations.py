"""A per-call allocation budget for the eager nodes of a loaded graph, and a bound on the integers
its Python operators compute.

Sizes written in a file are bounded at load (operators.py). A size the graph computes at run time
(a dim read with sym_size, a tensor's value read with item(), arithmetic on either) is known only
at the call: `zeros(x.sum().item() * 2**40)` passes every check at load. So each node of an
operator whose output size its integer arguments set is called through a check that computes, from
the actual arguments, the bytes its output takes (elements x element size) and raises
EagerAllocationError, naming the node, the operator and the size, before the kernel runs when they
exceed the budget (`trt_lower.load(..., max_eager_allocation=...)`). `expand` allocates nothing
itself, but the next elementwise node materialises its view: the view it returns is checked as if
it were allocated.
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
from trt_lower.deploy.safe_ops import PADDINGS

# The default budget: what the largest size a file may write makes (operators.MAX_ELEMENTS
# elements) in the widest element type (8 bytes).
DEFAULT_MAX_EAGER_ALLOCATION = 2**31

Call = Callable[..., Any]
Wrapper = Callable[[Call], Call]


class EagerAllocationError(TrtLowerError, ValueError):
    """A call of a loaded module whose eager node would allocate more than its allocation budget,
    or compute an integer beyond 64 bits, from sizes computed at run time."""


def _size(value: Any) -> int:
    """The elements a size list makes; entries that are not ints (0-dim tensors, which torch reads
    as ints) are read as ints first, so that their product cannot wrap around."""
    count = math.prod(value)
    return count if type(count) is int else math.prod(map(operator.index, value))


def _resized(x: torch.Tensor, size: Any, scales: list[float] | None) -> int:
    """An upsample's or adaptive pool's output: the input's leading dims times `output_size`, or
    its last dims each times its `scale_factors`."""
    shape = x.shape
    if size is not None:
        return math.prod(shape[: len(shape) - len(size)]) * _size(size)
    leading = len(shape) - len(scales or ())
    return math.prod(shape[:leading]) * math.prod([math.floor(d * s) for d, s in zip(shape[leading:], scales or ())])


def _arange(x: None, start: Any, end: Any, step: Any) -> int:
    start, step = 0 if start is None else start, 1 if step is None else step
    return 0 if step == 0 else int(math.ceil(abs((end - start) / step)))  # a zero step: torch refuses it


def _one_hot(x: torch.Tensor, classes: Any) -> int:
    """one_hot's classes: its num_classes, or (-1, the default) counted from the data as torch counts them."""
    count = -1 if classes is None else operator.index(classes)
    if count < 0 and x.numel():
        count = int(x.max()) + 1
    return x.numel() * count


def _repeated(x: torch.Tensor, repeats: Any) -> int:
    return x.numel() * _size(repeats)


def _eye(x: None, n: Any, m: Any) -> int:
    return operator.index(n) * operator.index(n if m is None else m)


_RESIZED = (
    "upsample_nearest1d upsample_nearest2d upsample_nearest3d upsample_bilinear2d upsample_bicubic2d upsample_linear1d "
    "upsample_trilinear3d _upsample_nearest_exact1d _upsample_nearest_exact2d _upsample_nearest_exact3d "
    "adaptive_avg_pool1d _adaptive_avg_pool2d _adaptive_avg_pool3d adaptive_max_pool1d adaptive_max_pool2d"
).split()
_CONSTRUCTORS = "ones zeros full new_ones new_zeros new_full rand randn randint".split()
# Operators whose count is one int argument.
_SINGLE = {"linspace": "steps", "randperm": "n", "histc": "bins"}
# The elements of each operator's output: the arguments it reads (by name; None where a call
# leaves one out), and the count from its input tensor (None for a constructor) and those.
COUNTS: dict[str, tuple[tuple[str, ...], Callable[..., int]]] = {
    **{f"aten.{name}": (("size",), lambda x, size: _size(size)) for name in _CONSTRUCTORS},
    **{f"aten.{name}": ((arg,), lambda x, n: operator.index(n)) for name, arg in _SINGLE.items()},
    "aten.eye": (("n", "m"), _eye),
    "aten.arange": (("start", "end", "step"), _arange),
    "aten.one_hot": (("num_classes",), _one_hot),
    "aten.repeat": (("repeats",), _repeated),
    "aten.tile": (("dims",), _repeated),
    **{f"aten.{name}": (("output_size", "scale_factors"), _resized) for name in _RESIZED},
}
# Operators whose count their size arguments alone set (literals are checked at load): checked
# at run time only where one of those is computed. The others' counts scale with their input.
_LITERAL = frozenset({*(f"aten.{name}" for name in (*_CONSTRUCTORS, *_SINGLE)), "aten.eye", "aten.arange"})
# Element sizes where no dtype is given and no tensor is passed: arange, randint, randperm and
# full (of an int) may make int64; the rest take the default dtype.
_INT64 = frozenset({"aten.arange", "aten.randint", "aten.randperm", "aten.full"})


def _position(op: torch._ops.OpOverload, name: str) -> tuple[int, str]:
    """Where a call passes `op`'s argument `name`: its index among the positional arguments, and
    its name as a keyword (an index past any call's arguments where `op` has no such argument)."""
    names = [a.name for a in op._schema.arguments]
    return (names.index(name), name) if name in names else (len(names), "")


def budgeted(node: str, op: torch._ops.OpOverload, budget: int) -> Wrapper:
    """The check before `op` allocates: its output's bytes from the actual arguments, within `budget`."""
    packet = str(op).rpartition(".")[0]
    names, count = COUNTS[packet]
    tensors = [a.name for a in op._schema.arguments if a.type.kind() == "TensorType"]
    tensor_at, tensor_name = _position(op, tensors[0] if tensors else "")
    (first, first_name), *rest = [_position(op, name) for name in names]
    default = 8 if packet in _INT64 else None

    def wrap(call: Call) -> Call:
        def checked(*args: Any, **kwargs: Any) -> Any:
            n = len(args)
            x = args[tensor_at] if tensor_at < n else kwargs.get(tensor_name)
            dtype = kwargs.get("dtype")
            size: float
            try:
                # The first argument read apart: most operators read one (a list would cost a microsecond).
                value = args[first] if first < n else kwargs.get(first_name)
                elements = (
                    count(x, value, *[args[i] if i < n else kwargs.get(k) for i, k in rest])
                    if rest
                    else count(x, value)
                )
                size = elements * (
                    dtype.itemsize
                    if isinstance(dtype, torch.dtype)
                    else x.element_size()
                    if x is not None
                    else default or torch.get_default_dtype().itemsize
                )
            except (OverflowError, ValueError):  # an infinite or NaN scale or count: over any budget
                size = math.inf
            except (TypeError, AttributeError) as e:  # never left for the kernel to read in its own way
                raise EagerAllocationError(f"node '{node}' ({op}) is passed a size that is no int ({e})") from None
            if size > budget:
                raise _over(node, op, size, budget)
            return call(*args, **kwargs)

        return _named(checked, node)

    return wrap


def viewed(node: str, op: torch._ops.OpOverload, budget: int) -> Wrapper:
    """expand makes a view, allocating nothing: its size is checked on the view it returns, before
    any node materialises it (cheaper than counting it from the arguments)."""

    def wrap(call: Call) -> Call:
        def checked(*args: Any, **kwargs: Any) -> Any:
            view = call(*args, **kwargs)
            if view.numel() * view.element_size() > budget:
                raise _over(node, op, view.numel() * view.element_size(), budget)
            return view

        return _named(checked, node)

    return wrap


def _over(node: str, op: torch._ops.OpOverload, size: float, budget: int) -> EagerAllocationError:
    return EagerAllocationError(
        f"node '{node}' ({op}) would allocate {size} bytes in one call, over the eager allocation "
        f"budget of {budget} bytes (raise it with trt_lower.load(..., max_eager_allocation=...))"
    )


def _padded(node: str, op: torch._ops.OpOverload) -> Wrapper:
    """The bound a literal padding gets at load (operators.py), on the paddings computed at run time."""
    names = [a.name for a in op._schema.arguments]
    pads = PADDINGS[str(op).rpartition(".")[0]]

    def wrap(call: Call) -> Call:
        def checked(*args: Any, **kwargs: Any) -> Any:
            given = dict(zip(names, args), **kwargs)
            for name in pads:
                if given.get(name) is not None and any(abs(operator.index(v)) > MAX_PAD for v in given[name]):
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
            if packet == "aten.expand":
                found[node.name] = viewed(node.name, target, budget)
            elif packet in COUNTS and (packet not in _LITERAL or _computed(node, COUNTS[packet][0])):
                found[node.name] = budgeted(node.name, target, budget)
            elif packet in PADDINGS and _computed(node, PADDINGS[packet]):
                found[node.name] = _padded(node.name, target)
        elif target not in (operator.getitem, check_indices) and node.all_input_nodes:
            found[node.name] = _bounded(node.name, target_name(node))
    return found
