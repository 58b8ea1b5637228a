"""Grouped matmul forms on ONNX Runtime (CPU): which ONNX the grouped_mm converters emit.

    python bench/bench_grouped_mm.py [--blocks 5] [--calls 10] [--sizes 16x2,128x2,512x2] [--experts 8] [--dim 256]

transformers' default experts implementation multiplies each routed (token, expert) row by its
expert's weight (`transformers::grouped_mm_fallback`, offsets from histc + cumsum). Per size
(tokens x top-k routed rows, `--experts` experts of `--dim` x 2*`--dim` weights), side by side in
one process, each lowered to one engine: every expert over all rows in one MatMul, rows gathered
after (`gathered_rows`); each row's expert weight gathered, one batched MatMul (`gathered_weights`);
and eager. Per-call time: a block's median; figures: the median over blocks (ms).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
from typing import Callable

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_overhead import CLOCKS, measure  # noqa: E402
from transformers.integrations import moe  # noqa: E402, F401  (registers transformers::grouped_mm_fallback)

import trt_lower  # noqa: E402
from converters.ops import grouped_mm  # noqa: E402

# Each form forced by the group count up to which the converter picks gathered_rows.
FORMS = {"gathered_rows": 2**31, "gathered_weights": 0}


class Experts(torch.nn.Module):
    def __init__(self, experts: int, dim: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(experts, dim, 2 * dim) / dim**0.5)

    def forward(self, rows: torch.Tensor, expert_ids: torch.Tensor) -> torch.Tensor:
        counts = torch.histc(expert_ids.float(), bins=self.weight.shape[0], min=0, max=self.weight.shape[0] - 1)
        offsets = torch.cumsum(counts, 0, dtype=torch.int32)
        out: torch.Tensor = torch.ops.transformers.grouped_mm_fallback(rows, self.weight, offsets)
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--sizes", default="16x2,128x2,512x2")
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--dim", type=int, default=256)
    args = parser.parse_args()
    print(
        f"torch {torch.__version__}, load average {os.getloadavg()[0]:.2f}; {args.experts} experts, "
        f"weights {args.dim}x{2 * args.dim}; median of {args.blocks} blocks x {args.calls} calls (ms)"
    )
    chosen = grouped_mm.ROWS_UP_TO_GROUPS
    for size in args.sizes.split(","):
        tokens, top_k = map(int, size.split("x"))
        model = Experts(args.experts, args.dim).eval()
        ids = torch.randint(0, args.experts, (tokens * top_k,)).sort().values
        inputs = (torch.randn(tokens * top_k, args.dim), ids)
        calls: dict[str, Callable[[], object]] = {"eager": lambda: model(*inputs)}
        for name, rows_up_to in FORMS.items():
            grouped_mm.ROWS_UP_TO_GROUPS = rows_up_to
            lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", require_full=True)
            torch.testing.assert_close(lowered(*inputs), model(*inputs), rtol=1e-4, atol=1e-4)
            calls[name] = functools.partial(lowered, *inputs)
        grouped_mm.ROWS_UP_TO_GROUPS = chosen
        times = measure(calls, args.blocks, args.calls, CLOCKS["wall"])
        print(
            f"{tokens} tokens x top-{top_k}: "
            + ", ".join(f"{n} {statistics.median(t) / 1e3:.3f}" for n, t in times.items())
        )


if __name__ == "__main__":
    main()
