"""The benchmark's summary table, as `trt-lower bench` and the demo print it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trt_lower.benchmarking.measure import BenchmarkResult, Run

_FIELDS = ("min", "mean", "median", "p90", "p95", "p99", "max")


def _ms(value: float) -> str:
    """About 4 significant digits, so that seconds-long calls fit the column too."""
    return f"{value:.{max(0, 3 - len(str(int(value))) + 1)}f}"


def label(variant: str, backend: str) -> str:
    return f"lowered ({backend})" if variant == "lowered" and backend else variant


def _breakdown(run: Run) -> str:
    parts = run.breakdown or []
    total = sum(p.ms for p in parts) or 1.0
    shown = ", ".join(
        f"{p.name} {p.ms:.2f} ms ({p.ms / total:.0%}" + (f", {p.nodes} ops)" if p.nodes else ")") for p in parts
    )
    return f"  one lowered call at batch {run.batch_size}: {shown}"


def summary(result: BenchmarkResult) -> str:
    s, m = result.settings, result.machine
    where = f"{m['gpu']['name']}, CUDA events" if m.get("gpu") else f"{m['cpu']}, {m['torch_threads']} torch threads"
    if m.get("load_average_1min") is not None:
        where += f", load average {m['load_average_1min']:.1f}"
    name_width = max(len(label(r.variant, s["backend"])) + 2 for r in result.runs)
    lines = [
        f"benchmark on {where}: >= {s['iterations']} calls per variant and batch size after {s['warmup']} "
        f"warm-up, variants interleaved in blocks of {s['block']}",
        f"{'batch':>5}  {'variant':<{name_width}}{'samples/s':>10}"
        + "".join(f"{f:>9}" for f in _FIELDS)
        + f"{'CV':>8}{'vs eager':>10}",
    ]
    for r in result.runs:
        lat = r.latency_ms
        lines.append(
            f"{r.batch_size:>5}  {label(r.variant, s['backend']):<{name_width}}{r.throughput:>10.1f}"
            + "".join(f"{_ms(getattr(lat, f)):>9}" for f in _FIELDS)
            + f"{r.cv:>7.1%}{'!' if r.unstable else ' '}"
            + (f"{r.speedup:>9.2f}x" if r.speedup is not None else f"{'-':>10}")
        )
    lines.append("  (latency in ms, host wall time per call" + (", until results are ready)" if m.get("gpu") else ")"))
    for r in result.runs:
        if r.gpu_ms is not None and r.enqueue_ms is not None:
            lines.append(
                f"  {label(r.variant, s['backend'])} at batch {r.batch_size}: GPU time median {r.gpu_ms.median:.3f} ms "
                f"(p99 {r.gpu_ms.p99:.3f}), enqueue median {r.enqueue_ms.median:.3f} ms"
            )
    if any(r.unstable for r in result.runs):
        lines.append(
            f"  ! coefficient of variation above {s['cv_threshold']:.0%}: timings are unstable "
            "(other load on the machine, clock changes); run longer or on an idle machine"
        )
    lines += [_breakdown(r) for r in result.runs if r.breakdown]
    return "\n".join(lines)
