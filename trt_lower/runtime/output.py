"""OutputBuilder: the model's own output object, rebuilt from a lowered call's tensors."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

import torch.utils._pytree as pytree


def mirrors_items(spec: pytree.TreeSpec) -> bool:
    """Whether `spec` is a dict subclass (a transformers ModelOutput, say) holding tensors only:
    the outputs the OutputBuilder may build without `tree_unflatten`."""
    return (
        isinstance(spec.type, type)
        and issubclass(spec.type, dict)
        and spec.type is not dict
        and spec.num_children > 0
        and all(c.is_leaf() for c in spec.children())
    )


def _identical(a: Any, b: Any) -> bool:
    """Same items and the same attributes, in the same order, holding the same objects."""

    def pairs(x: Any) -> list[tuple[Any, int]]:
        return [(k, id(v)) for k, v in dict.items(x)] + [(k, id(v)) for k, v in vars(x).items()]

    return type(a) is type(b) and pairs(a) == pairs(b)


def _direct(spec: pytree.TreeSpec, made: Any) -> Callable[..., Any] | None:
    """A build of `spec`'s type from its leaves that writes an instance's items and attributes
    directly, as `made` (built by the type's constructor from the same leaves) holds them; None
    unless `made` holds exactly the leaves as items and attributes and None in every other
    attribute (the state a ModelOutput's dataclass __init__ and __post_init__ leave)."""
    cls, keys = spec.type, tuple(spec.context)
    attrs = vars(made) if hasattr(made, "__dict__") else {}
    if tuple(dict.keys(made)) != keys or any(attrs.get(k) is not made[k] for k in keys):
        return None
    if any(v is not None for k, v in attrs.items() if k not in keys):
        return None
    blank = dict.fromkeys(attrs)  # the attributes in the constructor's order
    base = next(b for b in cls.__mro__ if b in (OrderedDict, dict))
    new, set_item = cls.__new__, base.__setitem__

    def build(*leaves: Any) -> Any:
        out = new(cls)
        values = vars(out)
        values.update(blank)
        for key, leaf in zip(keys, leaves):
            values[key] = leaf
            set_item(out, key, leaf)
        return out

    return build


class OutputBuilder:
    """What a lowered module's forward returns when the model returns a dict subclass of
    tensors.

    torch.export's generated code rebuilds it with `tree_unflatten`, which for a transformers
    ModelOutput runs the dataclass __init__ and __post_init__: ~20 µs a call in a hot loop, more
    than the rest of a lowered call's host cost. Built directly (a new instance, its attributes,
    its items) it takes ~1 µs. The direct build is trusted only after it made an object identical
    to the constructor's on the first call, which also returns the constructor's; otherwise every
    call keeps `tree_unflatten`.
    """

    def __init__(self, spec: pytree.TreeSpec) -> None:
        self.spec = spec
        self.build: Callable[..., Any] = self._first

    def _first(self, *leaves: Any) -> Any:
        made = self._unflatten(*leaves)
        try:
            direct = _direct(self.spec, made)
            if direct is not None and not _identical(direct(*leaves), made):
                direct = None
        except Exception:  # a type whose instances are not built so: keep its constructor
            direct = None
        self.build = direct or self._unflatten
        return made

    def _unflatten(self, *leaves: Any) -> Any:
        return pytree.tree_unflatten(leaves, self.spec)

    # The direct build is a closure: after unpickling or copying, the first call derives it again.
    def __getstate__(self) -> dict[str, Any]:
        return {"spec": self.spec}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["spec"])  # type: ignore[misc]
