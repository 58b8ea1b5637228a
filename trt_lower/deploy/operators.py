"""Which operators an eager node of a loaded graph may call, and with which arguments.

An operator is allowed for what its kernel does on any integer, flag and size a file can give
it, never for where it comes from (core ATen holds `embedding_dense_backward`, which writes out of
bounds on a large index, and `empty`, which returns whatever memory held before):
- the ATen operators of `_SAFE` (safe_ops.py), kernels that check their indices, plus every
  elementwise (`pointwise`-tagged) public ATen operator: its output is its inputs' broadcast;
- the size and assertion operators torch.export leaves in a graph;
- torch.distributed's functional collectives of `COLLECTIVES` (safe_ops.py), their group bound
  on load to the current job's, never the file's (ranks.py);
- the user's own operators (defined in Python with torch.library by code imported before loading:
  the user's code, trusted as their converters are) and torch's quantize/dequantize operators.
Arguments the kernel trusts are checked before the call, on the literal values in the file: no
`unsafe=True`, enum ints in their range, sizes within a per-call allocation budget, paddings
bounded; `empty`-style constructors are replaced by their zero-filled forms; operators that
return nothing (acting only by side effect) are refused; Python operators (`operator.mul`) take
only bounded numbers and nodes that are no sequences (`"A" * 2**33`, `3 ** 10**9` are refused).
What these checks cannot see, sizes and numbers the graph computes at run time, allocations.py
checks on each call.
The schema must also be side-effect free:
- it mutates nothing (no in-place or out= overload);
- its arguments are tensors, numbers, dtypes, layouts, devices, memory formats (and lists or
  optionals of them); a string only where it picks a mode (`rounding_mode="floor"`); never a
  file name, a storage, a generator, a stream or an arbitrary object.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch._C import ListType, OptionalType

from trt_lower.deploy.safe_ops import CHECKS, COLLECTIVES, MODES, PADDINGS, REDUCE_OPS, SAFE, SIZES, ZERO_FILLED

# Per call: the most elements a size given in the file may make (1 GiB of float32), and the
# largest padding it may add to a dim.
MAX_ELEMENTS = 2**28
MAX_PAD = 2**12
# The largest magnitude of a number a Python operator takes from the file, and of an exponent.
MAX_NUMBER = 2**63
MAX_EXPONENT = 64
# Namespaces torch itself defines in Python (`prims.empty_strided` returns uninitialised memory):
# not the user's operators.
_TORCH_NAMESPACES = frozenset({"prims", "rngprims", "debugprims", "debug_mode_ops", "export", "_native", "coor"})
_QUANTIZE = frozenset({"quantized_decomposed"})
# Argument kinds (torch's schema types) an operator from a file may take.
_PLAIN = frozenset(
    {
        "TensorType",
        "IntType",
        "SymIntType",
        "FloatType",
        "BoolType",
        "NumberType",
        "ComplexType",
        "DeviceObjType",
        "NoneType",
        "SymBoolType",
        "SymFloatType",
    }
)
# A collective's string arguments: its reduction, and its group (schema type Any), a name.
_COLLECTIVE_STRINGS = frozenset({"reduce_op", "group_name"})
_NUMBERS = frozenset({"IntType", "SymIntType", "FloatType", "BoolType", "NumberType", "ComplexType"})
# Enums, which torch's schema types name rather than class.
_ENUMS = frozenset({"ScalarType", "Layout", "MemoryFormat"})
# String arguments that pick a mode from a few words, or carry an assertion's message.
_MODE_STRINGS = frozenset(
    {
        "approximate",
        "rounding_mode",
        "reduce",
        "reduction",
        "side",
        "equation",
        "indexing",
        "padding_mode",
        "mode",
        "interpolation",
        "padding",
        "assert_msg",
    }
)


def _plain(kind: Any) -> bool:
    if isinstance(kind, (OptionalType, ListType)):
        return _plain(kind.getElementType())
    return type(kind).__name__ in _PLAIN or str(kind) in _ENUMS


def _string(kind: Any) -> bool:
    if isinstance(kind, OptionalType):
        return _string(kind.getElementType())
    return type(kind).__name__ == "StringType"


def _packet(op: torch._ops.OpOverload) -> str:
    return str(op).rpartition(".")[0]  # "aten.add" of "aten.add.Tensor"


def _scalar(op: torch._ops.OpOverload) -> bool:
    """A function of numbers to numbers (`aten.exp.float`): TorchScript's 64-bit scalars, no memory."""
    kinds = [a.real_type for a in (*op._schema.arguments, *op._schema.returns)]
    return all(type(kind).__name__ in _NUMBERS for kind in kinds)


def _known(op: torch._ops.OpOverload) -> bool:
    """Whether `op`'s kernel is known safe on what a file can pass (before its schema is looked at)."""
    listed = _packet(op) in SAFE or str(op) in CHECKS or str(op) in ZERO_FILLED or str(op) in COLLECTIVES
    if op.namespace == "aten":
        public = not op._schema.name.partition("::")[2].startswith("_")
        return listed or public and (torch.Tag.pointwise in op.tags or _scalar(op))
    if op.namespace in _TORCH_NAMESPACES or str(op) in COLLECTIVES:
        return listed
    return op._schema.name in torch.library._defs or op.namespace in _QUANTIZE


