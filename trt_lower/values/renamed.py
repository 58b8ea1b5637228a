"""A public function's keyword under its former spelling, kept for one release: the functions
that take the same thing name it alike (`inputs`, as lower_to_trt, check_accuracy and benchmark
take the model's inputs), and a caller of the old name is told the new one."""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def renamed_keywords(**former: str) -> Callable[[F], F]:
    """`@renamed_keywords(old="new")`: `old=` still works, with a DeprecationWarning naming `new`;
    both at once is a TypeError, as Python's own for a keyword given twice. The signature shown
    (inspect, the docs) is the function's own, with the new names only."""

    def rename(function: F) -> F:
        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            for old, new in former.items():
                if old not in kwargs:
                    continue
                if new in kwargs:
                    raise TypeError(f"{function.__name__}() got {old}= and {new}=: give {new}= only")
                warnings.warn(
                    f"{function.__name__}({old}=...) is deprecated and goes in the next release: use {new}=",
                    DeprecationWarning,
                    stacklevel=2,
                )
                kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)

        return call  # type: ignore[return-value]

    return rename
