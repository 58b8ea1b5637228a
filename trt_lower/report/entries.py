"""The parts of a LoweringReport: an engine, an eager fallback, a node of the lowered graph."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EngineReport:
    name: str
    num_nodes: int
    ops: dict[str, int]
    input_shapes: list[tuple[int, ...]]  # -1 where a dim varies
    output_shapes: list[tuple[int, ...]]
    backend: str
    # TensorRT engines: True when loaded from the engine cache, False when built; None otherwise.
    cache_hit: bool | None = None
    # The layers that read dequantized int8 (Q/DQ), by op: TensorRT fuses the DequantizeLinear
    # into them and computes them in int8. Empty: the engine computes in float only.
    int8_ops: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Fallback:
    node: str
    op: str
    reason: str


@dataclass(frozen=True)
class GraphNode:
    """A node of the lowered graph, as the picture of the split draws it (`LoweringReport.draw`)."""
    name: str
    kind: str  # "input", "engine" (an engine_<k> call), "eager" or "output"
    op: str  # the ATen op of an eager node, else the node's target
    # One (producer node, "shape dtype" of the tensor it passes) per incoming edge.
    inputs: tuple[tuple[str, str], ...] = ()
