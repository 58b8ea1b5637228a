"""The lowering settings as every stage receives them (trt_lower/lowering_options.py checks what a user gives)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converters.core.target import DEFAULT, VERSIONS

if TYPE_CHECKING:
    import torch

BACKENDS = ("auto", "tensorrt", "onnxruntime")
PRECISIONS = ("fp32", "fp16")
TRT_VERSIONS = VERSIONS


def op_name(op: Any) -> str:
    """'aten.relu.default' for an OpOverload, 'aten.relu' for a packet, strings as given."""
    if isinstance(op, str):
        return op.removeprefix("torch.ops.")
    name = str(op)
    if not name.startswith("aten.") and hasattr(op, "_schema"):
        name = f"aten.{op._schema.name.split('::')[-1]}"
    return name


def is_op(name: str) -> bool:
    """Whether `name` ('aten.relu', 'aten.relu.default', 'mylib.op.default') names a registered op
    or overload packet: a misspelt or bare name ('relu') would match no node and do nothing."""
    import torch  # here, not at the top: the CLI builds its options from this module's names

    namespace, _, rest = name.partition(".")
    packet_name, _, overload = rest.partition(".")
    if not namespace or not packet_name:
        return False
    try:
        packet = getattr(getattr(torch.ops, namespace), packet_name)
    except (AttributeError, RuntimeError):
        return False
    return not overload or overload in packet.overloads()


def fp32_nodes(graph: torch.fx.Graph, keep_fp32: frozenset[str]) -> frozenset[str]:
    """The nodes of `graph` that a keep_fp32 setting names, by node name or by op."""
    return frozenset(
        n.name
        for n in graph.nodes
        if n.op == "call_function"
        and (
            n.name in keep_fp32
            or op_name(n.target) in keep_fp32
            or op_name(getattr(n.target, "overloadpacket", "")) in keep_fp32
        )
    )


@dataclass(frozen=True)
class LoweringSettings:
    backend: str = "auto"
    precision: str = "fp32"
    min_block_size: int = 3
    fallback_ops: frozenset[str] = frozenset()
    require_full: bool = False
    # TensorRT engine cache directory; None: $TRT_LOWER_CACHE_DIR, else the user's cache dir.
    cache_dir: Path | None = None
    # Replay each TensorRT engine from a CUDA graph (static shapes).
    cuda_graphs: bool = False
    # What the converters may emit: the TensorRT version's ONNX parser limits (converters/core/target.py).
    trt_version: str = DEFAULT
    # The TensorRT release the user gave as trt_version ("10.13") when it was not a target's name.
    trt_release: str = ""
    # precision="fp16": FX node names and ATen ops whose ONNX stays float32 (debug.fp16_sensitive).
    keep_fp32: frozenset[str] = frozenset()
    # TensorRT engines built refittable (BuilderFlag.REFIT), so that update_weights refits them in place.
    refittable: bool = False
    # TensorRT's builder knobs (docs/build-options.md); None: the builder's defaults.
    optimization_level: int | None = None  # IBuilderConfig.builder_optimization_level, 0-5
    workspace_bytes: int | None = None  # the WORKSPACE memory pool limit
    tactic_sources: frozenset[str] | None = None  # names of engine/builder_knobs.py's TACTIC_SOURCES
    # A TensorRT timing cache file read before each build and written back after it.
    timing_cache: Path | None = None
    # TensorRT engines built streamable (BuilderFlag.WEIGHT_STREAMING, 10.0 on): weights stay in host
    # memory and lowered.weight_streaming_budget says how many bytes of them the GPU holds.
    weight_streaming: bool = False
    # Where torch.distributed's functional collectives run: "eager" (between engines) or "engine"
    # (TensorRT 11's DistCollective layers, values/collectives.py).
    collectives: str = "eager"

    def check_keep_fp32(self, graph: torch.fx.Graph) -> None:
        """ValueError naming each keep_fp32 entry that is neither an op nor a node of `graph`."""
        names = {n.name for n in graph.nodes}
        unknown = sorted(k for k in self.keep_fp32 if not k.startswith("aten.") and k not in names)
        if unknown:
            raise ValueError(
                f"keep_fp32 names no node of the captured graph: {', '.join(unknown)} "
                "(give FX node names, as first_divergence/fp16_sensitive report them, or ops like "
                "'aten.mul.Tensor')"
            )
