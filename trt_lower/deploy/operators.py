"""Which operators an eager node of a loaded graph may call.

A loaded graph's eager nodes are what lowering left eager: core ATen operators, the operators a
converter maps whole (which a capability check may still refuse), public operators torch.export's
decompositions leave whole (`aten.special_i0e`: none is written for it), the size and assertion
operators torch.export leaves in a graph, and the user's own operators (defined in Python with
torch.library, imported before loading). An operator from the file is called only when it is
one of those AND its schema is side-effect free:
- it mutates nothing (no in-place or out= overload);
- its arguments are tensors, numbers, dtypes, layouts, devices, memory formats (and lists or
  optionals of them); a string only where it picks a mode (`rounding_mode="floor"`); never a
  file name, a storage, a generator, a stream or an arbitrary object.
What this keeps out, for instance: `aten.from_file` (reads or maps any file), `aten.set_` (a
tensor over any storage), `aten.copy_` (writes through an alias), unchecked sparse constructors
(`aten._sparse_coo_tensor_with_dims_and_tensors`), the collectives and C++ operators of other
libraries.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch._C import ListType, OptionalType

# Operators torch.export leaves in a graph besides core ATen: sizes read at run time and checks.
_EXPORT_LEFTOVERS = frozenset(
    {
        "aten.sym_size.int",
        "aten.sym_stride.int",
        "aten.sym_numel.default",
        "aten.sym_storage_offset.default",
        "aten._assert_scalar.default",
        "aten.sym_constrain_range_for_size.default",
        "aten.sym_constrain_range.default",
        "aten._assert_tensor_metadata.default",
        "aten.item.default",
        "aten.lift_fresh_copy.default",
    }
)
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


@functools.cache
def _converted() -> frozenset[str]:
    """The operators a converter maps whole (read only for a graph that calls one outside core
    ATen: it loads every converter)."""
    import converters

    return frozenset(str(op) for op in converters.supported_ops())


@functools.cache
def _decomposed() -> frozenset[Any]:
    return frozenset(torch.export.default_decompositions())


def _left_whole(op: torch._ops.OpOverload) -> bool:
    """A public ATen operator capture's decompositions leave as it is. Private (`_`) and sparse
    operators are never: the unchecked constructors are among them."""
    base = op._schema.name.partition("::")[2]
    return not base.startswith("_") and "sparse" not in base and op not in _decomposed()


def _known(op: torch._ops.OpOverload) -> bool:
    """Whether lowering can leave `op` eager (before its schema is looked at)."""
    name = str(op)
    if op.namespace == "aten":
        return torch.Tag.core in op.tags or name in _EXPORT_LEFTOVERS or name in _converted() or _left_whole(op)
    # Other libraries: the operators defined in Python through torch.library (the user's own,
    # torch's prims and quantize/dequantize), not C++ operators.
    return op._schema.name in torch.library._defs


def refusal(op: torch._ops.OpOverload) -> str | None:
    """Why a loaded graph may not call `op`, or None when it may."""
    if not _known(op):
        return "is not an operator lowering leaves eager"
    schema = op._schema
    if schema.is_mutable:
        return "writes to its arguments"
    for argument in schema.arguments:
        kind = argument.real_type
        if _string(kind) and argument.name in _MODE_STRINGS or _plain(kind):
            continue
        return f"takes '{argument.name}' ({kind}), which a loaded graph may not pass"
    return None
