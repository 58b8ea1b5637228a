"""TrtLowerError: the base of every error trt_lower raises on purpose.

It sits at the bottom of the import graph, beside the converters, because converters/ and
splitter/ raise errors users meet (ConversionError, IndexOutOfRangeError) and import nothing of
trt_lower; `trt_lower.TrtLowerError` is this class.
"""

from __future__ import annotations


class TrtLowerError(Exception):
    """Base of every error trt_lower raises on purpose. Each error also keeps its builtin base, so
    that a bad argument stays a ValueError and a failed build a RuntimeError:
    `except trt_lower.TrtLowerError` catches what trt_lower refused, and nothing else."""
