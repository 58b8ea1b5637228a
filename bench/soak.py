"""Soak: many calls of lowered models (ONNX Runtime), resident memory sampled as they run.

    python bench/soak.py [--calls 20000] [--every 1000] [--warmup 2000] [--models resnet18,bert]
                         [--image 64] [--bound-mb 5] [--json out.json]

For each model: lower it (backend="onnxruntime"), call it `--calls` times under
torch.inference_mode on a rotating pool of inputs, and sample the process's RSS (psutil) every
`--every` calls. Growth is measured from the sample taken at `--warmup` calls (allocator pools,
ONNX Runtime's arena and torch's caches fill up first) to the largest sample after it; the
model passes when that growth is at most `--bound-mb`. Also printed: the least-squares slope of the
samples after warm-up, in MB per 1,000 calls (a leak shows as a steady slope, noise does not).
Models: torchvision ResNet-18 (random weights, 1x3xIMAGExIMAGE) and a small-config BERT
(hidden 64, 2 layers, ids (2, 16)), each one engine. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
import psutil
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import trt_lower  # noqa: E402

Example = tuple[torch.nn.Module, list[tuple[torch.Tensor, ...]]]
MB = 1 << 20
POOL = 4  # distinct inputs cycled through: fresh data without allocating per call


def resnet18(image: int) -> Example:
    import torchvision

    model = torchvision.models.resnet18(weights=None).eval()
    return model, [(torch.randn(1, 3, image, image),) for _ in range(POOL)]


def bert(image: int) -> Example:
    import transformers

    config = transformers.BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=500
    )
    # Typed as nn.Module: transformers' eval() override is unannotated.
    model: torch.nn.Module = transformers.BertModel(config)
    return model.eval(), [(torch.randint(0, config.vocab_size, (2, 16)),) for _ in range(POOL)]


MODELS: dict[str, Callable[[int], Example]] = {"resnet18": resnet18, "bert": bert}


@dataclass
class SoakResult:
    model: str
    calls: int
    every: int
    warmup: int
    rss_mb: list[float]  # sample k is taken after k * every calls (sample 0: before the first)
    growth_mb: float  # max sample after warm-up minus the sample at warm-up
    slope_mb_per_1000: float  # least-squares slope of the samples after warm-up
    bound_mb: float

    @property
    def passed(self) -> bool:
        return self.growth_mb <= self.bound_mb


def soak(
    name: str,
    lowered: torch.nn.Module,
    inputs: list[tuple[torch.Tensor, ...]],
    *,
    calls: int,
    every: int,
    warmup: int,
    bound_mb: float,
) -> SoakResult:
    """Call `lowered` `calls` times cycling through `inputs`, sampling RSS every `every` calls."""
    process = psutil.Process()
    samples = [process.memory_info().rss / MB]
    with torch.inference_mode():
        for i in range(1, calls + 1):
            lowered(*inputs[i % len(inputs)])
            if i % every == 0:
                samples.append(process.memory_info().rss / MB)
    start = warmup // every
    after = samples[start:]
    slope = float(np.polyfit(np.arange(len(after)) * every / 1000, after, 1)[0]) if len(after) > 1 else 0.0
    return SoakResult(
        name,
        calls,
        every,
        warmup,
        [round(s, 2) for s in samples],
        round(max(after) - after[0], 2),
        round(slope, 3),
        bound_mb,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--every", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=2000, help="calls before the growth baseline")
    parser.add_argument("--models", default="resnet18,bert")
    parser.add_argument("--image", type=int, default=64, help="ResNet-18 input height and width")
    parser.add_argument("--bound-mb", type=float, default=5.0)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    if args.warmup % args.every or args.warmup >= args.calls:
        parser.error("--warmup must be a multiple of --every and below --calls")

    torch.manual_seed(0)
    results = []
    for name in args.models.split(","):
        model, inputs = MODELS[name](args.image)
        lowered = trt_lower.lower_to_trt(model, inputs[0], backend="onnxruntime")
        with torch.inference_mode():
            torch.testing.assert_close(lowered(*inputs[0]), model(*inputs[0]), rtol=1e-3, atol=1e-3)
        result = soak(
            name, lowered, inputs, calls=args.calls, every=args.every, warmup=args.warmup, bound_mb=args.bound_mb
        )
        results.append(result)
        print(
            f"{name}: {result.calls} calls, RSS {result.rss_mb[0]:.1f} -> {result.rss_mb[-1]:.1f} MB; "
            f"growth after {result.warmup} calls {result.growth_mb:+.2f} MB (bound {result.bound_mb} MB), "
            f"slope {result.slope_mb_per_1000:+.3f} MB/1000 calls: {'PASS' if result.passed else 'FAIL'}"
        )
        print(f"  samples every {result.every} calls (MB): {result.rss_mb}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) | {"passed": r.passed} for r in results], f, indent=1)
    sys.exit(0 if all(r.passed for r in results) else 1)


if __name__ == "__main__":
    main()
