"""The values the convert stage hands to build, and build to stitch and deploy."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import torch

from converters.core.segment import OnnxSegment
from trt_lower.values.signature import TensorSig

# ONNX ops TensorRT runs as its own fused layers (opset 23, which target "latest" is written at).
FUSED_ONNX_OPS = frozenset({"Attention", "RMSNormalization", "RotaryEmbedding"})
# TensorRT 11's collective layer (lower_to_trt's collectives="engine").
COLLECTIVE_ONNX_OP = "DistCollective"


def collective_layers(onnx: OnnxSegment) -> dict[str, int]:
    """The collectives an engine runs inside it, by operation ("all_reduce": 2); empty: none."""
    return dict(
        Counter(
            attr.s.decode()
            for node in onnx.model.graph.node
            if node.op_type == COLLECTIVE_ONNX_OP
            for attr in node.attribute
            if attr.name == "collective_operation"
        )
    )


@dataclass(frozen=True)
class ConvertedSegment:
    """One engine segment as plain data: everything an engine is built from, and what the report
    says about it."""

    name: str  # the `engine_<k>` submodule it replaces
    onnx: OnnxSegment  # the model, large weights kept beside it as arrays
    inputs: tuple[TensorSig, ...]  # the engine's runtime inputs, in call order
    outputs: tuple[TensorSig, ...]
    tuple_output: bool  # the segment returns a tuple (else its one output)
    nodes: tuple[str, ...]  # its FX call_function nodes: those an EngineBuildError sends to eager
    notes: tuple[str, ...]  # where it computes in a narrower dtype than the model
    # The layers that read dequantized int8 (the report's EngineReport.int8_ops), by op.
    int8_ops: dict[str, int] = field(default_factory=dict)
    # The layers that read INT4 weights, dequantized group-wise (EngineReport.int4_ops), by op.
    int4_ops: dict[str, int] = field(default_factory=dict)
    # The layers that read dequantized FP8 (E4M3) (EngineReport.fp8_ops), by op.
    fp8_ops: dict[str, int] = field(default_factory=dict)

    @property
    def fused_ops(self) -> dict[str, int]:
        """Its ONNX ops of FUSED_ONNX_OPS, by op (the report's EngineReport.fused_ops)."""
        return dict(Counter(n.op_type for n in self.onnx.model.graph.node if n.op_type in FUSED_ONNX_OPS))

    @property
    def collectives(self) -> dict[str, int]:
        """Its collectives inside the engine, by operation (EngineReport.collectives)."""
        return collective_layers(self.onnx)


@dataclass(frozen=True)
class Engine:
    """A segment's engine, ready to be swapped into the graph."""

    segment: ConvertedSegment
    module: torch.nn.Module
    # TensorRT: True when the engine was loaded from the engine cache, False when built; else None.
    cache_hit: bool | None
