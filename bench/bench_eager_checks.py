"""What the run-time checks of a loaded graph's eager nodes cost per call (trt_lower/deploy/allocations.py).

    python bench/bench_eager_checks.py [--calls 50000] [--repeats 9]

Each check wraps the callable its node calls; here it wraps a stub that returns at once, so the
difference between the checked and the bare stub is the check alone (expand's check reads the
view the operator returns, so it wraps torch's own expand). Figures: the best of --repeats runs of
--calls calls, in µs per call. See bench/README.md ("eager allocation checks").
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import timeit
from typing import Any, Callable

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from trt_lower.deploy import allocations  # noqa: E402

aten = torch.ops.aten


def _stub(*args: Any, **kwargs: Any) -> None:
    return None


def cases() -> dict[str, tuple[Callable[..., Any], Callable[..., Any], tuple[Any, ...]]]:
    """name -> (checked call, bare call, arguments)."""
    x, ids, budget = torch.randn(4, 16), torch.tensor(3), allocations.DEFAULT_MAX_EAGER_ALLOCATION
    expand = allocations.viewed("expand", aten.expand.default, budget)(torch.Tensor.expand)
    return {
        "expand": (expand, torch.Tensor.expand, (x, [2, 4, -1])),
        "repeat": (allocations.budgeted("repeat", aten.repeat.default, budget)(_stub), _stub, (x, [1, 2])),
        "new_zeros": (allocations.budgeted("new_zeros", aten.new_zeros.default, budget)(_stub), _stub, (x, [4, 16])),
        "one_hot": (allocations.budgeted("one_hot", aten.one_hot.default, budget)(_stub), _stub, (ids, 32)),
        "arange(start, end, step)": (
            allocations.budgeted("arange", aten.arange.start_step, budget)(_stub),
            _stub,
            (0, 64, 1),
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50000)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    print(
        f"torch {torch.__version__}, load average {os.getloadavg()[0]:.2f}; best of {args.repeats} x {args.calls} calls"
    )
    for name, (checked, bare, call_args) in cases().items():
        times = [
            min(timeit.repeat(functools.partial(fn, *call_args), number=args.calls, repeat=args.repeats))
            / args.calls
            * 1e6
            for fn in (checked, bare)
        ]
        print(f"  {name:26s} check {times[0] - times[1]:5.2f} µs   (checked {times[0]:5.2f}, bare {times[1]:5.2f})")


if __name__ == "__main__":
    main()
