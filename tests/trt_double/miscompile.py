"""Miscompiles planted on request, so that build-time verification and its repairs are tested on
the CPU: an ONNX graph rewritten as a faulty compiler would have built it. The double applies
`State.miscompiles` to every network it builds; on ONNX Runtime a test wraps the session maker
(`on_onnxruntime`).

- Wrong(op_type): every layer of that ONNX op type whose output stays inside the engine (is
  consumed by a fused successor, not written out) computes the negated result: a bad fusion,
  which an extra engine output at the layer (a fusion breaker) avoids.
- NaN(layer): the layer of that FX node always outputs NaN (kept eager is the only way out).
- Fp16Overflow(layer): the layer of that FX node overflows to infinity when it computes in
  float16 (kept float32, it is right).
- Flip(layer): the layer of that FX node computes the negated result (a sign lost), fused or not.
- Small(layer, share): the layer of that FX node negates its entries under `share` of its largest
  magnitude (a wrong value no comparison at the output's scale sees).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from converters.core.segment import OnnxSegment
from converters.passes.onnx_types import elem_types


@dataclass(frozen=True)
class Wrong:
    op_type: str


@dataclass(frozen=True)
class NaN:
    layer: str


@dataclass(frozen=True)
class Fp16Overflow:
    layer: str


@dataclass(frozen=True)
class Flip:
    layer: str


@dataclass(frozen=True)
class Small:
    layer: str
    share: float


Miscompile = Wrong | NaN | Fp16Overflow | Flip | Small


def _layer_results(graph: onnx.GraphProto, layer: str) -> list[str]:
    """The tensors the ONNX nodes of FX node `layer` hand on: read by another layer or output.
    (Where `layer` is a segment's input, the cast of that input is no layer of it.)"""
    inputs = {i.name for i in graph.input}
    mine = [
        n for n in graph.node if n.name.split("/")[0] == layer and not (n.op_type == "Cast" and set(n.input) <= inputs)
    ]
    made = {o for n in mine for o in n.output}
    read_outside = {i for n in graph.node if n not in mine for i in n.input}
    return [t for t in made if t in read_outside | {o.name for o in graph.output}]


def _corrupt(graph: onnx.GraphProto, tensor: str, make: Any) -> None:
    """Rename `tensor`'s producer output and compute `tensor` from it by `make(right) -> nodes`."""
    right = f"{tensor}__right"
    for node in graph.node:
        node.output[:] = [right if o == tensor else o for o in node.output]
    graph.node.extend(make(right, tensor))


def _negate_small(graph: onnx.GraphProto, t: str, share: float, elem_type: int) -> None:
    """`t` with its entries under `share` of its largest magnitude negated."""
    threshold = numpy_helper.from_array(np.array(share, helper.tensor_dtype_to_np_dtype(elem_type)), f"{t}__share")
    graph.initializer.append(threshold)
    _corrupt(
        graph,
        t,
        lambda r, t: [
            helper.make_node("Abs", [r], [f"{t}__abs"], name=f"planted/{t}/abs"),
            helper.make_node("ReduceMax", [f"{t}__abs"], [f"{t}__max"], keepdims=0, name=f"planted/{t}/max"),
            helper.make_node("Mul", [f"{t}__max", f"{t}__share"], [f"{t}__under"], name=f"planted/{t}/under"),
            helper.make_node("Less", [f"{t}__abs", f"{t}__under"], [f"{t}__small"], name=f"planted/{t}/small"),
            helper.make_node("Neg", [r], [f"{t}__neg"], name=f"planted/{t}/neg"),
            helper.make_node("Where", [f"{t}__small", f"{t}__neg", r], [t], name=f"planted/{t}"),
        ],
    )


def plant(model: onnx.ModelProto, miscompiles: Sequence[Miscompile]) -> onnx.ModelProto:
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    outputs = {o.name for o in graph.output}
    types = elem_types(model) if any(isinstance(m, (Fp16Overflow, Small)) for m in miscompiles) else {}
    for m in miscompiles:
        if isinstance(m, Wrong):
            fused = [o for n in graph.node if n.op_type == m.op_type for o in n.output if o not in outputs]
            for t in fused:
                _corrupt(graph, t, lambda r, t: [helper.make_node("Neg", [r], [t], name=f"planted/{t}")])
        elif isinstance(m, NaN):
            for t in _layer_results(graph, m.layer):
                _corrupt(
                    graph,
                    t,
                    lambda r, t: [
                        helper.make_node("Sub", [r, r], [f"{t}__zero"], name=f"planted/{t}/zero"),
                        helper.make_node("Div", [f"{t}__zero", f"{t}__zero"], [t], name=f"planted/{t}"),
                    ],
                )
        elif isinstance(m, Flip):
            for t in _layer_results(graph, m.layer):
                _corrupt(graph, t, lambda r, t: [helper.make_node("Neg", [r], [t], name=f"planted/{t}")])
        elif isinstance(m, Small):
            for t in _layer_results(graph, m.layer):
                _negate_small(graph, t, m.share, types[t])
        else:
            for t in _layer_results(graph, m.layer):
                if types.get(t) == TensorProto.FLOAT16:
                    big = numpy_helper.from_array(np.array(60000, np.float16), f"{t}__big")
                    graph.initializer.append(big)
                    _corrupt(
                        graph, t, lambda r, t: [helper.make_node("Mul", [r, f"{t}__big"], [t], name=f"planted/{t}")]
                    )
    return model


def on_onnxruntime(monkeypatch: pytest.MonkeyPatch, *miscompiles: Miscompile) -> None:
    """Every ONNX Runtime engine trt_lower builds (lowering and verification's checks alike) runs
    its segment with `miscompiles` planted."""
    from trt_lower.engine import engines, ort_session

    def session(segment: OnnxSegment, **kwargs: Any) -> Any:
        return ort_session.segment_session(OnnxSegment(plant(segment.model, miscompiles), segment.weights), **kwargs)

    monkeypatch.setattr(engines, "segment_session", session)
