"""A rank that dies, or stalls past the process group's timeout, ends the others with
CollectiveError naming the collective's node, never a hang (2 ranks on gloo, 127.0.0.1)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from distributed_workers import launch


@pytest.mark.parametrize("mode", ["die", "stall"])
def test_a_lost_rank_ends_the_other_with_the_collective_named(tmp_path: Path, mode: str) -> None:
    (output,) = launch(mode, tmp_path, 2, timeout_s=120, ranks=1, TIMEOUT_S="10")
    assert "ok " in output, output
    # gloo reports the failure where the all_reduce is waited for (or, were it noticed first, at the all_reduce)
    named = r"collective node ('wait_tensor' \(\S+\), completing node )?'all_reduce' \(\S+all_reduce.default\) failed"
    assert re.search(named, output), output
    seconds = float(output.split("ok ")[1].split(" s:")[0])
    assert seconds < 60  # the process group's timeout is 10 s
