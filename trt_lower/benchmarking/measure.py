"""trt_lower.benchmark: the lowered module against eager PyTorch (and torch.compile), as
trtexec summarizes an engine: throughput, latency percentiles, stability, and where one call
spends its time.

Variants run interleaved: each round runs a block of calls of every variant in turn (the order
rotating), so drift of the machine (clocks, other load) hits all variants alike.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import statistics
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, cast

import torch
import torch.utils._pytree as pytree

from trt_lower.benchmarking import machine
from trt_lower.benchmarking.breakdown import Part, breakdown
from trt_lower.benchmarking.timing import CallTime, cuda_time, host_time
from trt_lower.values.call import Inputs, model_call

VARIANTS = ("eager", "lowered", "compile")
PERCENTILES = (90, 95, 99)


class UnstableTimingWarning(UserWarning):
    """A run's coefficient of variation is above the threshold: its figures are not to be trusted."""


@dataclass(frozen=True)
class Latency:
    """Milliseconds per call."""

    min: float
    mean: float
    median: float
    p90: float
    p95: float
    p99: float
    max: float

    @classmethod
    def of(cls, ms: Sequence[float]) -> Latency:
        ordered = sorted(ms)
        # Nearest-rank percentiles, as trtexec reports them: always a measured value.
        p = {q: ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)] for q in PERCENTILES}
        return cls(ordered[0], statistics.fmean(ordered), statistics.median(ordered), p[90], p[95], p[99], ordered[-1])


@dataclass(frozen=True)
class Run:
    """One variant at one batch size."""

    variant: str
    batch_size: int
    iterations: int
    throughput: float  # samples per second: batch size × calls / their total wall time
    latency_ms: Latency  # host wall time per call (on CUDA: until its results are ready)
    cv: float  # coefficient of variation of the wall time: stdev / mean
    unstable: bool  # cv above the threshold
    speedup: float | None  # eager's median / this median (None without an eager run)
    gpu_ms: Latency | None  # CUDA only: GPU time between CUDA events around each call
    enqueue_ms: Latency | None  # CUDA only: host time until the call returned
    breakdown: list[Part] | None  # "lowered" only: where one call's time goes
    samples_ms: list[float] = field(repr=False)  # every call's wall time, in order


@dataclass
class BenchmarkResult:
    """What `benchmark` measured: one `Run` per variant and batch size (latency percentiles,
    throughput, speedup over eager, every call's time), the machine and the settings; `str()` is the
    summary table, `save_json` and `plot` write the rest."""

    runs: list[Run]
    machine: dict[str, Any]
    settings: dict[str, Any]

    def run(self, variant: str, batch_size: int) -> Run:
        return next(r for r in self.runs if r.variant == variant and r.batch_size == batch_size)

    def to_dict(self) -> dict[str, Any]:
        return {"machine": self.machine, "settings": self.settings, "runs": [dataclasses.asdict(r) for r in self.runs]}

    def save_json(self, path: str | os.PathLike[str]) -> Path:
        out = Path(path)
        out.write_text(json.dumps(self.to_dict(), indent=1))
        return out

    def plot(self, path: str | os.PathLike[str]) -> Path:
        """A PNG: latency distribution per variant and batch size, speedup over eager per batch size."""
        from trt_lower.benchmarking.plot import plot

        return plot(self, Path(path))

    def summary(self) -> str:
        from trt_lower.benchmarking.summary import summary

        return summary(self)

    def __str__(self) -> str:
        return self.summary()


def at_batch(inputs: Any, batch: int | None) -> Any:
    """`inputs` (any pytree: the arguments, or `(args, kwargs)`) with dim 0 of every tensor at a
    leaf resized to `batch`, cycling through its samples."""
    if batch is None:
        return inputs
    return pytree.tree_map_only(
        torch.Tensor, lambda t: t[torch.arange(batch, device=t.device) % t.shape[0]] if t.dim() else t, inputs
    )


def _batch_of(inputs: Any) -> int:
    return next((t.shape[0] for t in pytree.tree_leaves(inputs) if isinstance(t, torch.Tensor) and t.dim()), 1)


def _lowered_for(lowered: torch.nn.Module | Mapping[int, torch.nn.Module], batch: int) -> torch.nn.Module:
    if isinstance(lowered, Mapping):
        if batch not in lowered:
            raise ValueError(f"no lowered module for batch size {batch}: lowered has {sorted(lowered)}")
        return lowered[batch]
    return lowered


def _variants(
    model: torch.nn.Module | None,
    lowered: torch.nn.Module | Mapping[int, torch.nn.Module],
    compare: Sequence[str],
    batch: int,
) -> dict[str, Callable[..., object]]:
    unknown = [v for v in compare if v not in VARIANTS]
    if unknown or not compare or len(set(compare)) < len(compare):
        raise ValueError(f"compare must name some of {VARIANTS}, each once; got {list(compare)}")
    if model is None and ("eager" in compare or "compile" in compare):
        raise ValueError("compare names 'eager' or 'compile' but there is no model to run (model=None)")
    fns: dict[str, Callable[..., object]] = {}
    for v in compare:
        if v == "lowered":
            fns[v] = _lowered_for(lowered, batch)
        elif model is not None:
            fns[v] = model if v == "eager" else cast(Callable[..., object], torch.compile(model, dynamic=False))
    return fns


