"""Copy the installed `tensorrt-stubs` into build/trt-stubs, repaired so mypy can parse them.

NVIDIA's generated stubs (10.13.0.35.1) are not valid Python in a few places: plugin methods name
a parameter `in` (a keyword), and `add_scale_nd` puts a parameter without default after ones
with defaults. mypy stops at the first syntax error, so those spots are rewritten here; nothing
else changes. The stubs ship without a py.typed marker, so setup.cfg points mypy_path at the copy.
"""

from __future__ import annotations

import re
import shutil
import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

DIST = "tensorrt-stubs"
TARGET = Path(__file__).resolve().parent.parent / "build" / "trt-stubs"
REPAIRS = ((re.compile(r"\bin: "), "in_: "), (re.compile(r"channel_axis: int\)"), "channel_axis: int = ...)"))


def main() -> int:
    try:
        files = distribution(DIST).files or []
    except PackageNotFoundError:
        print(f"{DIST} is not installed: pip install --no-deps {DIST}==10.13.0.35.1", file=sys.stderr)
        return 1
    shutil.rmtree(TARGET, ignore_errors=True)
    stubs = [f for f in files if f.suffix == ".pyi"]
    for f in stubs:
        text = Path(str(f.locate())).read_text()
        for pattern, replacement in REPAIRS:
            text = pattern.sub(replacement, text)
        out = TARGET / str(f)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    print(f"{len(stubs)} stub files of {DIST} {distribution(DIST).version} -> {TARGET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
