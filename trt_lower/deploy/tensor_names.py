"""The names of the tensors an artifact's eager nodes read (get_attr targets), checked where they
become code and attributes of the loaded module.

A name is a dotted path, as nn.Module names its parameters and buffers: `lin.weight`, and
`layers.0.bias` under an nn.Sequential or nn.ModuleList, `blocks.my-block.weight` under an
nn.ModuleDict. FX writes each part into forward's code (torch/fx/graph.py, `_format_target`): an
identifier as `.part`, anything else as `getattr(..., "part")`, quoted without escaping. So a
part is an identifier as Python reads it (no keyword, unchanged by NFKC normalization), or text
that literal reads back exactly: printable, without a quote or a backslash. GraphModule then sets
each name as attributes, getting each part before the last and making a plain nn.Module where it
finds none (`_assign_attr`): so no part may name an attribute the module it is set on already has
(`__class__` would reach a class; `forward`, `training`, `graph`), nor be a tensor another name
reaches into.
"""

from __future__ import annotations

import functools
import unicodedata
from typing import Iterable

import torch

from trt_lower.deploy.graph_json import GraphFormatError, identifier
from trt_lower.stitch.lowered import LoweredModule

# Generous for any model (a deep transformer's names are under 100 characters and 10 parts), small
# enough that a planted name cannot make the generated code or the module tree huge.
MAX_CHARS = 1024
MAX_PARTS = 64
# What loading sets on the module once it is made: the pytree codegen's specs, the output builder.
_SET_AFTER = frozenset({"_in_spec", "_out_spec", "_output"})


@functools.cache
def _taken(top: bool) -> frozenset[str]:
    """The attributes a module a name's part is set on already has: the loaded LoweredModule for
    the first part, a plain nn.Module (made by GraphModule) for the others."""
    taken = set(dir(torch.nn.Module)) | set(vars(torch.nn.Module()))
    if top:
        taken |= set(dir(LoweredModule)) | set(LoweredModule.__annotations__) | _SET_AFTER
        taken |= set(vars(torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())))
    return frozenset(taken)


def _part(part: str, what: str) -> None:
    """Raise GraphFormatError unless FX writes `part` as code that reads exactly it."""
    if part.isidentifier():  # written as `.part`: no keyword, and Python reads it NFKC-normalized
        identifier(part, what)
        if unicodedata.normalize("NFKC", part) != part:
            raise GraphFormatError(f"{what} {part[:80]!r} is not an identifier as Python reads it (NFKC)")
    elif not part or not part.isprintable() or '"' in part or "\\" in part:  # written inside "..."
        raise GraphFormatError(
            f"{what} {part[:80]!r} is not an identifier, nor printable text without quotes or backslashes"
        )


def check(names: Iterable[str], what: str) -> None:
    """Raise GraphFormatError naming the first of `names` (the eager nodes' tensors; `what` says
    where they are from) that would not read back as itself from the loaded module."""
    names = list(names)
    for name in names:
        where = f"{what} {name[:80]!r}"
        parts = name.split(".")
        if len(name) > MAX_CHARS or len(parts) > MAX_PARTS:
            raise GraphFormatError(f"{where}: longer than {MAX_CHARS} characters or {MAX_PARTS} parts")
        for depth, part in enumerate(parts):
            _part(part, f"{where}, part")
            if part in _taken(depth == 0):
                raise GraphFormatError(f"{where}, part {part!r} names an attribute its module already has")
    modules = {name.rsplit(".", depth)[0] for name in names for depth in range(1, name.count(".") + 1)}
    for name in names:
        if name in modules:
            raise GraphFormatError(f"{what} {name[:80]!r} is a tensor, and other names read tensors inside it")
