"""update_weights against lowering again, and a weight-stripped artifact's size against the full one.

    python bench/bench_refit.py [--models resnet50 llama_small] [--backends onnxruntime tensorrt-double]
                                [--reps 2] [--json out.json]

Per model and backend: lower_to_trt once (timed, with its stages), then `--reps` updates with
fine-tuned copies, one after another (timed, each including its check against eager); the ratio
lowering / median update is printed, and the last update's outputs against its model's eager ones. "tensorrt-double" is the TensorRT
path on the TensorRT double of tests/ (10.13, engines built refittable): its "build" runs no
TensorRT optimizer, so its ratio is a floor of what a GPU shows (a real build takes seconds to
hours per engine, a refit about as long as copying the weights). Sizes (ONNX Runtime): the artifact
saved whole, and saved with weights="separate" (the code artifact and its weight file).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import trt_lower  # noqa: E402
from trt_lower.benchmarking import models as demo_models  # noqa: E402

Example = tuple[torch.nn.Module, tuple[torch.Tensor, ...]]


def llama_small() -> Example:
    """Llama's architecture, small: hidden 256, 4 layers, grouped-query attention, full vocabulary
    (tied embeddings), 1x32 ids."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=688,
        vocab_size=32000,
        use_cache=False,
        tie_word_embeddings=True,
    )
    model: torch.nn.Module = LlamaForCausalLM(config)
    return model.eval(), (torch.randint(0, config.vocab_size, (1, 32)),)


MODELS: dict[str, Callable[[], Example]] = {
    "resnet50": lambda: demo_models.build("resnet50", 1),
    "llama_small": llama_small,
}


def finetuned(model: torch.nn.Module) -> torch.nn.Module:
    new = copy.deepcopy(model)
    with torch.no_grad():
        for p in new.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    return new


def _first(out: Any) -> torch.Tensor:
    first = out if isinstance(out, torch.Tensor) else out["logits"] if isinstance(out, dict) else out[0]
    assert isinstance(first, torch.Tensor)
    return first


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def measure(name: str, backend: str, reps: int) -> dict[str, Any]:
    model, inputs = MODELS[name]()
    trt = backend == "tensorrt-double"
    options: dict[str, Any] = {"backend": "tensorrt", "refittable": True} if trt else {"backend": "onnxruntime"}
    lower_s, lowered = _timed(lambda: trt_lower.lower_to_trt(model, inputs, **options))
    updates = []
    for _ in range(reps):
        model = finetuned(model)
        updates.append(_timed(lambda: lowered.update_weights(model))[0])
    with torch.no_grad():
        error = float((_first(lowered(*inputs)) - _first(model(*inputs))).abs().max())
    row: dict[str, Any] = {
        "model": name,
        "backend": backend,
        "engines": len(lowered.segments),
        "lower_s": lower_s,
        "timings": lowered.report.timings,
        "update_s": updates,
        "update_s_median": statistics.median(updates),
        "lower_over_update": lower_s / statistics.median(updates),
        "max_abs_err_vs_eager": error,
    }
    if not trt:
        with tempfile.TemporaryDirectory() as tmp:
            trt_lower.save(lowered, Path(tmp) / "full.trtl")
            trt_lower.save(lowered, Path(tmp) / "code.trtl", weights="separate")
            row.update(
                full_bytes=(Path(tmp) / "full.trtl").stat().st_size,
                stripped_bytes=(Path(tmp) / "code.trtl").stat().st_size,
                weight_file_bytes=(Path(tmp) / "code.safetensors").stat().st_size,
            )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument(
        "--backends", nargs="+", default=["onnxruntime", "tensorrt-double"], choices=["onnxruntime", "tensorrt-double"]
    )
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for backend in args.backends:
        if backend == "tensorrt-double":
            from trt_double.activate import trt_double

            with tempfile.TemporaryDirectory() as cache, trt_double("10.13.0", Path(cache) / "engines"):
                rows += [measure(name, backend, args.reps) for name in args.models]
        else:
            rows += [measure(name, backend, args.reps) for name in args.models]
    for r in rows:
        sizes = (
            f", artifact {r['full_bytes'] / 2**20:.1f} MiB whole, {r['stripped_bytes'] / 2**10:.0f} KiB stripped "
            f"({r['stripped_bytes'] / r['full_bytes']:.2%}) + {r['weight_file_bytes'] / 2**20:.1f} MiB weights"
            if "full_bytes" in r
            else ""
        )
        print(
            f"{r['model']:12s} {r['backend']:16s} {r['engines']} engine(s): update {r['update_s_median']:.2f} s, "
            f"lowering {r['lower_s']:.2f} s ({r['lower_over_update']:.1f}x), max abs err vs eager "
            f"{r['max_abs_err_vs_eager']:.2g}{sizes}"
        )
    print(f"load average {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
