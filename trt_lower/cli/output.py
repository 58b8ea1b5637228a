"""What `trt-lower` writes besides a command's own output.

trt_lower's log lines (engine builds take minutes: one line per engine) are shown as they come.
Everything else written to stderr while a command runs (torch's logs and the partial graphs
torch.export prints when it fails, Python warnings) is held: written out after a command that
succeeds, dropped after one that fails, so that a failure is the one line the dispatcher writes.
`--debug` holds nothing and shows every logger's lines too.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
from typing import Iterator, TextIO

_HANDLER = "trt-lower"
# The stderr a command's own writes are held from: where trt_lower's log lines still go.
_shown: list[TextIO] = []


class _Shown(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler writing to the stderr of the moment, the held one excepted."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = _shown[-1] if _shown else sys.stderr  # not setStream: it flushes the last one, maybe closed
        super().emit(record)


def configure_logs(debug: bool) -> None:
    """trt_lower's INFO lines shown; with `debug`, every logger's warnings too (the root's handler)."""
    ours = logging.getLogger("trt_lower")
    for handler in [h for h in ours.handlers if h.get_name() == _HANDLER]:  # main() runs again in one process
        ours.removeHandler(handler)
    ours.setLevel(logging.INFO)
    if debug:
        logging.basicConfig(format="%(message)s", level=logging.WARNING)
        return
    handler = _Shown()
    handler.set_name(_HANDLER)
    handler.setFormatter(logging.Formatter("%(message)s"))
    ours.addHandler(handler)


@contextlib.contextmanager
def held_stderr(debug: bool) -> Iterator[None]:
    """Hold what the block writes to sys.stderr (nothing with `debug`): written out when the
    block ends normally, dropped when it raises."""
    if debug:
        yield
        return
    held = io.StringIO()
    _shown.append(sys.stderr)
    try:
        with contextlib.redirect_stderr(held):
            yield
    finally:
        _shown.pop()
    sys.stderr.write(held.getvalue())


def quiet_stdout() -> None:
    """After a broken pipe (`trt-lower info FILE | head -1`): stdout goes to /dev/null from here,
    so that the interpreter's last flush at exit does not fail again (Python's documented way,
    "Note on SIGPIPE" in the signal module)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
