"""The README's benchmark figure: a demo model lowered and timed against eager PyTorch, variants
interleaved, with `trt-lower bench` (summary on stdout, JSON and plot written).

    python bench/bench_vs_eager.py [--model resnet50] [--batch 1,4] [--out docs/images]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from trt_lower.cli import commands as cli


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", default="1,4")
    parser.add_argument("--iterations", default="20")
    parser.add_argument("--compare", default="eager,lowered")
    parser.add_argument("--out", type=Path, default=Path("docs/images"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    return cli.main(
        [
            "bench",
            "--model",
            args.model,
            "--batch-sizes",
            args.batch,
            "--iterations",
            args.iterations,
            "--warmup",
            "3",
            "--compare",
            args.compare,
            "--json",
            str(args.out / "bench.json"),
            "--plot",
            str(args.out / "bench.png"),
            "--draw",
            str(args.out / f"split_{args.model}.png"),
        ]
    )


if __name__ == "__main__":
    raise SystemExit(main())
