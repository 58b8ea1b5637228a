"""Progress of long lowerings: a bar on stderr when it is a terminal, nothing otherwise.

Bars are tqdm's (`disable=None` turns them off when stderr is not a TTY: logs, CI, pipes);
the same steps go to the `trt_lower` logger at DEBUG, so what a bar showed can be recorded.
"""

from __future__ import annotations

import logging
import sys
from typing import Iterator, Sequence, TypeVar

from tqdm import tqdm

log = logging.getLogger("trt_lower")

T = TypeVar("T")


def track(items: Sequence[T], desc: str, unit: str = "engine") -> Iterator[T]:
    """Yield `items`, advancing a progress bar named `desc` after each one."""
    # Read sys.stderr at call time (not import time): tests and tools swap it.
    with tqdm(
        total=len(items), desc=desc, unit=unit, file=sys.stderr, disable=None, leave=False, dynamic_ncols=True
    ) as bar:
        for i, item in enumerate(items):
            name = str(getattr(item, "name", item))  # a segment by its name, not its whole repr
            bar.set_postfix_str(name, refresh=False)
            log.debug("%s: %d/%d %s", desc, i + 1, len(items), name)
            yield item
            bar.update()
