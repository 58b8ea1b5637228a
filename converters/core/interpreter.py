"""Turn one engine segment (an FX GraphModule of ATen ops) into an ONNX ModelProto."""

from __future__ import annotations

import operator
from typing import Any, Mapping

import torch
from torch.fx.node import map_arg

from converters.core import registry
from converters.core.builder import OPSET, GraphBuilder, Ref, Value
from converters.core.errors import TrtLowerError
from converters.core.segment import OnnxSegment


class ConversionError(TrtLowerError, RuntimeError):
    """A converter failed on a node its capability check accepted (a converter bug)."""

    def __init__(self, node: torch.fx.Node, cause: Exception) -> None:
        self.node_name = node.name
        self.reason = f"converter for {node.target} failed: {type(cause).__name__}: {cause}"
        super().__init__(f"{node.name}: {self.reason}")


def _described(name: str, meta: Any) -> Ref:
    """Attach the FX node's dtype/shape to the value(s) a converter returned. Sizes computed at
    run time (SymInt nodes) are 0-d int64 values."""
    if isinstance(meta, torch.Tensor):
        return Value(name, meta.dtype, tuple(meta.shape))
    if isinstance(meta, (int, torch.SymInt)):
        return Value(name, torch.int64, ())
    return Ref(name)


def _wrap(result: Any, meta: Any) -> Any:
    if isinstance(result, (tuple, list)):
        return tuple(None if r is None else _described(r.name, m) for r, m in zip(result, meta))
    return _described(result.name, meta)


def _constant(b: GraphBuilder, name: str, value: Any) -> Any:
    """A weight as an initializer; a subgraph (torch.cond's branches) as itself, for its converter."""
    return value if isinstance(value, torch.fx.GraphModule) else b.initializer(name, value)


def convert_nodes(b: GraphBuilder, gm: torch.fx.GraphModule, env: dict[torch.fx.Node, Any]) -> list[torch.fx.Node]:
    """Emit the ONNX of `gm`'s nodes into `b`, given its placeholders' values in `env` (filled
    in for every node); returns the nodes `gm` outputs."""
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            if node not in env:
                raise NotImplementedError(f"placeholder {node.name} has no value")
        elif node.op == "get_attr":
            env[node] = _constant(b, node.target, getattr(gm, node.target))
        elif node.op == "call_function" and node.target is operator.getitem:
            source, index = node.args
            env[node] = env[source][index]
        elif node.op == "call_function":
            args = map_arg(node.args, env.__getitem__)
            kwargs = map_arg(node.kwargs, env.__getitem__)
            try:
                env[node] = _wrap(registry.run(b, node, args, kwargs), node.meta["val"])
            except Exception as e:
                raise ConversionError(node, e) from e
        elif node.op == "output":
            results = node.args[0]
            return list(results) if isinstance(results, (tuple, list)) else [results]
        else:
            raise NotImplementedError(f"{node.op} node {node.name} inside an engine segment")
    raise NotImplementedError(f"{gm} has no output node")


def segment_to_onnx(
    gm: torch.fx.GraphModule, name: str, constants: Mapping[str, torch.Tensor], opset: int = OPSET
) -> OnnxSegment:
    """Convert `gm`; placeholders named in `constants` become initializers (weights), the large
    ones kept beside the model (converters/core/segment.py). `opset`: the target's (TrtTarget.opset)."""
    b = GraphBuilder(name, opset)
    env: dict[torch.fx.Node, Any] = {}
    for node in gm.graph.find_nodes(op="placeholder"):
        if node.target in constants:
            env[node] = _constant(b, node.target, constants[node.target])
        else:
            val = node.meta["val"]
            env[node] = b.add_input(node.name, val.dtype, val.shape)
    for out in convert_nodes(b, gm, env):
        val = out.meta["val"]
        b.add_output(env[out], out.name, val.dtype, val.shape)
    return b.segment()
