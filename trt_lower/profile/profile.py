"""Profile: where a lowered module's call spends its time (LoweredModule.profile makes it), and
the ways to show it: a table, JSON, a Chrome trace."""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trt_lower.profile.sources import NodeSource


@dataclass(frozen=True)
class Row:
    """One measured part of the call: an engine layer (`kind` "layer", in `engine`; on ONNX
    Runtime a node of the graph it ran, after its fusions), a whole engine ("engine", where its
    layers are not measured) or an eager node ("eager"); its median seconds a call and the FX
    nodes it computes, with their sources (a fused layer lists all its nodes)."""

    name: str
    kind: str
    engine: str | None
    op: str
    seconds: float
    nodes: tuple[NodeSource, ...]


@dataclass(frozen=True)
class Profile:
    """A lowered module's call, measured: `call_seconds` (median over `iterations` calls after
    `warmup`) and the `rows` in execution order; the host glue (input checks, moving tensors in
    and out of engines, the Python between nodes) is the rest of the call."""

    call_seconds: float
    rows: tuple[Row, ...]
    backend: str
    iterations: int
    warmup: int

    @property
    def glue_seconds(self) -> float:
        """The call minus the rows: what runs between them."""
        return self.call_seconds - sum(r.seconds for r in self.rows)

    @property
    def coverage(self) -> float:
        """The share of the call the rows account for."""
        return sum(r.seconds for r in self.rows) / self.call_seconds if self.call_seconds > 0 else 0.0

    def share(self, row: Row) -> float:
        """`row`'s share of the call."""
        return row.seconds / self.call_seconds if self.call_seconds > 0 else 0.0

    def top(self, n: int) -> list[Row]:
        """The `n` rows that take the most time, most first."""
        return sorted(self.rows, key=lambda r: r.seconds, reverse=True)[:n]

    def node_seconds(self) -> dict[str, float]:
        """Seconds a call per graph node of the lowered module: per engine (its layers summed)
        and per eager node; what LoweringReport.draw colours by."""
        seconds: dict[str, float] = {}
        for row in self.rows:
            key = row.engine or row.name
            seconds[key] = seconds.get(key, 0.0) + row.seconds
        return seconds

    def table(self, top: int = 20) -> str:
        """The `top` rows by time, then one for the rest and one for the glue: time, share,
        the row and the source line of its first FX node."""
        shown = self.top(top)
        lines = [
            f"profile on {self.backend}: {_ms(self.call_seconds)} a call (median of {self.iterations} after "
            f"{self.warmup} warm-up), rows cover {self.coverage:.1%}",
            f"{'time':>10} {'share':>6}  {'where':<40} {'FX nodes':<40} source",
        ]
        for row in shown:
            where = f"{row.engine}/{row.name}" if row.kind == "layer" else row.name
            names = ", ".join(n.node for n in row.nodes)
            # An installed package's line from its name on (the directories before it say nothing).
            source = next((n.source for n in row.nodes if n.source), "").rpartition("site-packages/")[2]
            lines.append(f"{_ms(row.seconds)} {self.share(row):6.1%}  {where[:40]:<40} {names[:40]:<40} {source}")
        rest = [r for r in self.rows if r not in shown]
        if rest:
            seconds = sum(r.seconds for r in rest)
            lines.append(f"{_ms(seconds)} {seconds / self.call_seconds:6.1%}  the other {len(rest)} rows")
        lines.append(f"{_ms(self.glue_seconds)} {self.glue_seconds / self.call_seconds:6.1%}  host glue")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def to_dict(self) -> dict[str, Any]:
        """The profile as JSON data (what save_json writes), as BenchmarkResult's and LoweringReport's to_dict."""
        return {**asdict(self), "glue_seconds": self.glue_seconds, "coverage": self.coverage}

    def to_json(self) -> dict[str, Any]:
        """to_dict's former name: warns (DeprecationWarning) until the next release."""
        warnings.warn(
            "Profile.to_json() is deprecated and goes in the next release: use Profile.to_dict()",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.to_dict()

    def save_json(self, path: str | os.PathLike[str]) -> Path:
        """The profile as JSON: every row with its FX nodes and sources, the call, the glue;
        returns the path written (as BenchmarkResult's and LoweringReport's save_json)."""
        with open(path, "w") as file:
            json.dump(self.to_dict(), file, indent=1)
        return Path(path)

    def chrome_trace(self) -> dict[str, Any]:
        """The rows as complete events in Chrome's trace event format, end to end in execution
        order, then the glue: medians laid out as one call (not one run's timeline)."""
        events, start = [], 0.0
        for row in (*self.rows, Row("host glue", "glue", None, "", max(self.glue_seconds, 0.0), ())):
            events.append(
                {
                    "name": row.name,
                    "cat": row.kind,
                    "ph": "X",
                    "ts": start * 1e6,
                    "dur": row.seconds * 1e6,
                    "pid": 0,
                    "tid": row.engine or "eager",
                    "args": {"op": row.op, "nodes": [n.describe() for n in row.nodes]},
                }
            )
            start += row.seconds
        return {"traceEvents": events, "displayTimeUnit": "ms"}

    def save_chrome_trace(self, path: str | os.PathLike[str]) -> Path:
        """chrome_trace() to `path`: open it in chrome://tracing or ui.perfetto.dev; returns the path written."""
        with open(path, "w") as file:
            json.dump(self.chrome_trace(), file)
        return Path(path)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.3f}ms"
