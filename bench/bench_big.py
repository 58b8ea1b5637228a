"""Big models: lowering, saving and loading a multi-GB transformer, memory as a multiple of its weights.

    python bench/bench_big.py [--models llama_0.6b llama_1.5b] [--backend onnxruntime] [--out DIR]

Each model is a transformers LlamaForCausalLM built from a config (random weights, float32), input
ids 1x32. Every phase runs in a process of its own, so that each peak RSS is that phase's:
  lower  build the model, lower_to_trt, check against eager (the peak counts the model the user
         holds); per stage (capture, split, convert, build, stitch) the peak RSS while it ran,
         from a sampling thread placed against report.timings
  save   build the model, lower, trt_lower.save (peak of the whole process, and the file's size)
  load   trt_lower.load in a fresh process, run, compare with the eager outputs the lower phase
         wrote (no model in that process: what a server holds)
Peaks are printed as a multiple of the weights' bytes (the acceptance targets: lowering <= 2.0x,
loading <= 1.3x).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import torch

CONFIGS: dict[str, dict[str, Any]] = {
    # 0.60 B parameters, 2.24 GiB in float32.
    "llama_0.6b": dict(
        hidden_size=1536,
        num_hidden_layers=20,
        num_attention_heads=12,
        num_key_value_heads=4,
        intermediate_size=4096,
        vocab_size=32000,
    ),
    # 1.5 B parameters, 5.6 GiB: the largest for which 2x its weights leaves this 24 GiB machine room.
    "llama_1.5b": dict(
        hidden_size=2048,
        num_hidden_layers=30,
        num_attention_heads=16,
        num_key_value_heads=8,
        intermediate_size=5632,
        vocab_size=32000,
    ),
    # For a quick look at the multiples (0.06 B).
    "llama_tiny": dict(
        hidden_size=512,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        intermediate_size=1376,
        vocab_size=32000,
    ),
}
STAGES = ("capture", "split", "convert", "build", "stitch")


class Sampler:
    """The process's RSS every few milliseconds, in a thread."""

    def __init__(self, every_s: float = 0.005) -> None:
        self.samples: list[tuple[float, int]] = []
        self._proc = psutil.Process()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every_s,), daemon=True)
        self._thread.start()

    def _run(self, every_s: float) -> None:
        while not self._stop.is_set():
            self.samples.append((time.perf_counter(), self._proc.memory_info().rss))
            time.sleep(every_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def peak(self, start: float = 0.0, end: float = float("inf")) -> int:
        """The highest RSS sampled between start and end; for a stage shorter than the sampling
        interval, the last sample before its end."""
        inside = [rss for t, rss in self.samples if start <= t <= end]
        before = [rss for t, rss in self.samples if t <= end][-1:]
        return max(inside or before or [0])


def _model(name: str) -> tuple[torch.nn.Module, torch.Tensor, int]:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(**CONFIGS[name], max_position_embeddings=256, tie_word_embeddings=False, use_cache=False)
    model: torch.nn.Module = LlamaForCausalLM(config)
    model.eval()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    ids = torch.randint(0, config.vocab_size, (1, 32))
    return model, ids, weights


def _peak_rss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _latency_ms(fn: Any, ids: torch.Tensor, calls: int = 5) -> float:
    with torch.no_grad():
        fn(ids)
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            fn(ids)
            times.append(time.perf_counter() - start)
    return 1e3 * sorted(times)[len(times) // 2]


def phase_lower(name: str, backend: str, out: Path) -> dict[str, Any]:
    import trt_lower

    baseline = psutil.Process().memory_info().rss  # torch and transformers imported, no model yet
    model, ids, weights = _model(name)
    with torch.no_grad():
        expected = model(ids).logits
    torch.save({"ids": ids, "logits": expected}, out / "expected.pt")
    before = psutil.Process().memory_info().rss
    sampler = Sampler()
    start = time.perf_counter()
    lowered = trt_lower.lower_to_trt(model, (ids,), backend=backend)
    total = time.perf_counter() - start
    sampler.stop()
    stages, t = {}, start
    for stage in STAGES:
        end = t + lowered.report.timings[stage]
        stages[stage] = {"s": lowered.report.timings[stage], "peak_x": sampler.peak(t, end) / weights}
        t = end
    with torch.no_grad():
        got = lowered(ids).logits
    return {
        "weights_bytes": weights,
        "lower_s": total,
        "rss_before_x": before / weights,
        "eager_ms": _latency_ms(model, ids),
        "lowered_ms": _latency_ms(lowered, ids),
        "baseline_x": baseline / weights,
        "lower_peak_x": _peak_rss() / weights,
        "stages": stages,
        "engines": len(lowered.report.engines),
        "coverage": lowered.report.coverage,
        "max_abs_err": float((got - expected).abs().max()),
    }


def phase_save(name: str, backend: str, out: Path) -> dict[str, Any]:
    import trt_lower

    model, ids, weights = _model(name)
    lowered = trt_lower.lower_to_trt(model, (ids,), backend=backend)
    after_lowering = psutil.Process().memory_info().rss
    start = time.perf_counter()
    trt_lower.save(lowered, out / "model.trtl")
    return {
        "save_s": time.perf_counter() - start,
        "save_peak_x": _peak_rss() / weights,
        "rss_after_lowering_x": after_lowering / weights,
        "file_bytes": (out / "model.trtl").stat().st_size,
        "file_x": (out / "model.trtl").stat().st_size / weights,
    }


def phase_load(name: str, backend: str, out: Path) -> dict[str, Any]:
    import trt_lower

    weights = json.loads((out / "lower.json").read_text())["weights_bytes"]
    expected = torch.load(out / "expected.pt")
    start = time.perf_counter()
    loaded = trt_lower.load(out / "model.trtl", backend=backend)
    load_s = time.perf_counter() - start
    with torch.no_grad():
        got = loaded(expected["ids"]).logits
    return {
        "load_s": load_s,
        "load_peak_x": _peak_rss() / weights,
        "max_abs_err": float((got - expected["logits"]).abs().max()),
    }


def phase_trt_double(name: str, backend: str, out: Path) -> dict[str, Any]:
    """The TensorRT path on the CPU, against the TensorRT double of tests/ (10.13): the segment
    past 2 GB is parsed from its graph with the weights beside it. Not a memory figure (the
    double runs the ONNX on ONNX Runtime, copying it)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from trt_double.activate import trt_double

    import trt_lower

    model, ids, weights = _model(name)
    with torch.no_grad():
        expected = model(ids).logits
    with tempfile.TemporaryDirectory() as cache, trt_double("10.13.0", Path(cache) / "engines"):
        lowered = trt_lower.lower_to_trt(model, (ids,), backend="tensorrt")
        with torch.no_grad():
            got = lowered(ids).logits
    return {
        "engines": len(lowered.report.engines),
        "fallbacks": len(lowered.report.fallbacks),
        "segment_bytes": lowered.segments["engine_0"].onnx.weight_bytes if lowered.segments else 0,
        "max_abs_err": float((got - expected).abs().max()),
    }


PHASES = {"lower": phase_lower, "save": phase_save, "load": phase_load, "trt_double": phase_trt_double}


def run_phase(phase: str, name: str, backend: str, out: Path, copy_weights: bool) -> dict[str, Any]:
    """One phase in a fresh process; its result as JSON in out/<phase>.json."""
    command = [
        sys.executable,
        __file__,
        "--phase",
        phase,
        "--models",
        name,
        "--backend",
        backend,
        "--out",
        str(out),
        *(["--copy-weights"] if copy_weights else []),
    ]
    subprocess.run(command, check=True)
    result: dict[str, Any] = json.loads((out / f"{phase}.json").read_text())
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["llama_0.6b", "llama_1.5b"], choices=sorted(CONFIGS))
    parser.add_argument("--backend", default="onnxruntime")
    parser.add_argument("--out", type=Path, default=None, help="working directory (default: a temporary one)")
    parser.add_argument(
        "--copy-weights",
        action="store_true",
        help="ONNX Runtime sessions copy the weights (as for segments under 1 GiB) instead of reading them in place",
    )
    parser.add_argument(
        "--trt-double",
        action="store_true",
        help="also lower on the TensorRT double of tests/ (the TensorRT path on the CPU)",
    )
    parser.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)  # a child process's phase
    args = parser.parse_args()
    if args.copy_weights:
        from trt_lower.engine import ort_session

        ort_session.SHARE_WEIGHTS_MIN_BYTES = 1 << 62
    if args.phase:
        (args.out / f"{args.phase}.json").write_text(
            json.dumps(PHASES[args.phase](args.models[0], args.backend, args.out))
        )
        return
    for name in args.models:
        with tempfile.TemporaryDirectory() as tmp:
            out = args.out / name if args.out else Path(tmp)
            out.mkdir(parents=True, exist_ok=True)
            phases = ("lower", "save", "load", *(["trt_double"] if args.trt_double else []))
            results = {phase: run_phase(phase, name, args.backend, out, args.copy_weights) for phase in phases}
        lower, save, load = results["lower"], results["save"], results["load"]
        print(
            f"\n{name}: {lower['weights_bytes'] / 2**30:.2f} GiB of float32 weights, backend {args.backend}, "
            f"{lower['engines']} engine(s), coverage {lower['coverage']:.3f}"
        )
        print(
            f"  a call (1x32 ids, median of 5): eager {lower['eager_ms']:.0f} ms, lowered {lower['lowered_ms']:.0f} ms"
        )
        print(
            f"  lower  {lower['lower_s']:6.1f} s  peak {lower['lower_peak_x']:.2f}x weights "
            f"(before lowering, the model and its eager run: {lower['rss_before_x']:.2f}x; "
            f"torch and transformers alone: {lower['baseline_x']:.2f}x)  "
            f"max abs err vs eager {lower['max_abs_err']:.2g}"
        )
        for stage, s in lower["stages"].items():
            print(f"    {stage:8s} {s['s']:6.1f} s  peak {s['peak_x']:.2f}x")
        print(
            f"  save   {save['save_s']:6.1f} s  peak {save['save_peak_x']:.2f}x (lowering included)  "
            f"file {save['file_bytes'] / 2**30:.2f} GiB ({save['file_x']:.2f}x weights)"
        )
        print(
            f"  load   {load['load_s']:6.1f} s  peak {load['load_peak_x']:.2f}x in a fresh process  "
            f"max abs err vs eager {load['max_abs_err']:.2g}"
        )
        if "trt_double" in results:
            double = results["trt_double"]
            print(
                f"  TensorRT double 10.13: {double['engines']} engine(s) over {double['segment_bytes'] / 2**30:.2f} GiB "
                f"of weights, {double['fallbacks']} fallback(s), max abs err vs eager {double['max_abs_err']:.2g}"
            )


if __name__ == "__main__":
    main()
