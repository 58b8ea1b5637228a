"""TensorRT's log, routed to Python logging; its errors are kept for the exception that follows."""
from __future__ import annotations

import logging

import tensorrt as trt

log = logging.getLogger("trt_lower.tensorrt")


class TrtLogger(trt.ILogger):
    """Errors are collected (and raised with context by the caller, not printed twice);
    warnings go to the `trt_lower.tensorrt` logger at INFO, the rest at DEBUG."""

    def __init__(self) -> None:
        trt.ILogger.__init__(self)
        self.errors: list[str] = []

    def log(self, severity: trt.ILogger.Severity, msg: str) -> None:
        if int(severity) <= int(trt.ILogger.Severity.ERROR):
            self.errors.append(msg)
            log.debug("%s", msg)
        elif int(severity) == int(trt.ILogger.Severity.WARNING):
            log.info("%s", msg)
        else:
            log.debug("%s", msg)

    def take_errors(self) -> str:
        """The errors logged since the last call, as one line."""
        errors, self.errors = self.errors, []
        return "; ".join(errors)