def refusal(op: torch._ops.OpOverload) -> str | None:
    """Why a loaded graph may not call `op`, or None when it may."""
    if not _known(op):
        return "is not an operator known to be memory-safe on what a file can pass it"
    schema = op._schema
    if schema.is_mutable:
        return "writes to its arguments"
    if not schema.returns and str(op) not in CHECKS:
        return "returns nothing: it acts only by side effect"
    for argument in schema.arguments:
        kind = argument.real_type
        if _string(kind) and argument.name in _MODE_STRINGS or _plain(kind):
            continue
        if str(op) in COLLECTIVES and argument.name in _COLLECTIVE_STRINGS:
            continue  # checked per call (argument_refusal), the group bound on load (ranks.py)
        return f"takes '{argument.name}' ({kind}), which a loaded graph may not pass"
    if not all(_plain(r.real_type) for r in schema.returns):
        return "returns what is not a tensor or number"
    return None


def zero_filled(op: torch._ops.OpOverload) -> torch._ops.OpOverload:
    """`op`, or the zero-filled form of a constructor that returns uninitialised memory."""
    name = ZERO_FILLED.get(str(op))
    if name is None:
        return op
    namespace, packet, overload = name.split(".")
    found: torch._ops.OpOverload = getattr(getattr(getattr(torch.ops, namespace), packet), overload)
    return found


# -- arguments -------------------------------------------------------------------------------------
def _ints(value: Any) -> list[int]:
    """The literal ints of an argument (an int or a list of them; nodes, known only at run time,
    left out)."""
    items = value if isinstance(value, (list, tuple)) else [value]
    return [v for v in items if type(v) is int]


def _size_refusal(name: str, value: Any) -> str | None:
    ints = _ints(value)
    if any(v < 0 for v in ints):
        return f"'{name}' holds a negative size {min(ints)}"
    if math.prod(ints) > MAX_ELEMENTS:
        return f"'{name}' {str(value)[:80]} makes over {MAX_ELEMENTS} elements in one call"
    return None


def _bound(op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    names = [a.name for a in op._schema.arguments]
    return {**dict(zip(names, args)), **kwargs}


def argument_refusal(op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """Why a loaded graph may not call `op` with these arguments (literal values as the file gives
    them, torch.fx.Nodes where computed), or None when it may."""
    given = _bound(op, args, kwargs)
    if str(op) in COLLECTIVES:
        return _collective_refusal(given)
    if given.get("unsafe", False) is not False:
        return "is passed unsafe=True (its kernel then checks nothing)"
    packet = _packet(op)
    for name, allowed in MODES.get(packet, {}).items():
        if name in given and given[name] not in allowed:
            return f"'{name}' must be one of {sorted(allowed)}, got {str(given[name])[:80]}"
    for name in SIZES.get(packet, ()):
        if name in given and (why := _size_refusal(name, given[name])) is not None:
            return why
    for name in PADDINGS.get(packet, ()):
        if name in given and any(abs(v) > MAX_PAD for v in _ints(given[name])):
            return f"'{name}' {str(given[name])[:80]} pads by more than {MAX_PAD}"
    return _arange_refusal(given) if packet == "aten.arange" else None


def _collective_refusal(given: dict[str, Any]) -> str | None:
    """A collective names its group by a string and its reduction by one of REDUCE_OPS; the
    group size it allocates for is checked against the group's on load (ranks.py)."""
    if "group_name" in given and not isinstance(given["group_name"], str):
        return f"'group_name' must be a group's name, got {str(given['group_name'])[:80]}"
    if "reduce_op" in given and given["reduce_op"] not in REDUCE_OPS:
        return f"'reduce_op' must be one of {sorted(REDUCE_OPS)}, got {str(given['reduce_op'])[:80]}"
    if "group_size" in given and type(given["group_size"]) is not int:
        return f"'group_size' must be an int, got {str(given['group_size'])[:80]}"
    return None


def _arange_refusal(given: dict[str, Any]) -> str | None:
    """arange makes (end - start) / step elements; each literal of them must be a number."""
    start, end, step = given.get("start", 0), given.get("end"), given.get("step", 1)
    if not all(isinstance(v, (int, float)) for v in (start, end, step)):
        return None  # a node: a size read at run time
    if step == 0 or not math.isfinite((end - start) / step) or abs((end - start) / step) > MAX_ELEMENTS:
        return f"arange({start}, {end}, {step}) makes over {MAX_ELEMENTS} elements in one call"
    return None


# -- Python operators ------------------------------------------------------------------------------
def _sequence(node: torch.fx.Node) -> bool:
    """Whether a node's value may be a sequence (an engine's outputs, an operator's list)."""
    if node.op == "call_module":
        return True
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return False
    returns = target._schema.returns
    return len(returns) > 1 or any(isinstance(r.real_type, ListType) for r in returns)


def _operand_refusal(value: Any) -> str | None:
    if isinstance(value, torch.fx.Node):
        return f"takes '{value.name}', which may be a sequence" if _sequence(value) else None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return None if abs(value) <= MAX_NUMBER or math.isnan(value) else f"takes {str(value)[:40]}, over 2**63"
    return f"takes a {type(value).__name__} ({str(value)[:40]}), not a number"


def python_refusal(fn: Callable[..., Any], args: tuple[Any, ...]) -> str | None:
    """Why a loaded graph may not call the Python operator `fn` with `args`, or None when it may.
    getitem indexes a node by a literal int; the others take bounded numbers and nodes that are
    no sequences; a power's exponent is a literal of at most MAX_EXPONENT."""
    import operator

    if fn is operator.getitem:
        ok = len(args) == 2 and isinstance(args[0], torch.fx.Node) and type(args[1]) is int
        return None if ok else "indexes what is not a node by an int"
    for value in args:
        if (why := _operand_refusal(value)) is not None:
            return why
    if fn is operator.pow and not (
        len(args) == 2 and isinstance(args[1], (int, float)) and abs(args[1]) <= MAX_EXPONENT
    ):
        return f"raises to {str(args[1:])[:40]}; an exponent must be a literal of at most {MAX_EXPONENT}"
    return None
