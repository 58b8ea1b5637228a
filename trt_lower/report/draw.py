"""A picture of the split: which parts of the graph run in which engine, and why the rest is eager.

The graph is laid out by Graphviz (`dot`, through pydot, as torch.fx's FxGraphDrawer does):
each engine is one coloured block (its op count, op histogram and I/O shapes), each eager node
carries the reason it is eager. Large graphs stay readable: engines are always one block, and
beyond `MAX_NODES` eager view/size nodes are left out (their edges kept) and chains of eager
fallbacks become one block that still names every reason.
"""

from __future__ import annotations

import html
import shutil
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from trt_lower.report.draw_html import FALLBACK_COLOR, PALETTE, heat, page, timing
from trt_lower.report.entries import EngineReport, GraphNode

if TYPE_CHECKING:
    import pydot

    from trt_lower.report.report import LoweringReport

MAX_NODES = 40
# Graphviz needs its `dot` program for these; .dot and .html are written without it.
RENDERED = {".svg": "svg", ".png": "png"}


@dataclass
class _Box:
    """One drawn node: a GraphNode, or a chain of eager fallbacks merged into one."""

    name: str
    kind: str
    members: list[GraphNode]
    inputs: list[tuple[str, str]] = field(default_factory=list)


def _boxes(report: LoweringReport) -> list[_Box]:
    reasons = {f.node: f.reason for f in report.fallbacks}
    boxes = [_Box(n.name, n.kind, [n], list(n.inputs)) for n in report.graph]
    if len(boxes) > MAX_NODES:
        boxes = _skip_views(boxes, reasons)
    if len(boxes) > MAX_NODES:
        boxes = _merge_chains(boxes, reasons)
    return boxes


def _skip_views(boxes: list[_Box], reasons: dict[str, str]) -> list[_Box]:
    """Leave out eager nodes that are no fallback (views, sizes): edges go through them."""
    through: dict[str, list[tuple[str, str]]] = {}
    kept = []
    for box in boxes:
        box.inputs = [e for name, shape in box.inputs for e in through.get(name, [(name, shape)])]
        if box.kind == "eager" and box.name not in reasons:
            through[box.name] = box.inputs
        else:
            kept.append(box)
    return kept


def _merge_chains(boxes: list[_Box], reasons: dict[str, str]) -> list[_Box]:
    """Merge an eager fallback into the fallback box before it when that box's last node is its
    only producer and has no other consumer."""
    users = Counter(name for box in boxes for name, _ in box.inputs)
    owner: dict[str, _Box] = {}  # node name -> the box drawing it
    kept = []
    for box in boxes:
        producer = box.inputs[0][0] if len(box.inputs) == 1 else ""
        prev = owner.get(producer)
        if (
            box.name in reasons
            and prev is not None
            and prev.members[-1].name == producer
            and prev.members[-1].name in reasons
            and users[producer] == 1
        ):
            prev.members.append(box.members[0])
            owner[box.name] = prev
            continue
        box.inputs = [(owner[n].name if n in owner else n, shape) for n, shape in box.inputs]
        owner[box.name] = box
        kept.append(box)
    return kept


def _wrap(text: str, width: int = 48) -> str:
    lines = textwrap.wrap(text, width, break_long_words=False)
    return "<BR/>".join(html.escape(line) for line in lines) or "&nbsp;"


def _short(op: str) -> str:
    """aten.convolution.default -> convolution: the node's name already says which one it is."""
    return op.removeprefix("aten.").removesuffix(".default")


def _shapes(shapes: list[tuple[int, ...]]) -> str:
    return ", ".join("×".join("?" if d < 0 else str(d) for d in s) or "scalar" for s in shapes)


def _engine_label(e: EngineReport, color: str, time: str = "") -> str:
    rows = [
        f'<TR><TD COLSPAN="2" BGCOLOR="{color}"><B>{html.escape(e.name)}</B> · {e.backend} · '
        f"{e.num_nodes} ops{f' · <B>{time}</B>' if time else ''}</TD></TR>"
    ]
    ops = Counter(e.ops).most_common()
    shown = ops[:6] if len(ops) > 7 else ops
    rows += [f'<TR><TD ALIGN="LEFT">{html.escape(_short(op))}</TD><TD ALIGN="RIGHT">{n}</TD></TR>' for op, n in shown]
    if len(shown) < len(ops):
        rest = sum(n for _, n in ops[len(shown) :])
        rows.append(
            f'<TR><TD ALIGN="LEFT"><I>{len(ops) - len(shown)} more ops</I></TD><TD ALIGN="RIGHT">{rest}</TD></TR>'
        )
    rows.append(f'<TR><TD COLSPAN="2" ALIGN="LEFT">in: {_wrap(_shapes(e.input_shapes))}</TD></TR>')
    rows.append(f'<TR><TD COLSPAN="2" ALIGN="LEFT">out: {_wrap(_shapes(e.output_shapes))}</TD></TR>')
    return f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" BGCOLOR="white">{"".join(rows)}</TABLE>>'


