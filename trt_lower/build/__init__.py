"""Deprecated alias of `trt_lower.engine` (stage 4), kept for code that imports the old name.

The stage was renamed because tools take a package named `build/` for build output. Importing
`trt_lower.build` warns once (DeprecationWarning); `trt_lower.build.X` is then the very module
`trt_lower.engine.X`, loaded on first import (one module object under two names, so its classes
and state are shared, and TensorRT is imported only by the modules that need it). Import
`trt_lower.engine` instead; this alias goes in a later release.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

import trt_lower.engine

warnings.warn("trt_lower.build is deprecated: the stage is trt_lower.engine now (same modules, same names)",
              DeprecationWarning, stacklevel=2)


def _renamed(name: str) -> str:
    return trt_lower.engine.__name__ + name.removeprefix(__name__)


class _Alias(importlib.abc.Loader):
    """Loads trt_lower.build.X as the module trt_lower.engine.X itself."""

    def __init__(self, name: str) -> None:
        self.name = name

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.name)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system set the alias' spec on the module; the module keeps its own.
        module.__spec__ = self.spec


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if not fullname.startswith(__name__ + ".") or importlib.util.find_spec(_renamed(fullname)) is None:
            return None
        return ModuleSpec(fullname, _Alias(_renamed(fullname)))


sys.meta_path.append(_AliasFinder())
