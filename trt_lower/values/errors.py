"""UnsupportedOpsError: what require_full=True raises, whichever stage finds the node that cannot
run in an engine (the splitter, a converter, the engine build, verification)."""

from __future__ import annotations

from converters.core.errors import TrtLowerError


class UnsupportedOpsError(TrtLowerError, RuntimeError):
    """require_full=True and some nodes cannot run inside an engine (no converter, a converter or
    engine build that failed on them, or an engine that disagrees with eager PyTorch)."""
