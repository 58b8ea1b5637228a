"""OpInfo sweep: every covered OpInfo's sample inputs lowered (ONNX Runtime), run, compared with eager.

    python bench/opinfo_sweep.py [--ops 'add,nn.functional.*'] [--max-samples 8 | --full]
                                 [--dtypes float32,int64] [--batch-size 48] [--exhaustive]
                                 [--failures] [--json out.json]

Prints a per-op table (samples counted = passed + refused + failed; pass rate = passed over
the non-refused), the totals and the overall pass rate. Uncapturable samples, samples whose graph
has an op with no converter, and samples eager PyTorch rejects are shown but not counted.
The sweep itself (what is covered, tolerances, batching) lives in bench/opinfo_corpus.py, shared
with tests/test_opinfo_sweep.py; see its docstring. TRT_LOWER_OPINFO_FULL=1 is the same as --full.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

# The checkout this script is in, when trt_lower is not installed from it (opinfo_corpus sits
# beside this script, on the path already).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import opinfo_corpus as corpus  # noqa: E402
import torch  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", help="comma-separated OpInfo names or fnmatch patterns (name or name.variant)")
    parser.add_argument("--max-samples", type=int, default=8, help="samples per OpInfo and dtype (default 8)")
    parser.add_argument(
        "--full",
        action="store_true",
        default=os.environ.get("TRT_LOWER_OPINFO_FULL") == "1",
        help="every sample (overrides --max-samples)",
    )
    parser.add_argument("--dtypes", default="float32,int64", help="sample dtypes (default float32,int64)")
    parser.add_argument("--batch-size", type=int, default=48, help="samples lowered together (1: each alone)")
    parser.add_argument("--exhaustive", action="store_true", help="capture every OpInfo, no eager pre-filter")
    parser.add_argument("--failures", action="store_true", help="list failed and refused samples")
    parser.add_argument("--json", help="write the table and every sample's outcome here")
    parser.add_argument("--progress", action="store_true", help="a line per OpInfo as it finishes")
    args = parser.parse_args(argv)

    dtypes = [getattr(torch, d.strip()) for d in args.dtypes.split(",") if d.strip()]
    ops = corpus.select(corpus.op_db(), args.ops.split(",") if args.ops else None)

    def progress(line: str) -> None:
        print(f"  {line}", file=sys.stderr, flush=True)

    start = time.perf_counter()
    run = corpus.sweep(
        ops,
        progress=progress if args.progress else None,
        dtypes=dtypes,
        max_samples=None if args.full else args.max_samples,
        batch_size=args.batch_size,
        exhaustive=args.exhaustive,
    )
    elapsed = time.perf_counter() - start
    table = corpus.rows(run.results)
    total = corpus.totals(table)
    print(corpus.format_table(table))
    rate = "-" if total.pass_rate is None else f"{100 * total.pass_rate:.2f}%"
    print(
        f"\n{len(table)} covered OpInfos of {len(ops)} swept ({len(run.uncovered)} more candidates not covered); "
        f"{total.samples} samples counted; "
        f"overall pass rate {rate} of non-refused samples ({total.passed}/{total.passed + total.failed}); "
        f"{run.lowerings} lowerings, {elapsed:.0f} s"
    )
    if run.splits:
        print("batches halved: " + ", ".join(f"{n}x {why}" for why, n in sorted(run.splits.items())))
    if args.failures:
        for r in run.results:
            if r.outcome in ("failed", "refused"):
                print(f"{r.outcome:8} {r.op} [{r.dtype} #{r.index}] {r.kind} {r.detail}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    **corpus.to_json(run.results, table),
                    "seconds": elapsed,
                    "uncovered": run.uncovered,
                    "lowerings": run.lowerings,
                    "splits": run.splits,
                    "options": {
                        "dtypes": args.dtypes,
                        "max_samples": None if args.full else args.max_samples,
                        "batch_size": args.batch_size,
                        "exhaustive": args.exhaustive,
                    },
                },
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
