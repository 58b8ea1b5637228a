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
    # The ONNX ops TensorRT runs as its own fused layers (Attention, RMSNormalization,
    # RotaryEmbedding: target "latest"), by op. Empty: attention and norms are written as math.
    fused_ops: dict[str, int] = field(default_factory=dict)
    # The layers that read INT4 weights dequantized group-wise (weight-only: TensorRT computes
    # them in float, reading 4-bit weights), by op.
    int4_ops: dict[str, int] = field(default_factory=dict)
    # The layers that read dequantized FP8 (E4M3), by op: computed in FP8 on GPUs that have it.
    fp8_ops: dict[str, int] = field(default_factory=dict)
    # Its optimization profiles (lower_to_trt's `profiles`): per profile, its dynamic inputs'
    # ranges ("'x' (1..4, 8)"). Empty: one profile, the range input_shapes shows.
    profiles: list[str] = field(default_factory=list)
    # Bytes of weights TensorRT streams from host memory (built with weight_streaming=True); 0: none.
    streamable_bytes: int = 0
    # The bytes of the weights the engine took in as constants (on a tensor-parallel rank: its
    # shard's).
    weight_bytes: int = 0
    # The collectives the engine runs inside it (collectives="engine": TensorRT's DistCollective
    # layers), by operation ("all_reduce"). Empty: collectives, if any, run between engines.
    collectives: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Fallback:
    node: str
    op: str
    reason: str


@dataclass
class Repair:
    """An engine that disagreed with eager PyTorch at build time, and what made it agree."""

    node: str  # the culprit: the first node of the smallest failing run
    op: str
    module_path: str  # the submodule that called it ("" for the top module)
    source: str  # the model's source line: "file:line in fn: code"
    engine: str  # the engine it was in when it failed
    built_by: str  # what built that engine: "TensorRT 10.13.0", "ONNX Runtime 1.23.2"
    nodes: list[str]  # the smallest run of nodes that failed alone
    # The largest |engine - reference| over its allowed bound (trt_lower/verify/tolerance.py; above
    # 1 fails): the failing engine's worst output before (None: not finite, a NaN or infinity
    # where eager is finite), the worst engine's after.
    error_before: float | None
    error_after: float | None
    action: str  # "split" (an extra engine output at the culprit), "fp32", "eager" or "engine eager"
    tried: list[str] = field(default_factory=list)  # actions before it that did not help

    def __str__(self) -> str:
        before = "not finite" if self.error_before is None else f"{self.error_before:.3g}"
        after = "?" if self.error_after is None else f"{self.error_after:.3g}"
        tried = f" (after {', '.join(self.tried)} did not help)" if self.tried else ""
        return (
            f"{self.node} ({self.op}) in {self.engine} [{self.built_by}]: {self.action}{tried}; "
            f"error {before} -> {after} of tolerance; {self.module_path or '<model>'} at {self.source}"
        )


@dataclass(frozen=True)
class GraphNode:
    """A node of the lowered graph, as the picture of the split draws it (`LoweringReport.draw`)."""

    name: str
    kind: str  # "input", "engine" (an engine_<k> call), "eager" or "output"
    op: str  # the ATen op of an eager node, else the node's target
    # One (producer node, "shape dtype" of the tensor it passes) per incoming edge.
    inputs: tuple[tuple[str, str], ...] = ()
