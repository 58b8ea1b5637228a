"""The split as one self-contained HTML page, for machines without Graphviz: the graph's nodes in
execution order (engines as coloured cards, eager fallbacks with their reasons), and the DOT
source to render elsewhere (`dot -Tsvg`, or any online Graphviz viewer)."""

from __future__ import annotations

from collections import Counter
from html import escape
from typing import TYPE_CHECKING, Mapping

from trt_lower.report.entries import GraphNode

if TYPE_CHECKING:
    from trt_lower.report.report import LoweringReport

# Pastel fills that stay readable under black text, one per engine in turn (the DOT picture's too).
PALETTE = ["#a6cee3", "#b2df8a", "#fdbf6f", "#cab2d6", "#ffff99", "#8dd3c7", "#bebada", "#fccde5"]
FALLBACK_COLOR = "#fb9a99"


def heat(seconds: float, hottest: float) -> str:
    """A fill from white (no time) to deep orange (the hottest node's time), for a picture
    coloured by time (trt_lower.profile's Profile.node_seconds)."""
    level = seconds / hottest if hottest > 0 else 0.0
    green, blue = (int(255 - level * (255 - c)) for c in (0x8C, 0x1A))
    return f"#ff{green:02x}{blue:02x}"


def timing(seconds: float, total: float) -> str:
    """'1.234 ms · 12.3%': a node's time and its share of the call."""
    return f"{seconds * 1e3:.3f} ms · {seconds / total:.1%}" if total > 0 else f"{seconds * 1e3:.3f} ms"


_STYLE = """
body { font-family: Helvetica, Arial, sans-serif; margin: 2em; }
.card { border: 1px solid #888; border-radius: 6px; margin: 0.4em 0; padding: 0.4em 0.8em; max-width: 60em; }
.from { color: #555; font-size: 85%; }
table { border-collapse: collapse; font-size: 90%; } td { padding: 0 0.8em 0 0; }
"""


def _card(node: GraphNode, report: LoweringReport, reasons: dict[str, str], times: Mapping[str, float] | None) -> str:
    engines = {e.name: e for e in report.engines}
    sources = ", ".join(f"{escape(name)} ({escape(shape)})" for name, shape in node.inputs)
    body, color = "", "#eeeeee"
    if node.kind == "engine":
        e = engines[node.op]
        color = PALETTE[list(engines).index(e.name) % len(PALETTE)]
        ops = "".join(f"<tr><td>{escape(op)}</td><td>{n}</td></tr>" for op, n in Counter(e.ops).most_common())
        body = (
            f"<b>{escape(e.name)}</b> · {escape(e.backend)} · {e.num_nodes} ops<table>{ops}</table>"
            f"in: {escape(str(e.input_shapes))} → out: {escape(str(e.output_shapes))}"
        )
    elif node.name in reasons:
        color = FALLBACK_COLOR
        body = f"<b>{escape(node.name)}</b> ({escape(node.op)}) runs eager: <i>{escape(reasons[node.name])}</i>"
    else:
        body = f"<b>{escape(node.kind)} {escape(node.name)}</b> ({escape(node.op)})"
    where = f'<div class="from">from: {sources}</div>' if sources else ""
    if times:
        seconds, total = times.get(node.name, 0.0), sum(times.values())
        color = heat(seconds, max(times.values()))
        body = f"<b>{escape(timing(seconds, total))}</b> · {body}"
    return f'<div class="card" style="background:{color}">{body}{where}</div>'


def page(report: LoweringReport, dot_source: str, times: Mapping[str, float] | None = None) -> str:
    """The page; with `times` (seconds by graph node: engines and eager nodes), each card is
    coloured by its time and shows it."""
    reasons = {f.node: f.reason for f in report.fallbacks}
    cards = "\n".join(_card(n, report, reasons, times) for n in report.graph)
    summary = escape(str(report).splitlines()[0])
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>trt_lower split</title>'
        f"<style>{_STYLE}</style></head><body>\n<h1>trt_lower split</h1><p>{summary}</p>\n{cards}\n"
        f"<details><summary>Graphviz DOT source</summary><pre>{escape(dot_source)}</pre></details>"
        f"\n</body></html>\n"
    )
