"""What a deployment pays to start: `import trt_lower` and `trt-lower info FILE` against `import torch`.

    python bench/bench_import.py [--reps 5]

Each command runs in a fresh interpreter, the three in turn, `--reps` rounds (after one untimed
round that warms the file cache); printed: the median wall time of each and its ratio to
`import torch` (targets: import trt_lower <= 1.3x, trt-lower info <= 1.5x). The artifact is a small
MLP lowered on ONNX Runtime and saved here first. Also printed: whether torch._dynamo,
torch.export's exporter, the converters or transformers were imported by each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import trt_lower  # noqa: E402

TARGETS = {"import trt_lower": 1.3, "trt-lower info": 1.5}
PROBE = (
    "; import sys; print(sorted(m for m in ('torch._dynamo', 'torch.export._trace', 'converters.ops', "
    "'transformers') if m in sys.modules))"
)


def _time(command: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return time.perf_counter() - start, done.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        artifact = Path(tmp) / "mlp.trtl"
        model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16)).eval()
        trt_lower.save(trt_lower.lower_to_trt(model, (torch.randn(2, 16),), backend="onnxruntime"), artifact)
        info = (
            "import sys; from trt_lower.cli import main; sys.argv = ['trt-lower', 'info', sys.argv[1]]; "
            "import contextlib, io\nwith contextlib.redirect_stdout(io.StringIO()): main(sys.argv[1:])\n"
        )
        commands = {
            "import torch": [sys.executable, "-c", "import torch" + PROBE],
            "import trt_lower": [sys.executable, "-c", "import trt_lower" + PROBE],
            "trt-lower info": [sys.executable, "-c", info + PROBE.removeprefix("; "), str(artifact)],
        }
        for command in commands.values():  # warm the file cache
            _time(command)
        times: dict[str, list[float]] = {name: [] for name in commands}
        loaded: dict[str, str] = {}
        for _ in range(args.reps):
            for name, command in commands.items():
                seconds, loaded[name] = _time(command)
                times[name].append(seconds)
    torch_s = statistics.median(times["import torch"])
    print(f"{args.reps} rounds, the three commands in turn, 1-min load average {os.getloadavg()[0]:.1f}")
    for name, ts in times.items():
        ratio = statistics.median(ts) / torch_s
        target = (
            f"  (target <= {TARGETS[name]}x: {'met' if ratio <= TARGETS[name] else 'MISSED'})"
            if name in TARGETS
            else ""
        )
        print(
            f"  {name:18s} {statistics.median(ts):6.2f} s  {ratio:5.2f}x import torch{target}  imported: {loaded[name]}"
        )


if __name__ == "__main__":
    main()
