"""TensorRT's log, routed to Python logging; its errors are kept for the exception that follows.

TensorRT keeps one logger per process (the first one a Builder or Runtime is given; later ones
only earn a warning), so every Builder and Runtime here gets the same one: `LOGGER`. Errors are
kept per thread, since TensorRT logs on the thread that made the failing call.
"""

from __future__ import annotations

import logging
import threading

import tensorrt as trt

log = logging.getLogger("trt_lower.tensorrt")


class TrtLogger(trt.ILogger):
    """Errors are collected (and raised with context by the caller, not printed twice);
    warnings go to the `trt_lower.tensorrt` logger at INFO, the rest at DEBUG."""

    def __init__(self) -> None:
        trt.ILogger.__init__(self)
        self._local = threading.local()

    @property
    def errors(self) -> list[str]:
        """This thread's errors since its last `take_errors`."""
        errors: list[str] | None = getattr(self._local, "errors", None)
        if errors is None:
            errors = self._local.errors = []
        return errors

    def log(self, severity: trt.ILogger.Severity, msg: str) -> None:
        if int(severity) <= int(trt.ILogger.Severity.ERROR):
            self.errors.append(msg)
            log.debug("%s", msg)
        elif int(severity) == int(trt.ILogger.Severity.WARNING):
            log.info("%s", msg)
        else:
            log.debug("%s", msg)

    def take_errors(self) -> str:
        """This thread's errors logged since the last call, as one line."""
        errors, self._local.errors = self.errors, []
        return "; ".join(errors)


LOGGER = TrtLogger()
