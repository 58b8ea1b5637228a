"""The classes a stored input or output structure may name (a ModelOutput, a key/value cache and
its layers), checked against an explicit allowlist before anything is imported.

A name from the file is a class only when it is defined (not re-exported: transformers re-exports
stdlib classes and `TrainingArguments`) in one of the few transformers modules that define these
classes (`IMPORTABLE`, the only modules a file can make load import), or in a transformers module
the process imported already (a model's own output class, imported with its model code). Nothing
else is imported: a stored structure naming 2,812 modules imported each of them before.
"""

from __future__ import annotations

import importlib
import re
import sys
from types import ModuleType
from typing import Callable

IMPORTABLE = frozenset({"transformers.modeling_outputs", "transformers.cache_utils"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MODULE = re.compile(r"transformers(\.[A-Za-z_][A-Za-z0-9_]*)+")


def _module(name: str) -> ModuleType | None:
    if name in IMPORTABLE:
        try:
            return importlib.import_module(name)
        except ImportError:  # transformers is not installed
            return None
    return sys.modules.get(name)


def transformers_class(path: str, kind: Callable[[type], bool]) -> type | None:
    """The class `path` ("module.Class" or "module:Class") names, when it is allowed and of `kind`;
    None otherwise (and nothing imported beyond IMPORTABLE)."""
    module_name, _, name = path.replace(":", ".").rpartition(".")
    if not _MODULE.fullmatch(module_name) or not _NAME.fullmatch(name):
        return None
    module = _module(module_name)
    cls = None if module is None else vars(module).get(name)
    if not isinstance(cls, type) or cls.__module__ != module_name or cls.__qualname__ != name:
        return None
    return cls if kind(cls) else None


def is_model_output(cls: type) -> bool:
    return any(base.__module__.startswith("transformers.") and base.__name__ == "ModelOutput" for base in cls.__mro__)


def is_cache(cls: type) -> bool:
    """A transformers key/value cache class (`DynamicCache`), flattened as transformers' exporter
    registers it."""
    return cls.__module__.startswith("transformers.") and cls.__name__.endswith("Cache")


def is_cache_part(cls: type) -> bool:
    """A class a cache is built of (`DynamicLayer`), or a cache."""
    return is_cache(cls) or cls.__name__.endswith("Layer")
