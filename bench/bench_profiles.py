"""One wide optimization profile vs bucketed profiles, for a served model whose calls come in two
batch buckets (1-4 and 16-64).

    python bench/bench_profiles.py [--rounds 5] [--calls 40]

Both variants are the same MLP lowered over batch 1..64: "wide" with one profile (opt 32),
"buckets" with `profiles=` 1..4 (opt 2) and 16..64 (opt 32).

- TensorRT double: what each call's engine was tuned for. TensorRT times each layer's tactics at
  its profile's opt shape; the double records, per enqueue, the active profile and the distance
  from the call's shapes to that profile's opt (the sum of |size - opt| over the input dims). The
  same call mix runs on both variants; per bucket, the mean distance. No time is measured: the
  double computes on the CPU with ONNX Runtime, whatever the profile.
- ONNX Runtime (CPU): per bucket, the median call time of each variant, in alternating blocks
  over `--rounds` rounds. One session serves every profile there, so the ratio shows what the
  profile choice (and its refusal check) costs per call, not a tuning gain.
ratio = buckets / wide (< 1: the buckets are nearer their opt, or faster). See bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

from trt_double.activate import trt_double  # noqa: E402

import trt_lower  # noqa: E402

WIDE = trt_lower.TensorSpec((1, 256), (32, 256), (64, 256))
BUCKETS = [trt_lower.TensorSpec((1, 256), (2, 256), (4, 256)), trt_lower.TensorSpec((16, 256), (32, 256), (64, 256))]
CALLS = {"small (1-4)": [1, 2, 3, 4], "large (16-64)": [16, 24, 32, 48, 64]}


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).eval()


def _lower(backend: str, bucketed: bool) -> trt_lower.LoweredModule:
    profiles = BUCKETS if bucketed else None
    return trt_lower.lower_to_trt(_model(), WIDE, profiles=profiles, backend=backend, verify=False)


def double_distances() -> dict[str, dict[str, float]]:
    """Per variant and bucket: the mean distance from a call's shapes to its profile's opt."""
    found: dict[str, dict[str, float]] = {}
    for variant, bucketed in (("wide", False), ("buckets", True)):
        with tempfile.TemporaryDirectory() as cache, trt_double("10.13.0", Path(cache) / "engines") as double:
            lowered = _lower("tensorrt", bucketed)
            found[variant] = {}
            with torch.no_grad():
                for bucket, batches in CALLS.items():
                    double.state.tuned.clear()
                    for batch in batches:
                        lowered(torch.randn(batch, 256))
                    found[variant][bucket] = statistics.mean(d for _, d in double.state.tuned)
    return found


def ort_times(rounds: int, calls: int) -> dict[str, dict[str, float]]:
    """Per variant and bucket: the median ms per call on ONNX Runtime, variants alternating."""
    lowered = {"wide": _lower("onnxruntime", False), "buckets": _lower("onnxruntime", True)}
    samples: dict[str, dict[str, list[float]]] = {v: {b: [] for b in CALLS} for v in lowered}
    inputs = {b: [torch.randn(n, 256) for n in batches] for b, batches in CALLS.items()}
    with torch.inference_mode():
        for k in range(rounds):
            order = list(lowered) if k % 2 == 0 else list(reversed(lowered))
            for variant in order:
                for bucket, xs in inputs.items():
                    for x in xs:
                        lowered[variant](x)  # warm
                    for _ in range(calls):
                        for x in xs:
                            start = time.perf_counter()
                            lowered[variant](x)
                            samples[variant][bucket].append(time.perf_counter() - start)
    return {v: {b: statistics.median(t) * 1e3 for b, t in per.items()} for v, per in samples.items()}


def _table(title: str, unit: str, found: dict[str, dict[str, float]]) -> None:
    print(f"\n{title}\n| bucket | wide ({unit}) | buckets ({unit}) | ratio buckets / wide |\n|---|---|---|---|")
    for bucket in CALLS:
        wide, buckets = found["wide"][bucket], found["buckets"][bucket]
        ratio = buckets / wide if wide else float("nan")
        print(f"| {bucket} | {wide:.3g} | {buckets:.3g} | {ratio:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    torch.set_num_threads(1)
    _table("TensorRT double: mean distance from a call's shapes to its profile's opt", "sizes", double_distances())
    _table(
        "ONNX Runtime (CPU): median time per call over the bucket's batch sizes",
        "ms",
        ort_times(args.rounds, args.calls),
    )


if __name__ == "__main__":
    main()
