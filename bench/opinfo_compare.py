"""Per-op refusal counts of two OpInfo sweeps side by side (each a `opinfo_sweep.py --json` file).

    python bench/opinfo_compare.py before.json after.json [--label-before X] [--label-after Y]

Prints a Markdown table of every OpInfo whose refused, passed or failed count differs between the
runs (an OpInfo covered in one run only counts as 0 samples in the other), then the totals.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

_ZERO = {"samples": 0, "passed": 0, "refused": 0, "failed": 0}
_KEYS = ("samples", "passed", "refused", "failed")


def _rows(path: str) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    with open(path) as f:
        run = json.load(f)
    return {row["op"]: row for row in run["ops"]}, run["totals"]


def table(before: str, after: str, label_before: str, label_after: str) -> str:
    old, old_total = _rows(before)
    new, new_total = _rows(after)
    lines = [
        f"| OpInfo | samples ({label_before} → {label_after}) | passed | refused | failed |",
        "|---|---|---|---|---|",
    ]
    for op in sorted(set(old) | set(new)):
        a, b = old.get(op, _ZERO), new.get(op, _ZERO)
        if any(a[k] != b[k] for k in _KEYS[1:]):
            lines.append(f"| {op} | " + " | ".join(f"{a[k]} → {b[k]}" for k in _KEYS) + " |")
    lines.append("| **total** | " + " | ".join(f"{old_total[k]} → {new_total[k]}" for k in _KEYS) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--label-before", default="before")
    parser.add_argument("--label-after", default="after")
    args = parser.parse_args(argv)
    print(table(args.before, args.after, args.label_before, args.label_after))
    return 0


if __name__ == "__main__":
    sys.exit(main())
