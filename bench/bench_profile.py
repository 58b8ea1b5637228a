"""How much of a lowered call `LoweredModule.profile` accounts for, and whether its top rows are
ONNX Runtime's own (ONNX Runtime backend, CPU).

    python bench/bench_profile.py [--models resnet50,bert] [--iterations 20] [--warmup 3]

For each model (torchvision's ResNet-50 at 1x3x224x224; a 2-layer BERT, hidden 768, 12 heads,
ids (1, 128); random weights): lower it, profile it, and print the table, the coverage (the
share of the measured call the rows account for; the rest is host glue), the share of rows that
name a source line in the model's package, and the top-5 layers against those of ONNX Runtime's
own profiler on a separate profiled session of the same engine (per-node medians over as many
runs). See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import torch
import torchvision
import transformers

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import trt_lower  # noqa: E402
from trt_lower.engine.ort_session import segment_session  # noqa: E402
from trt_lower.profile.ort_layers import run_times  # noqa: E402


def resnet50() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...], str]:
    return torchvision.models.resnet50().eval(), (torch.randn(1, 3, 224, 224),), "torchvision/"


def bert() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...], str]:
    config = transformers.BertConfig(num_hidden_layers=2)  # hidden 768, 12 heads
    model: torch.nn.Module = transformers.BertModel(config)
    return model.eval(), (torch.randint(0, config.vocab_size, (1, 128)),), "transformers/"


MODELS = {"resnet50": resnet50, "bert": bert}


def ort_medians(lowered: Any, inputs: tuple[torch.Tensor, ...], runs: int, warmup: int) -> dict[str, float]:
    """Each node's median seconds in ONNX Runtime's own profile of `runs` runs (after `warmup`)
    of a separate profiled session of the one engine."""
    (name,) = lowered.segments
    with tempfile.TemporaryDirectory() as tmp:
        session = segment_session(lowered.segments[name].onnx, profile_to=tmp)
        feeds = {i.name: t.numpy() for i, t in zip(session.get_inputs(), inputs)}
        for _ in range(warmup + runs):
            session.run(None, feeds)
        with open(session.end_profiling()) as file:
            times = run_times(json.load(file))[warmup:]
    return {node: statistics.median(t.get(node, 0.0) for t in times) for node in set().union(*times)}


def overlap(a: dict[str, float], b: dict[str, float]) -> float:
    """How alike two splits of time over the same layers are: the sum over layers of the smaller
    of the two shares (1: the same shares; 0: disjoint)."""
    total_a, total_b = sum(a.values()), sum(b.values())
    return sum(min(a.get(k, 0.0) / total_a, b.get(k, 0.0) / total_b) for k in a.keys() | b.keys())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet50,bert")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    for name in args.models.split(","):
        model, inputs, package = MODELS[name]()
        start = time.perf_counter()
        lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime")
        print(f"== {name}: lowered in {time.perf_counter() - start:.1f} s, {len(lowered.segments)} engine(s)")
        profile = lowered.profile(inputs, iterations=args.iterations, warmup=args.warmup)
        print(profile.table(top=10))
        named = sum(any(package in n.source for n in r.nodes) for r in profile.rows) / len(profile.rows)
        figures = f"coverage {profile.coverage:.1%} of {profile.call_seconds * 1e3:.2f} ms"
        print(f"{figures}; rows with a line in {package}: {named:.1%}")
        medians = ort_medians(lowered, inputs, args.iterations, args.warmup)
        ours, theirs = [r.name for r in profile.top(5)], sorted(medians, key=medians.__getitem__, reverse=True)[:5]
        print(f"top-5 layers: profile {ours}\n              ONNX Runtime {theirs}")
        shares = overlap({r.name: r.seconds for r in profile.rows}, medians)
        print(f"  top-5 in common: {len(set(ours) & set(theirs))}/5; split of time over layers alike: {shares:.1%}")


if __name__ == "__main__":
    main()