def _interleaved(
    fns: dict[str, Callable[[], object]],
    timer: Callable[[Callable[[], object]], CallTime],
    warmup: int,
    iterations: int,
    duration: float | None,
    block: int,
) -> dict[str, list[CallTime]]:
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[CallTime]] = {v: [] for v in fns}
    order = list(fns)
    start = time.perf_counter()
    while min(len(t) for t in times.values()) < iterations or (
        duration is not None and time.perf_counter() - start < duration * len(fns)
    ):
        for v in order:
            times[v] += [timer(fns[v]) for _ in range(block)]
        order = order[1:] + order[:1]
    return times


def benchmark(
    model: torch.nn.Module | None,
    lowered: torch.nn.Module | Mapping[int, torch.nn.Module],
    inputs: Inputs,
    *,
    kwargs: dict[str, Any] | None = None,
    warmup: int = 10,
    iterations: int = 100,
    duration: float | None = None,
    batch_sizes: Sequence[int] | None = None,
    compare: Sequence[str] = ("eager", "lowered"),
    block: int = 10,
    cv_threshold: float = 0.05,
    breakdown_calls: int = 5,
) -> BenchmarkResult:
    """Time `model` (eager), `lowered` and optionally torch.compile(model) on `f(*inputs, **kwargs)`
    (the arguments as lower_to_trt takes them: one tensor stands for `(x,)`).

    lowered: a module that accepts every batch size (lowered with a TensorSpec over dim 0), or
        {batch size: module lowered for it}.
    iterations: at least this many timed calls per variant and batch size (in blocks of `block`);
        duration: and at least this many seconds per variant.
    batch_sizes: resize dim 0 of each input tensor (in inputs and kwargs) to each size (cycling its
        samples); default: the inputs as given.
    compare: which of "eager" (model), "lowered" and "compile" (torch.compile(model)) to run;
        model may be None when only "lowered" runs (e.g. a loaded artifact).
    cv_threshold: warn when a run's coefficient of variation (stdev / mean) is above it.
    """
    if iterations < 1 or warmup < 0 or block < 1:
        raise ValueError(f"need iterations >= 1, warmup >= 0, block >= 1; got {iterations}, {warmup}, {block}")
    call = model_call(inputs, kwargs)
    cuda = any(isinstance(t, torch.Tensor) and t.is_cuda for t in pytree.tree_leaves(call))
    timer = cuda_time if cuda else host_time
    sizes: list[int | None] = list(batch_sizes) if batch_sizes else [None]
    runs = []
    for size in sizes:
        batch_args, batch_kwargs = at_batch(call, size)
        batch = size or _batch_of(call)
        fns = _variants(model, lowered, compare, batch)
        with torch.inference_mode():
            times = _interleaved(
                {v: functools.partial(f, *batch_args, **batch_kwargs) for v, f in fns.items()},
                timer,
                warmup,
                iterations,
                duration,
                block,
            )
        eager_median = statistics.median(t.wall_ms for t in times["eager"]) if "eager" in times else None
        for variant, calls in times.items():
            wall = [t.wall_ms for t in calls]
            latency = Latency.of(wall)
            cv = statistics.stdev(wall) / latency.mean if len(wall) > 1 else 0.0
            if cv > cv_threshold:
                warnings.warn(
                    f"trt_lower.benchmark: {variant} at batch {batch} is unstable: coefficient of "
                    f"variation {cv:.1%} > {cv_threshold:.0%} (other load, clock changes?)",
                    UnstableTimingWarning,
                    stacklevel=2,
                )
            fn = fns[variant]
            parts = (
                breakdown(fn, batch_args, breakdown_calls, kwargs=batch_kwargs)
                if variant == "lowered" and isinstance(fn, torch.fx.GraphModule)
                else None
            )
            runs.append(
                Run(
                    variant=variant,
                    batch_size=batch,
                    iterations=len(calls),
                    throughput=batch * len(wall) / (sum(wall) / 1e3),
                    latency_ms=latency,
                    cv=cv,
                    unstable=cv > cv_threshold,
                    speedup=eager_median / latency.median if eager_median else None,
                    gpu_ms=Latency.of([t.gpu_ms for t in calls if t.gpu_ms is not None]) if cuda else None,
                    enqueue_ms=Latency.of([t.enqueue_ms for t in calls if t.enqueue_ms is not None]) if cuda else None,
                    breakdown=parts,
                    samples_ms=wall,
                )
            )
    settings = {
        "warmup": warmup,
        "iterations": iterations,
        "duration": duration,
        "block": block,
        "cv_threshold": cv_threshold,
        "compare": list(compare),
        "timing": "cuda events" if cuda else "host",
        "backend": _backend(lowered),
    }
    return BenchmarkResult(runs, machine.info(cuda), settings)


def _backend(lowered: torch.nn.Module | Mapping[int, torch.nn.Module]) -> str:
    module = next(iter(lowered.values())) if isinstance(lowered, Mapping) else lowered
    report = getattr(module, "report", None)
    return str(getattr(report, "backend", "")) or type(module).__name__
