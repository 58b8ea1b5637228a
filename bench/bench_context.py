"""Execution context per (thread, stream) against one context behind a lock, through the TensorRT
double (host-side cost only: the double runs on the CPU, so device memory per context is not
measured).

    python bench/bench_context.py [--blocks 21] [--calls 100] [--threads 4] [--json out.json]

A small lowered TensorRT engine (a 3x3 convolution, relu and an add on a 2x3x8x8 input) is
called by `--threads` threads at once and by one thread, in two ways: as the runtime does it (a
context per (thread, stream), looked up per call) and with one shared context behind a lock
around the call (monkeypatched for the comparison). The four run in alternating blocks (the order
rotates per block, so load drifts reach all of them); per-call time = a block's wall time over
the calls all its threads made; the figures are medians over blocks with their spread (min..max)
and the lock's median as a ratio of the context table's. Each block also times the two mechanisms
alone (the table lookup against an uncontended lock). See bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, cast

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

from trt_double.activate import trt_double  # noqa: E402

import trt_lower  # noqa: E402

if TYPE_CHECKING:  # imports tensorrt: at run time, only once the double is active
    from trt_lower.runtime.trt_module import TRTEngineModule


class ConvHead(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x)) + 1.0


@contextlib.contextmanager
def one_locked_context() -> Iterator[None]:
    """Every TRTEngineModule uses one binding (one context) per module, and its calls hold a lock."""
    from trt_lower.runtime import trt_module

    cls = trt_module.TRTEngineModule
    real_binding, real_run = cls._binding, cls.run
    lock, shared = threading.Lock(), {}

    def binding(self: Any, stream: int, profile: int) -> Any:
        if self not in shared:
            shared[self] = real_binding(self, stream, profile)
        return shared[self]

    def run(self: Any, tensors: Any) -> Any:
        with lock:
            return real_run(self, tensors)

    cls._binding, cls.run = binding, run  # type: ignore[method-assign]
    try:
        yield
    finally:
        cls._binding, cls.run = real_binding, real_run  # type: ignore[method-assign]


def block(lowered: torch.nn.Module, x: torch.Tensor, expected: torch.Tensor, threads: int, calls: int) -> float:
    """Seconds per call: wall time of `threads` threads making `calls` calls each (each thread's
    last result is checked, so that a variant that mixed up buffers cannot look fast)."""
    start = threading.Barrier(threads + 1)
    wrong: list[int] = []

    def work() -> None:
        start.wait()
        for _ in range(calls):
            out = lowered(x)
        if not torch.allclose(out, expected, rtol=1e-4, atol=1e-5):
            wrong.append(1)

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in pool:
        t.join()
    assert not wrong, f"{len(wrong)} of {threads} threads got a wrong result"
    return (time.perf_counter() - t0) / (threads * calls)


def mechanism(lowered: torch.nn.Module, repeats: int = 20000) -> dict[str, float]:
    """Seconds per call of each mechanism alone, one thread: the runtime's (thread, stream) table
    lookup against an uncontended lock's acquire and release."""
    engine, lock = cast("TRTEngineModule", lowered.engine_0), threading.Lock()  # the one (TensorRT) engine
    engine._binding(1, 0)  # the thread's entry exists, as on every call after the first

    def lookup() -> None:
        for _ in range(repeats):
            engine._binding(1, 0)

    def locked() -> None:
        for _ in range(repeats):
            with lock:
                pass

    out = {}
    for name, fn in (("lookup", lookup), ("lock", locked)):
        t0 = time.perf_counter()
        fn()
        out[name] = (time.perf_counter() - t0) / repeats
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=21)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.set_num_threads(1)  # the engine is the double's ONNX Runtime session; keep torch out of it

    with tempfile.TemporaryDirectory() as cache, trt_double("10.13.0", Path(cache) / "engines"), torch.no_grad():
        x = torch.randn(2, 3, 8, 8)
        model = ConvHead().eval()
        lowered = trt_lower.lower_to_trt(model, (x,), backend="tensorrt")
        assert len(lowered.report.engines) == 1
        expected = model(x)
        torch.testing.assert_close(lowered(x), expected)
        variants = [(mode, n) for n in (1, args.threads) for mode in ("context", "lock")]
        times: dict[tuple[str, int], list[float]] = {v: [] for v in variants}
        alone: dict[str, list[float]] = {"lookup": [], "lock": []}
        for b in range(args.blocks + 1):  # block 0 warms every variant up (contexts created)
            order = variants[b % len(variants) :] + variants[: b % len(variants)]
            for mode, n in order:
                with one_locked_context() if mode == "lock" else contextlib.nullcontext():
                    seconds = block(lowered, x, expected, n, args.calls)
                if b:
                    times[(mode, n)].append(seconds)
            for name, seconds in mechanism(lowered).items():
                alone[name].append(seconds)

    rows = {}
    print(f"{'variant':<22}{'median µs/call':>16}{'spread':>20}")
    for (mode, n), ts in times.items():
        med = statistics.median(ts) * 1e6
        rows[f"{mode}/{n}"] = {"median_us": med, "min_us": min(ts) * 1e6, "max_us": max(ts) * 1e6}
        print(f"{mode + f', {n} thread(s)':<22}{med:>16.1f}{f'{min(ts) * 1e6:.1f}..{max(ts) * 1e6:.1f}':>20}")
    for n in (1, args.threads):
        ratio = rows[f"lock/{n}"]["median_us"] / rows[f"context/{n}"]["median_us"]
        rows[f"ratio/{n}"] = {"lock_over_context": ratio}
        print(f"lock / context, {n} thread(s): {ratio:.2f}x")
    for name, ts in alone.items():
        med = statistics.median(ts) * 1e6
        rows[f"alone/{name}"] = {"median_us": med, "min_us": min(ts) * 1e6, "max_us": max(ts) * 1e6}
        print(f"{name} alone: {med:.3f} µs ({min(ts) * 1e6:.3f}..{max(ts) * 1e6:.3f})")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
