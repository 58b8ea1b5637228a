"""Sizes as ONNX values (a constant where the dim is static, read from Shape at runtime where not),
and the FX-node argument lookups capability checks share.

Dims may be torch.SymInt (dynamic); they are compared only after `isinstance(d, int)`.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, TypeGuard, TypeVar

import torch

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.target import TrtTarget

T = TypeVar("T")

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def int_bound(bound: object, default: T) -> int | T:
    """A sympy value-range bound as an int, or `default` where the range is unbounded there: ±oo,
    or torch's ±int_oo, which calls itself finite (is_finite) but which int() cannot convert."""
    return int(bound) if getattr(bound, "is_Integer", False) else default  # type: ignore[call-overload]


def value_of(arg: object) -> object:
    """An FX argument's value as converting sees it: a node's FakeTensor or SymInt, else itself
    (a literal)."""
    return arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg


def _range(arg: object) -> tuple[int | None, int | None]:
    """An FX size argument's lowest and highest value (None: unknown or unbounded there): a
    literal's own, a SymInt's from torch.export's shape environment."""
    val = value_of(arg)
    if isinstance(val, int):
        return val, val
    if not isinstance(val, torch.SymInt) or val.node.shape_env is None:
        return None, None
    bounds = val.node.shape_env.bound_sympy(val.node.expr)
    return int_bound(bounds.lower, None), int_bound(bounds.upper, None)


def never_negative(arg: object) -> bool:
    """Whether an FX size argument is known to be >= 0."""
    low, _ = _range(arg)
    return low is not None and low >= 0


def never_zero(arg: object) -> bool:
    """Whether an FX size argument is known not to be 0 (a divisor an engine may divide by)."""
    low, high = _range(arg)
    return (low is not None and low > 0) or (high is not None and high < 0)


def never_empty(d: object) -> bool:
    """Whether a dim is known not to be 0 at run time. torch.export starts a dynamic size's range
    at 2 (it traces sizes 0 and 1 as any other) also where a TensorSpec declared it from 0, which
    the input guard admits: only a range starting above 2 rules 0 out."""
    low, _ = _range(d)
    return low is not None and (low > 2 or (isinstance(value_of(d), int) and low > 0))


def is_static_dim(d: object) -> TypeGuard[int]:
    return isinstance(d, int)


def static(d: object, what: str) -> int:
    """`d` where a capability check made sure it is a static size."""
    if not isinstance(d, int):
        raise ValueError(f"{what} is dynamic ({d})")
    return d


def dim_size(b: GraphBuilder, x: Value, axis: int) -> Value:
    """x.shape[axis] as a 1-D int64 of one element."""
    d = x.shape[axis]
    if is_static_dim(d):
        return b.ints([d])
    return b.op("Gather", b.op("Shape", x), b.ints([axis]), axis=0, dtype=torch.int64, shape=(1,))


def dim_size_scalar(b: GraphBuilder, x: Value, axis: int) -> Value:
    """x.shape[axis] as a 0-d int64 (Range and Where operands)."""
    d = x.shape[axis]
    if is_static_dim(d):
        return b.const(d, torch.int64)
    return b.op("Gather", b.op("Shape", x), b.const(axis, torch.int64), axis=0, dtype=torch.int64, shape=())


def shape_of(b: GraphBuilder, parts: Sequence[Ref | int]) -> Ref:
    """A shape vector from 1-D int64 pieces and Python ints (static dims become constants)."""
    values = [b.ints([p]) if isinstance(p, int) else p for p in parts]
    if len(values) == 1:
        return values[0]
    return b.op("Concat", *values, axis=0, dtype=torch.int64)


def same_static_shape(a: Sequence[object] | None, b: Sequence[object] | None) -> bool:
    """Both shapes known, fully static and equal (a dynamic dim is never assumed equal)."""
    return a is not None and b is not None and all(is_static_dim(d) for d in (*a, *b)) and tuple(a) == tuple(b)


def static_numel(shape: Sequence[object]) -> int | None:
    """The product of `shape`, or None if a dim is dynamic."""
    n = 1
    for d in shape:
        if not is_static_dim(d):
            return None
        n *= d
    return n


def max_numel(shape: Sequence[object]) -> int | None:
    """The product of `shape`'s highest sizes (a dynamic dim's upper bound), or None if unbounded."""
    n = 1
    for d in shape:
        high = _range(d)[1]
        if high is None:
            return None
        n *= high
    return n


def empty_input(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    """Capability: a tensor input with a static 0-size dim. ONNX Runtime (1.31) gives reductions
    over empty tensors the input's shape, ignoring keepdims=0."""
    for arg in node.all_input_nodes:
        val = arg.meta.get("val")
        if isinstance(val, torch.Tensor) and any(is_static_dim(d) and d == 0 for d in val.shape):
            return f"empty input {arg.name} {tuple(val.shape)}"
    return None


def node_arg(node: torch.fx.Node, i: int | None, name: str, default: object = None) -> Any:
    """The node's argument at position i (None: keyword only), or keyword `name`, or `default`
    (Any: FX arguments are whatever the op's schema takes)."""
    if i is not None and i < len(node.args):
        return node.args[i]
    return node.kwargs.get(name, default)


def input_val(node: torch.fx.Node, i: int) -> torch.Tensor:
    """The FakeTensor of the node's tensor argument at position i."""
    arg = node.args[i]
    val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor):
        raise TypeError(f"{node.name}: argument {i} is not a tensor")
    return val


def arg_val(node: torch.fx.Node, i: int, name: str = "") -> torch.Tensor | None:
    """The FakeTensor of one of the node's arguments, if it is a tensor."""
    arg = node_arg(node, i, name)
    val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None
