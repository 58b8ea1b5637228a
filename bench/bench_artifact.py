"""trt_lower.load vs lower_to_trt, and the artifact's size vs the model's state_dict (CPU, ONNX Runtime).

    python bench/bench_artifact.py [--models resnet50 bert_small] [--reps 3] [--json out.json]

For each model, in one run: lower once and save; then `--reps` adjacent pairs of (lower_to_trt,
trt_lower.load) in alternating order, after one untimed warm-up of each. The ratio load / lowering
is taken per pair; its median is checked against the target (<= 0.15), and so is a fresh process's
first load (imports done before timing: what the first load costs beyond them, such as tables
built on first use). Sizes: the file's bytes
against the bytes of the model's state_dict tensors (target <= 1.1 for fp32). Outputs of the
loaded module are checked against eager. Imports are done before timing (both sides need them).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, TypedDict

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import trt_lower  # noqa: E402
from trt_lower.benchmarking import models as demo_models  # noqa: E402

TARGETS = {"load_vs_lowering": 0.15, "file_vs_state_dict": 1.1}
Example = tuple[torch.nn.Module, tuple[torch.Tensor, ...]]


class Measurement(TypedDict):
    """One model's row of the results (and of --json)."""

    model: str
    pairs: list[dict[str, float]]
    lower_s_median: float
    load_s_median: float
    load_vs_lowering: float
    file_bytes: int
    state_dict_bytes: int
    file_vs_state_dict: float
    max_abs_diff_vs_eager: float
    first_load_s: float
    first_load_vs_lowering: float


def bert_small() -> Example:
    """BERT's architecture at a small size: hidden 256, 4 layers, 4 heads, full vocabulary."""
    from transformers import BertConfig, BertModel

    config = BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024)
    # Typed as nn.Module: transformers' eval() override is unannotated.
    model: torch.nn.Module = BertModel(config)
    return model.eval(), (torch.randint(0, config.vocab_size, (1, 128)),)


class SmallEager(torch.nn.Module):
    """A small model with one eager op (erfinv: no converter, no decomposition) between engines."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.lin = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.lin(torch.erfinv(torch.tanh(self.conv(x)) * 0.5))
        return out


MODELS: dict[str, Callable[[], Example]] = {
    "resnet50": lambda: demo_models.build("resnet50", 1),
    "bert_small": bert_small,
    "small_eager": lambda: (SmallEager().eval(), (torch.randn(1, 3, 16, 16),)),
}
# A fresh process's first load, after the imports both sides need.
FIRST_LOAD = """
import sys, time
import torch, trt_lower, transformers, onnxruntime
import trt_lower.deploy.artifact
start = time.perf_counter()
trt_lower.load(sys.argv[1], backend="onnxruntime")
print(time.perf_counter() - start)
"""


def first_load(path: Path) -> float:
    """The median seconds of a fresh process's first load of `path`, of 3 processes."""
    runs = [
        subprocess.run([sys.executable, "-c", FIRST_LOAD, str(path)], capture_output=True, text=True, check=True)
        for _ in range(3)
    ]
    return statistics.median(float(r.stdout.split()[-1]) for r in runs)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(name: str, reps: int, workdir: Path) -> Measurement:
    torch.manual_seed(0)
    model, inputs = MODELS[name]()
    path = workdir / f"{name}.trtl"
    lower: Callable[[], trt_lower.LoweredModule] = lambda: trt_lower.lower_to_trt(  # noqa: E731
        model, inputs, backend="onnxruntime"
    )
    load: Callable[[], trt_lower.LoweredModule] = lambda: trt_lower.load(path, backend="onnxruntime")  # noqa: E731
    trt_lower.save(lower(), path)
    load()  # warm-up of both
    pairs: list[dict[str, float]] = []
    for rep in range(reps):
        first, second = (lower, load) if rep % 2 == 0 else (load, lower)
        a, b = timed(first), timed(second)
        lowering, loading = (a, b) if first is lower else (b, a)
        pairs.append({"lower_s": lowering, "load_s": loading, "ratio": loading / lowering})
    loaded = load()
    with torch.no_grad():
        diff = max(
            (a - b).abs().max().item()
            for a, b in zip(
                torch.utils._pytree.tree_leaves(loaded(*inputs)), torch.utils._pytree.tree_leaves(model(*inputs))
            )
        )
    state_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    lower_s = statistics.median(p["lower_s"] for p in pairs)
    first_s = first_load(path)
    file_bytes = path.stat().st_size
    return {
        "model": name,
        "pairs": pairs,
        "lower_s_median": lower_s,
        "load_s_median": statistics.median(p["load_s"] for p in pairs),
        "load_vs_lowering": statistics.median(p["ratio"] for p in pairs),
        "file_bytes": file_bytes,
        "state_dict_bytes": state_bytes,
        "file_vs_state_dict": file_bytes / state_bytes,
        "max_abs_diff_vs_eager": diff,
        "first_load_s": first_s,
        "first_load_vs_lowering": first_s / lower_s,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", help="write every number to this file")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f}")
    results: list[Measurement] = []
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.models:
            r = measure(name, args.reps, Path(workdir))
            results.append(r)
            ok_time = max(r["load_vs_lowering"], r["first_load_vs_lowering"]) <= TARGETS["load_vs_lowering"]
            ok_size = r["file_vs_state_dict"] <= TARGETS["file_vs_state_dict"]
            print(
                f"{name}: lower_to_trt {r['lower_s_median']:.2f} s, load {r['load_s_median']:.2f} s, "
                f"load/lowering {r['load_vs_lowering']:.3f}, fresh process's first load {r['first_load_s']:.3f} s = "
                f"{r['first_load_vs_lowering']:.3f} (target <= {TARGETS['load_vs_lowering']}: "
                f"{'PASS' if ok_time else 'FAIL'}); file {r['file_bytes'] / 2**20:.1f} MiB vs state_dict "
                f"{r['state_dict_bytes'] / 2**20:.1f} MiB = {r['file_vs_state_dict']:.3f}x (target <= "
                f"{TARGETS['file_vs_state_dict']}: {'PASS' if ok_size else 'FAIL'}); "
                f"max |diff| vs eager {r['max_abs_diff_vs_eager']:.1e}",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"targets": TARGETS, "results": results, "load_average": os.getloadavg()}, indent=1)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
