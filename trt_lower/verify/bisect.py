"""The smallest run of an engine's nodes that still fails when built alone and fed eager inputs.

The nodes are cut into units (a multi-output node with its getitems, a quantize with its
dequantizes) in graph order. The shortest failing prefix ends at the first unit whose output goes
wrong; the longest failing suffix of that prefix starts where the trouble begins. A node alone is
blamed only when its own inputs were eager's; a miscompile that needs a fusion (the culprit's
output consumed inside the engine, never written out) shows as a run of two or more units, so the
search never marks an intermediate tensor as an output unless the run itself ends there.
About 2 log2(units) builds.
"""

from __future__ import annotations

from typing import Callable, Sequence

from trt_lower.verify.nodes import Node

# The worst failing output of a node run built alone, or None when it passes.
Probe = Callable[[list[Node]], "float | None"]


def smallest_failing(groups: Sequence[list[Node]], fails: Probe) -> tuple[list[Node], float | None]:
    """The shortest contiguous run of `groups` that `fails`, flattened, and its error; the whole
    when even the whole passes alone (it fails only as built with the rest)."""

    def flat(part: Sequence[list[Node]]) -> list[Node]:
        return [n for g in part for n in g]

    whole = fails(flat(groups))
    if whole is None:
        return flat(groups), None
    lo, hi, error = 1, len(groups), whole
    while lo < hi:  # the shortest failing prefix
        mid = (lo + hi) // 2
        found = fails(flat(groups[:mid]))
        if found is None:
            lo = mid + 1
        else:
            hi, error = mid, found
    end = lo
    lo, hi = 0, end - 1
    while lo < hi:  # its longest failing suffix
        mid = (lo + hi + 1) // 2
        found = fails(flat(groups[mid:end]))
        if found is None:
            hi = mid - 1
        else:
            lo, error = mid, found
    return flat(groups[lo:end]), error
