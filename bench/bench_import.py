"""What a deployment pays to start: `import trt_lower` and the `trt-lower` commands against `import torch`.

    python bench/bench_import.py [--reps 5]

Each command runs in a fresh interpreter, all in turn, `--reps` rounds (after one untimed round
that warms the file cache); printed: the median wall time of each and its ratio to `import torch`
(targets: import trt_lower <= 1.3x, trt-lower info <= 1.5x). The commands: `import trt_lower`
installed and from a source tree (no `torch_dynamo_backends` entry point), `trt-lower --help`,
`lower --help` (a command's options), `--version`, `keygen` and `info FILE` (a small MLP lowered on ONNX Runtime and saved here first),
each called as the console script calls it. Also printed: which of torch, onnx, onnxruntime,
torch._dynamo, torch.export's exporter, the converters or transformers each imported.
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
    "; import sys; print(sorted(m for m in ('torch', 'onnx', 'onnxruntime', 'torch._dynamo', 'torch.export._trace', "
    "'converters.ops', 'transformers') if m in sys.modules))"
)
# A source tree on sys.path has no package metadata: no `torch_dynamo_backends` entry point.
SOURCE_TREE = (
    "import importlib.metadata as m; found = m.entry_points; "
    "m.entry_points = lambda **kw: m.EntryPoints(()) if kw.get('group') == 'torch_dynamo_backends' else found(**kw); "
)


def _cli(argv: str) -> str:
    """`trt-lower ARGV` as the console script runs it (its output swallowed; --help and --version exit)."""
    return (
        "import contextlib, io\nfrom trt_lower.cli import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit): main({argv})\n"
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
        keys = Path(tmp) / "keys"
        keys.mkdir()
        keygen = "import tempfile; " + _cli(f"['keygen', tempfile.mkdtemp(dir={str(keys)!r}) + '/k']")
        commands = {
            "import torch": [sys.executable, "-c", "import torch" + PROBE],
            "import trt_lower": [sys.executable, "-c", "import trt_lower" + PROBE],
            "import (source tree)": [sys.executable, "-c", SOURCE_TREE + "import trt_lower" + PROBE],
            "trt-lower --help": [sys.executable, "-c", _cli("['--help']") + PROBE.removeprefix("; ")],
            "trt-lower lower --help": [sys.executable, "-c", _cli("['lower', '--help']") + PROBE.removeprefix("; ")],
            "trt-lower --version": [sys.executable, "-c", _cli("['--version']") + PROBE.removeprefix("; ")],
            "trt-lower keygen": [sys.executable, "-c", keygen + PROBE.removeprefix("; ")],
            "trt-lower info": [sys.executable, "-c", _cli(f"['info', {str(artifact)!r}]") + PROBE.removeprefix("; ")],
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
    print(f"{args.reps} rounds, the commands in turn, 1-min load average {os.getloadavg()[0]:.1f}")
    for name, ts in times.items():
        ratio = statistics.median(ts) / torch_s
        target = (
            f"  (target <= {TARGETS[name]}x: {'met' if ratio <= TARGETS[name] else 'MISSED'})"
            if name in TARGETS
            else ""
        )
        print(
            f"  {name:22s} {statistics.median(ts):6.2f} s  {ratio:5.2f}x import torch{target}  imported: {loaded[name]}"
        )


if __name__ == "__main__":
    main()
