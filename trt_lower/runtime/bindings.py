"""Eager ATen ops of a stitched forward, called through torch's own Python bindings.

The graph calls each eager op as an OpOverload (`torch.ops.aten.relu.default`), whose call packs
the Python arguments against the op's schema at run time: ~1 µs more than `torch.relu` in a hot
loop, 4-6 µs between two engine runs (bench/bench_eager_ops.py). The generated
forward calls the binding instead where calling it with the node's arguments is proven to reach
the very same op with the very same arguments; the graph itself keeps the OpOverloads (what the
report, the artifact and the debugging tools read).
"""

from __future__ import annotations

import contextlib
import functools
import types
from typing import Any, Callable

import torch
import torch.utils._pytree as pytree
from torch.fx.node import _get_qualified_name
from torch.utils._python_dispatch import TorchDispatchMode

from trt_lower.runtime.retarget import retargeted

# Where torch's generated bindings of ATen ops live, in the order they are tried: `torch.<name>`,
# `torch.nn.functional`'s C half, the Tensor methods (`view` has no function).
_BINDINGS = (torch._C._VariableFunctions, torch._C._nn, torch.Tensor)


class _Dispatched(Exception):
    """The first op a call dispatched, with its arguments (raised to stop the call there)."""


class _FirstDispatch(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch's class is untyped
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """No: by default torch wraps a mode's __torch_dispatch__ to keep Dynamo out of it, and that
        wrapper imports torch._dynamo (seconds, and the compiler stack) on its first call, which
        would be every load of a saved model. This mode only stops a probe; nothing compiles it."""
        return False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        raise _Dispatched(func, args, kwargs or {})


def _first_dispatch(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """What `fn(*args, **kwargs)` dispatches first, as (op, args, kwargs) with tensors by
    identity; None if it dispatches nothing or fails first. Nothing is computed: the call stops
    at the dispatch."""
    try:
        with _FirstDispatch():  # type: ignore[no-untyped-call]
            fn(*args, **kwargs)
    except _Dispatched as first:
        op, a, k = first.args
        return op, pytree.tree_map(lambda v: ("tensor", id(v)) if isinstance(v, torch.Tensor) else v, (a, k))
    except Exception:  # the binding takes these arguments differently (or not at all)
        return None
    return None


def _example(value: Any, schema_type: str) -> Any:
    """A stand-in of the run-time value of an argument, as the binding's argument parser sees it:
    a tensor for a tensor (on the meta device: its dims only), a Python number for a symbolic
    size. Raises LookupError when the run-time type is not known."""
    if isinstance(value, (list, tuple)):
        return type(value)(_example(v, schema_type) for v in value)
    if not isinstance(value, torch.fx.Node):
        return value
    val = value.meta.get("val")
    if isinstance(val, torch.Tensor) or (val is None and "Tensor" in schema_type):
        return torch.empty((1,) * (val.dim() if isinstance(val, torch.Tensor) else 1), device="meta")
    for sym, plain in ((torch.SymBool, bool), (torch.SymInt, int), (torch.SymFloat, float)):
        if isinstance(val, (sym, plain)):
            return plain(1)
    if val is None and schema_type in ("int", "SymInt", "List[int]", "List[SymInt]"):
        return 1
    raise LookupError(f"{value.name}: run-time type unknown")


def binding(node: torch.fx.Node) -> Callable[..., Any] | None:
    """The first Python binding that computes this call_function node's ATen op, or None: one
    qualifies when the op returns one tensor, the binding is torch's C binding of the op's name
    and, called with stand-ins of the node's arguments, dispatches that op first with the same
    arguments (which the bindings' argument parser decides by the arguments' types, fixed for
    the node)."""
    op = node.target
    if not isinstance(op, torch._ops.OpOverload) or op.namespace != "aten":
        return None
    returns = op._schema.returns
    if len(returns) != 1 or returns[0].type.kind() != "TensorType":
        return None
    schema_types = {a.name: str(a.type) for a in op._schema.arguments}
    try:
        args = tuple(_example(a, t) for a, t in zip(node.args, schema_types.values()))
        kwargs = {k: _example(v, schema_types.get(k, "")) for k, v in node.kwargs.items()}
    except LookupError:
        return None
    # Nodes calling the op with alike stand-ins share one proof (MobileNetV2's 35 eager ReLU6 one).
    leaves, spec = pytree.tree_flatten((args, kwargs))
    key = (op, spec, tuple(("tensor", v.dim()) if isinstance(v, torch.Tensor) else (type(v), v) for v in leaves))
    try:
        return _PROVEN[key]
    except KeyError:
        proven = _PROVEN[key] = _prove(op, args, kwargs)
        return proven
    except TypeError:  # an unhashable constant
        return _prove(op, args, kwargs)


_PROVEN: dict[Any, Callable[..., Any] | None] = {}


def _prove(op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Callable[..., Any] | None:
    """The first of `op`'s C bindings that dispatches `op` first, as `op` itself does, on the
    stand-ins `args` and `kwargs`; None if `op` itself dispatches anything else first."""
    expected = _first_dispatch(op, args, kwargs)
    if expected is None or expected[0] is not op:
        return None
    name = op._schema.name.split("::")[1]
    # C bindings only: a Python function (`torch.Tensor.split`) does its own work around the op.
    candidates = (
        fn
        for fn in (getattr(module, name, None) for module in _BINDINGS)
        if isinstance(fn, (types.BuiltinFunctionType, types.MethodDescriptorType)) and _codegen_finds(fn)
    )
    return next((fn for fn in candidates if _first_dispatch(fn, args, kwargs) == expected), None)


@functools.cache
def _codegen_finds(fn: Callable[..., Any]) -> bool:
    """Whether the name torch.fx's codegen writes for `fn` leads back to it from `torch`."""
    try:
        root, *path = _get_qualified_name(fn).split(".")
        found: Any = torch if root == "torch" else None
        for part in path:
            found = getattr(found, part)
        return found is fn
    except (AttributeError, RuntimeError):
        return False


def eager_ops_bound(graph: torch.fx.Graph) -> contextlib.AbstractContextManager[None]:
    """Inside: every eager ATen call of `graph` that has a proven binding targets it (for the
    code generated inside); after: the graph as it was."""
    return retargeted(graph, binding)