def _eager_label(box: _Box, reasons: dict[str, str], time: str = "") -> str:
    if len(box.members) == 1:
        lines = [f"<B>{html.escape(box.name)}</B>", html.escape(box.members[0].op)]
    else:
        ops = Counter(_short(m.op) for m in box.members)
        lines = [
            f"<B>{len(box.members)} eager nodes: {html.escape(box.members[0].name)} … "
            f"{html.escape(box.members[-1].name)}</B>",
            _wrap(", ".join(op + (f" ×{n}" if n > 1 else "") for op, n in ops.items())),
        ]
    for reason in dict.fromkeys(reasons[m.name] for m in box.members if m.name in reasons):
        lines.append(f"<I>{_wrap(reason)}</I>")
    if time:
        lines.append(f"<B>{time}</B>")
    return "<" + "<BR/>".join(lines) + ">"


def to_dot(report: LoweringReport, times: Mapping[str, float] | None = None) -> pydot.Dot:
    """The picture as DOT; with `times` (seconds by graph node: engines and eager nodes), engines
    and eager nodes are coloured by their time and show it."""
    import pydot  # only to draw: lowering itself does not need it

    if not report.graph:
        raise ValueError("this report has no graph to draw (it was not made by lower_to_trt)")
    reasons = {f.node: f.reason for f in report.fallbacks}
    engines = {e.name: e for e in report.engines}
    dot = pydot.Dot(
        "split",
        graph_type="digraph",
        rankdir="TB",
        fontname="Helvetica",
        label=f"{report.backend} · coverage {report.coverage:.1%} · {_count(len(report.engines), 'engine')} · "
        f"{_count(len(report.fallbacks), 'eager fallback')}",
        labelloc="t",
    )
    dot.set_node_defaults(fontname="Helvetica", fontsize="10", shape="box", style="rounded,filled", fillcolor="white")
    dot.set_edge_defaults(fontname="Helvetica", fontsize="8", color="#555555")
    for i, box in enumerate(_boxes(report)):
        attrs: dict[str, Any]
        seconds = sum(times.get(m.name, 0.0) for m in box.members) if times else 0.0
        time = timing(seconds, sum(times.values())) if times else ""
        if box.kind == "engine":
            e = engines[box.members[0].op]
            color = heat(seconds, max(times.values())) if times else PALETTE[list(engines).index(e.name) % len(PALETTE)]
            attrs = {"label": _engine_label(e, color, time), "shape": "plain", "style": ""}
        elif box.kind == "eager":
            fallback = any(m.name in reasons for m in box.members)
            fill = heat(seconds, max(times.values())) if times else FALLBACK_COLOR if fallback else "#eeeeee"
            attrs = {"label": _eager_label(box, reasons, time), "fillcolor": fill}
        else:
            attrs = {
                "label": f"<<B>{box.kind}</B><BR/>{html.escape(box.name)}>",
                "shape": "oval",
                "fillcolor": "#dddddd",
            }
        dot.add_node(pydot.Node(_quote(box.name), **attrs))
        for name, shape in box.inputs:
            dot.add_edge(pydot.Edge(_quote(name), _quote(box.name), label=shape))
    return dot


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _quote(name: str) -> str:
    return f'"{name}"'


def draw(report: LoweringReport, path: Path, times: Mapping[str, float] | None = None) -> Path:
    suffix = path.suffix.lower()
    if suffix not in (*RENDERED, ".dot", ".html"):
        raise ValueError(f"cannot draw to {str(path)!r}: the file name must end in .svg, .png, .html or .dot")
    dot = to_dot(report, times)
    if suffix == ".dot":
        path.write_text(dot.to_string())
    elif suffix == ".html":
        path.write_text(page(report, dot.to_string(), times))
    else:
        if shutil.which("dot") is None:
            raise RuntimeError(
                f"drawing {str(path)!r} needs Graphviz's `dot` program, which is not on PATH: "
                "install Graphviz (apt-get install graphviz, brew install graphviz, "
                "conda install graphviz), or draw to .html or .dot, which need nothing"
            )
        dot.write(str(path), prog="dot", format=RENDERED[suffix])
    return path
