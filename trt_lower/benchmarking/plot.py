"""The benchmark as a PNG: latency distribution per variant and batch size (box plots), and the
speedup over eager per batch size. Drawn on matplotlib's Agg canvas: no display needed, and no
global backend switched under the caller's feet."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from trt_lower.benchmarking.summary import label

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from trt_lower.benchmarking.measure import BenchmarkResult

COLORS = {"eager": "#7f7f7f", "lowered": "#1f77b4", "compile": "#ff7f0e"}


def plot(result: BenchmarkResult, path: Path) -> Path:
    if path.suffix.lower() != ".png":
        raise ValueError(f"the plot is a PNG: {str(path)!r} must end in .png")
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch
        from matplotlib.ticker import ScalarFormatter
    except ImportError:
        raise ImportError("the benchmark plot needs matplotlib: pip install 'trt_lower[bench]'") from None

    variants = list(dict.fromkeys(r.variant for r in result.runs))
    batches = sorted({r.batch_size for r in result.runs})
    fig = Figure(figsize=(11, 4.2), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    dist, speed = fig.subplots(1, 2, width_ratios=(3, 2))

    width = 0.8 / len(variants)
    for i, variant in enumerate(variants):
        runs = [result.run(variant, b) for b in batches]
        positions = [k + (i - (len(variants) - 1) / 2) * width for k in range(len(batches))]
        box = dist.boxplot(
            [r.samples_ms for r in runs],
            positions=positions,
            widths=width * 0.85,
            patch_artist=True,
            flierprops={"markersize": 2},
            medianprops={"color": "black"},
        )
        for patch in box["boxes"]:
            patch.set_facecolor(COLORS.get(variant, "#2ca02c"))
            patch.set_alpha(0.7)
    dist.set_xticks(range(len(batches)), [f"batch {b}" for b in batches])
    dist.set_ylabel("latency per call (ms)")
    # A log scale keeps the fast variant's box readable beside a much slower one.
    if max(r.latency_ms.max for r in result.runs) > 4 * min(r.latency_ms.min for r in result.runs):
        dist.set_yscale("log")
        dist.yaxis.set_major_formatter(ScalarFormatter())
    dist.set_title("latency distribution (box: quartiles, whiskers: 1.5 IQR)")

    if "eager" in variants:
        _speedups(speed, result, [v for v in variants if v != "eager"], batches)
    else:
        speed.set_axis_off()
        speed.text(0.5, 0.5, "no eager run to compare with", ha="center", va="center")

    handles = [
        Patch(color=COLORS.get(v, "#2ca02c"), alpha=0.7, label=label(v, result.settings["backend"])) for v in variants
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize="small")
    m = result.machine
    where = m["gpu"]["name"] if m.get("gpu") else f"{m['cpu']}, {m['torch_threads']} threads"
    if m.get("load_average_1min") is not None:
        where += f", load average {m['load_average_1min']:.1f}"
    fig.suptitle(f"trt_lower benchmark · {where}", fontsize="medium")
    fig.savefig(path, format="png")
    return path


def _speedups(ax: Axes, result: BenchmarkResult, others: list[str], batches: list[int]) -> None:
    width = min(0.5, 0.8 / max(1, len(others)))
    for i, variant in enumerate(others):
        xs = [k + (i - (len(others) - 1) / 2) * width for k in range(len(batches))]
        ups = [result.run(variant, b).speedup or 0.0 for b in batches]
        bars = ax.bar(xs, ups, width=width * 0.9, color=COLORS.get(variant, "#2ca02c"), alpha=0.7)
        ax.bar_label(bars, labels=[f"{u:.2f}x" for u in ups], fontsize="small")
    ax.axhline(1.0, color=COLORS["eager"], linestyle="--", linewidth=1)
    ax.margins(y=0.12)  # room for the bar labels
    ax.set_xticks(range(len(batches)), [str(b) for b in batches])
    ax.set_xlim(-0.75, len(batches) - 0.25)
    ax.set_xlabel("batch size")
    ax.set_ylabel("speedup over eager (median latency)")
    ax.set_title("speedup over eager PyTorch (dashed: 1x)")
