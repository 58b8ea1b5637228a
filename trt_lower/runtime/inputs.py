"""The lowered module's inputs as pytrees: flattened against the structure the model was lowered
for, with an error naming where a call's structure differs."""

from __future__ import annotations

from typing import Any

import torch.utils._pytree as pytree

from converters.core.errors import TrtLowerError


class InputStructureError(TrtLowerError, ValueError):
    """A call's inputs are not of the structure (tuples, lists, dicts, caches) the model was lowered for."""


def flatten_inputs(tree: Any, spec: pytree.TreeSpec) -> list[Any]:
    """The leaves of `tree` (the generated forward's `([args], {kwargs})`) in `spec`'s order;
    InputStructureError naming the first place where its structure differs from `spec`."""
    args, kwargs = tree
    leaves, given = pytree.tree_flatten((tuple(args), kwargs))
    if given != spec:
        raise InputStructureError(_difference(spec, given, ""))
    return leaves


def _describe(spec: pytree.TreeSpec) -> str:
    if spec.is_leaf():
        return "a tensor (a pytree leaf)"
    if spec.type is dict:
        return f"a dict with keys {list(spec.context)}"
    if spec.type in (tuple, list):
        return f"a {spec.type.__name__} of {spec.num_children}"
    return f"a {getattr(spec.type, '__name__', spec.type)} of {spec.num_children} tensor(s)"


def _difference(expected: pytree.TreeSpec, given: pytree.TreeSpec, path: str) -> str:
    """Where `given` first differs from `expected`: `inputs[1]['b']: lowered for ..., got ...`.
    Both are `(args, kwargs)` at the top."""
    same_node = (
        expected.type is given.type
        and expected.num_children == given.num_children
        and (expected.type is not dict or list(expected.context) == list(given.context))
    )
    if not same_node:
        where = path or "the inputs"
        return f"{where}: the model was lowered for {_describe(expected)}, got {_describe(given)}"
    for i, (e, g) in enumerate(zip(expected.children(), given.children())):
        if e == g:
            continue
        if not path:
            key = "inputs" if i == 0 else "kwargs"
        elif expected.type is dict:
            key = f"{path}[{expected.context[i]!r}]"
        else:
            key = f"{path}[{i}]"
        return _difference(e, g, key)
    return f"{path or 'the inputs'}: {given} differs from {expected}"  # a cache's own context differs
