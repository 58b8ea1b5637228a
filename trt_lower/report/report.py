"""LoweringReport: what runs where, and why."""

from __future__ import annotations

import dataclasses
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from trt_lower.report.draw import draw
from trt_lower.report.entries import EngineReport, Fallback, GraphNode, Repair


@dataclass
class LoweringReport:
    """What a lowering did: coverage (the fraction of compute nodes inside engines), each engine
    (ops, I/O shapes, cache hit), each eager node with the reason it is eager, precision, target,
    notes and per-stage timings; `str()` is a summary to paste into a bug report."""

    coverage: float
    engines: list[EngineReport] = field(default_factory=list)
    fallbacks: list[Fallback] = field(default_factory=list)
    backend: str = ""
    precision: str = "fp32"
    # The TensorRT version whose ONNX parser limits the engines respect (the trt_version setting).
    trt_version: str = ""
    # The TensorRT release asked for as trt_version ("10.13"), when it was not a target's name.
    trt_release: str = ""
    # precision="fp16": the keep_fp32 setting (FX node names and ATen ops kept float32).
    keep_fp32: list[str] = field(default_factory=list)
    # Where engines compute in a narrower dtype than the model (float64, and int64 on 8.6).
    notes: list[str] = field(default_factory=list)
    # Wall seconds per lowering stage, over all retries (api.py records them): capture, split,
    # convert, build (TensorRT engine builds or cache loads, ONNX Runtime session creation), verify
    # (engines against eager, repairs included), stitch.
    timings: dict[str, float] = field(default_factory=dict)
    # The build stage's host memory (engine/build_memory.py): the process's peak resident set
    # size, sampled while engines built, and its largest rise over the RSS at a build's start
    # (None: not measured, off Linux).
    build_peak_rss_bytes: int | None = None
    build_rss_growth_bytes: int | None = None
    # verify=True: each engine's worst output error against eager, as a share of the output's
    # scale (trt_lower/verify/tolerance.py), and the miscompiles repaired on the way.
    verify_errors: dict[str, float] = field(default_factory=dict)
    repairs: list[Repair] = field(default_factory=list)
    # The lowered graph in topological order, engines collapsed to one node each (for draw()).
    graph: list[GraphNode] = field(default_factory=list)

    @property
    def repairs_per_engine(self) -> dict[str, int]:
        """How many repair actions verification took in each engine that disagreed with eager
        (len(repairs) counts actions: one engine may take several)."""
        return dict(Counter(r.engine for r in self.repairs))

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON-ready data, with repairs_per_engine."""
        return {**dataclasses.asdict(self), "repairs_per_engine": self.repairs_per_engine}

    def save_json(self, path: str | os.PathLike[str]) -> Path:
        """Write to_dict() to `path` as JSON; returns the path written."""
        out = Path(path)
        out.write_text(json.dumps(self.to_dict(), indent=1))
        return out

    def draw(self, path: str | os.PathLike[str], *, times: Mapping[str, float] | None = None) -> Path:
        """Write a picture of the split to `path`: `.svg` or `.png` (need Graphviz's `dot`),
        `.html` or `.dot` (need nothing). Engines are coloured blocks (op count, op histogram,
        I/O shapes), eager fallbacks carry their reasons. `times`: seconds by graph node (a
        profile's `node_seconds()`): each engine and eager node is coloured by its time, white to
        orange, and shows it with its share. Returns the path written."""
        return draw(self, Path(path), times)

    def __str__(self) -> str:
        asked = f" (asked {self.trt_release})" if self.trt_release else ""
        lines = [
            f"trt_lower report: backend={self.backend} precision={self.precision} trt_version={self.trt_version}{asked} "
            f"coverage={self.coverage:.1%} engines={len(self.engines)} fallbacks={len(self.fallbacks)}"
        ]
        for e in self.engines:
            top = ", ".join(f"{op}×{n}" for op, n in Counter(e.ops).most_common(6))
            more = len(e.ops) - 6
            where = e.backend if e.cache_hit is None else f"{e.backend}, {'cache hit' if e.cache_hit else 'built'}"
            lines.append(f"  {e.name} [{where}]: {e.num_nodes} ops ({top}{', …' if more > 0 else ''})")
            lines.append(f"      in {e.input_shapes} -> out {e.output_shapes}, weights {e.weight_bytes} bytes")
            for k, ranges in enumerate(e.profiles):
                lines.append(f"      profile {k}: {ranges}")
            for kind, ops in (("int8", e.int8_ops), ("fp8", e.fp8_ops), ("int4 weights", e.int4_ops)):
                if ops:
                    lines.append(f"      {kind}: " + ", ".join(f"{op}×{n}" for op, n in Counter(ops).most_common()))
            if e.streamable_bytes:
                lines.append(f"      weight streaming: {e.streamable_bytes} bytes streamable")
            if e.fused_ops:
                lines.append("      fused layers: " + ", ".join(f"{op}×{n}" for op, n in sorted(e.fused_ops.items())))
            if e.collectives:
                lines.append(
                    "      collectives inside: " + ", ".join(f"{op}×{n}" for op, n in sorted(e.collectives.items()))
                )
        if self.fallbacks:
            lines.append("  eager fallbacks:")
            for f in self.fallbacks:
                lines.append(f"    {f.node} ({f.op}): {f.reason}")
        if self.keep_fp32:
            lines.append(f"  kept float32 (keep_fp32): {', '.join(self.keep_fp32)}")
        if self.verify_errors:
            lines.append(
                "  verified against eager: " + ", ".join(f"{k} {v:.2g}" for k, v in self.verify_errors.items())
            )
        if self.repairs:
            per_engine = ", ".join(f"{e} {n}" for e, n in self.repairs_per_engine.items())
            lines.append(f"  {len(self.repairs_per_engine)} engine(s) repaired, actions per engine: {per_engine}")
        lines.extend(f"  repaired: {r}" for r in self.repairs)
        lines.extend(f"  note: {n}" for n in self.notes)
        if self.timings:
            lines.append("  timings: " + ", ".join(f"{k} {v:.2f}s" for k, v in self.timings.items()))
        if self.build_peak_rss_bytes is not None and self.build_rss_growth_bytes is not None:
            lines.append(
                f"  build host memory: peak RSS {self.build_peak_rss_bytes / 2**20:.0f} MiB "
                f"(+{self.build_rss_growth_bytes / 2**20:.0f} MiB during the build)"
            )
        return "\n".join(lines)
