"""Shared by the reliability tests, and run as a fresh process by them (with tests/ and
tests/trt_double on PYTHONPATH, so `tensorrt` is the TensorRT double):

    python reliability_workers.py threads            # 8 threads hammer one TensorRT-lowered module
    python reliability_workers.py cache GO_FILE      # lower `Mixed` on TensorRT once GO_FILE exists

Each prints one JSON line as its last line of output.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

import trt_lower
from trt_lower.values import device

TESTS = Path(__file__).resolve().parent
THREADS = 8
# Batch and image size vary per call, within this range.
SPEC = trt_lower.TensorSpec(min_shape=(1, 3, 8, 8), opt_shape=(4, 3, 16, 16), max_shape=(8, 3, 32, 32))
SHAPES = [(b, 3, s, s) for b, s in ((1, 8), (3, 16), (8, 32), (5, 24), (2, 12), (7, 8), (4, 30), (6, 17))]


class Mixed(torch.nn.Module):
    """conv -> relu (kept eager with fallback_ops) -> mean -> linear -> softmax: two engines with
    eager code between them, so the stitched graph runs concurrently too."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.lin = torch.nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x) * 2.0)
        return torch.softmax(self.lin(y.mean(dim=(2, 3))), dim=-1)


def mixed() -> tuple[torch.nn.Module, list[torch.Tensor]]:
    """The model (fixed weights: every process builds the same engines) and one input per shape."""
    torch.manual_seed(0)
    return Mixed().eval(), [torch.randn(shape) for shape in SHAPES]


def lower_mixed(model: torch.nn.Module, backend: str, example: torch.Tensor | None = None) -> trt_lower.LoweredModule:
    """Lowered for the whole SPEC range, or for `example`'s shape only (a quicker capture)."""
    return trt_lower.lower_to_trt(
        model,
        (SPEC if example is None else example,),
        backend=backend,
        min_block_size=1,
        fallback_ops=["aten.relu.default"],
    )


def lower_static_and_check(backend: str) -> trt_lower.LoweredModule:
    """`Mixed` lowered for one input shape, compared with eager on that input."""
    model, inputs = mixed()
    lowered = lower_mixed(model, backend, inputs[2])
    with torch.inference_mode():
        torch.testing.assert_close(lowered(inputs[2]), model(inputs[2]), rtol=1e-4, atol=1e-5)
    return lowered


def hammer(lowered: torch.nn.Module, inputs: list[torch.Tensor], rounds: int = 6) -> tuple[int, list[str]]:
    """Call `lowered` from THREADS threads at once, each cycling through every input from its own
    starting point `rounds` times; compare every result with a serial call's. Returns the number of
    calls and a line per mismatch (or error)."""
    with torch.inference_mode():
        serial = [lowered(x) for x in inputs]
    start = threading.Barrier(THREADS)

    def worker(k: int) -> list[str]:
        start.wait()
        problems = []
        for i in range(rounds * len(inputs)):
            j = (i + k) % len(inputs)
            try:
                with torch.inference_mode():
                    got = lowered(inputs[j])
                torch.testing.assert_close(got, serial[j], rtol=1e-6, atol=1e-6)
            except Exception as e:  # every failure is reported, not just the first
                problems.append(
                    f"thread {k}, call {i}, shape {tuple(inputs[j].shape)}: {type(e).__name__}: "
                    f"{str(e).splitlines()[0]}"
                )
        return problems

    with ThreadPoolExecutor(THREADS) as pool:
        problems = [p for ps in pool.map(worker, range(THREADS)) for p in ps]
    return THREADS * rounds * len(inputs), problems


def worker(*args: str) -> list[str]:
    """The command line that runs this file as a worker."""
    return [sys.executable, str(TESTS / "reliability_workers.py"), *args]


def worker_env(cache_dir: Path) -> dict[str, str]:
    """A worker's environment: `tensorrt` is the double, engines are cached in `cache_dir`."""
    from trt_double import PATH as DOUBLE_PATH

    path = [str(DOUBLE_PATH), str(TESTS), str(TESTS.parent), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), "TRT_LOWER_CACHE_DIR": str(cache_dir)}


def _widen_the_window(double: Any) -> None:
    """Let other threads run between a context's bindings and its execution, as a GPU's
    asynchronous enqueue would: a context shared unguarded between threads then shows it."""
    execute = double.IExecutionContext.execute_async_v3

    def slow(self: Any, stream_handle: int) -> bool:
        time.sleep(0.001)
        return bool(execute(self, stream_handle))

    double.IExecutionContext.execute_async_v3 = slow


def threads_main() -> dict[str, Any]:
    import tensorrt

    _widen_the_window(tensorrt)
    model, inputs = mixed()
    lowered = lower_mixed(model, "tensorrt")
    with torch.inference_mode():
        for x in inputs:
            torch.testing.assert_close(lowered(x), model(x), rtol=1e-4, atol=1e-5)
    calls, problems = hammer(lowered, inputs)
    return {
        "engines": len(lowered.report.engines),
        "calls": calls,
        "problems": problems[:10],
        "mismatches": len(problems),
    }


def cache_main(go: Path) -> dict[str, Any]:
    import tensorrt

    build = tensorrt.Builder.build_serialized_network

    def slow_build(self: Any, *args: Any) -> Any:
        time.sleep(0.5)  # a real build takes minutes: let the other processes arrive meanwhile
        return build(self, *args)

    tensorrt.Builder.build_serialized_network = slow_build
    (go.parent / f"ready-{os.getpid()}").touch()
    while not go.exists():  # every process starts lowering at the same moment
        time.sleep(0.01)
    lowered = lower_static_and_check("tensorrt")
    return {"hits": [e.cache_hit for e in lowered.report.engines], "builds": tensorrt.state.builds}


if __name__ == "__main__":
    import logging

    from trt_double.device import HostDevice

    logging.basicConfig(level=logging.WARNING)
    with device.using(HostDevice()):
        result = threads_main() if sys.argv[1] == "threads" else cache_main(Path(sys.argv[2]))
    print(json.dumps(result))
