"""quantized_layers: each quantize node of a lowered quantized model against eager PyTorch, in
int8 codes or FP8 (E4M3) values in order, with its layer fed eager inputs.

Why per layer: a quantize rounds, and float arithmetic in another order (another kernel's
summation order; ONNX's QuantizeLinear rounds x / s where torch's quantize rounds x * (1 / s))
moves a value lying within an ulp of a rounding boundary to the neighbouring code. That is one
step, but a deep model carries it into every later layer, where it moves other values across
their boundaries: over BERT-base's 12 layers a fifth of all codes end up flipped, as many between
the eager model and the same model evaluated in float64 as between the eager model and its engine
(bench/bench_quant.py). The end-to-end error measures that sensitivity of the model, not the
lowering. The lowering's own error shows when each layer starts from eager's values: then every
code is eager's or a neighbour, and only values at a boundary differ.

INT4 weight-only models have no quantize node: their codes are the weights, dequantized group-wise
in the engine (converters/ops/int4.py). Each such dequantize is its own layer, its output read in
INT4 codes of its group's scale: a code off by any step means the engine holds another weight.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from typing import Any

import torch
from torch.ao.quantization.fx._decomposed import quantized_decomposed_lib  # noqa: F401  (defines the ops)

from converters.core.quantized import INT4_DEQUANTIZE, fp8_quantizes
from trt_lower.debug.replay import EngineNodes, Replay
from trt_lower.values.call import Inputs
from trt_lower.verify.nodes import Node

qd = torch.ops.quantized_decomposed
QUANTIZE = frozenset({qd.quantize_per_tensor.default, qd.quantize_per_tensor.tensor})
FP8 = torch.float8_e4m3fn


@dataclass(frozen=True)
class LayerCodes:
    """One quantize node's codes from its layer in an engine, fed eager inputs, against eager's:
    int8 values, or for FP8 each value's place among FP8's (neighbours one apart); or an INT4
    weight's group-wise dequantize, in INT4 codes."""

    engine: str
    node: str  # the quantize node (an INT4 weight's dequantize), as named in the captured graph
    layer: int  # how many nodes its layer has (the quantize and a dequantize of it included)
    flipped: int  # codes other than eager's
    total: int
    max_diff: int  # the largest |code - eager's code|: 1 is one step of the format


def _ancestors(node: Node) -> set[Node]:
    found: set[Node] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n not in found:
            found.add(n)
            stack.extend(n.all_input_nodes)
    return found


def _fp8_places(values: torch.Tensor) -> torch.Tensor:
    """FP8 E4M3 values' places in FP8's order: its sign-magnitude bits as a signed integer,
    neighbouring values one apart (both zeros 0)."""
    bits = values.view(torch.uint8).to(torch.int32)
    return torch.where(bits >= 128, 128 - bits, bits)


def _activation_quantizes(gm: torch.fx.GraphModule) -> list[Node]:
    """The per-tensor quantize nodes of activations (a weight's quantize is exact: torch's own)."""
    return [
        n
        for n in gm.graph.nodes
        if n.target in QUANTIZE
        or (fp8_quantizes(n) and not (isinstance(n.args[0], Node) and n.args[0].op == "get_attr"))
    ]


def quantized_layers(
    model: torch.nn.Module, lowered: torch.nn.Module, inputs: Inputs, *, kwargs: dict[str, Any] | None = None
) -> list[LayerCodes]:
    """Every per-tensor quantize node (int8; FP8: torchao's float8 quantize, a cast to
    float8_e4m3fn) of an activation that an engine of `lowered` computes, in graph order: its
    layer (the engine's nodes it depends on that no earlier quantize node depends on) converted
    and built alone on `lowered`'s backend, fed the eager values of its inputs (the earlier layers'
    dequantized values among them), its codes compared with eager's. Then every INT4 weight
    an engine dequantizes group-wise, alone, in INT4 codes of its group's scale. inputs, kwargs:
    the model's arguments, as lower_to_trt takes them."""
    replay = Replay(model, lowered, inputs, kwargs)
    owner = {n: e for e in replay.engines for n in e.nodes}
    settled: set[Node] = set()  # computed by earlier layers: their eager values are fed
    rows = []
    for q in _activation_quantizes(replay.gm):
        mine = _ancestors(q)
        engine = owner.get(q)
        if engine is not None:
            dq = next(iter(q.users))  # no engine gives int8 out: a quantize in one is read by dequantizes
            nodes = {n for n in mine | {dq} if n not in settled and owner.get(n) is engine}
            # A getitem of an earlier layer's multi-output node: its eager value is fed.
            layer = sorted(
                (n for n in nodes if n.target is not operator.getitem or n.args[0] in nodes),
                key=replay.order.__getitem__,
            )
            (out,) = replay.run(layer, [dq], f"{engine.name}_{q.name}")
            # a float, or the node of a tensor (.tensor overload, torchao's); a cast's is 1
            arg = q.args[1] if len(q.args) > 1 else 1.0
            scale: Any = replay.values[arg] if isinstance(arg, Node) else arg
            if replay.values[q].dtype == FP8:
                codes, eager = _fp8_places((out.double() / float(scale)).to(FP8)), _fp8_places(replay.values[q])
            else:
                codes, eager = (
                    torch.round(out.double() / float(scale)).to(torch.int32),
                    replay.values[q].to(torch.int32),
                )
            diff = (codes - eager).abs()
            rows.append(
                LayerCodes(
                    engine.name,
                    q.name,
                    len(layer),
                    int((diff > 0).sum()),
                    diff.numel(),
                    int(diff.max()) if diff.numel() else 0,
                )
            )
        settled |= mine | set(q.users)
    return rows + [
        _int4_codes(replay, dq, owner[dq])
        for dq in replay.gm.graph.nodes
        if str(dq.target) in INT4_DEQUANTIZE and dq in owner
    ]


def _int4_codes(replay: Replay, dq: Node, engine: EngineNodes) -> LayerCodes:
    """An INT4 weight dequantized by its engine's converter alone, against eager, in codes of the
    scale of each element's group."""
    (out,) = replay.run([dq], [dq], f"{engine.name}_{dq.name}")
    # torchao.dequantize_affine(codes, block_size, scale, ...); dequantize_per_channel_group(codes,
    # scales, zero_points, quant_min, quant_max, dtype, group_size, ...)
    args: Any = dq.args
    scale_arg, group = (args[2], args[1][-1]) if "affine" in str(dq.target) else (args[1], args[6])
    scale: Any = functools.reduce(getattr, str(scale_arg.target).split("."), replay.gm)
    step = scale.double().reshape(out.shape[0], -1).repeat_interleave(group, dim=1)
    diff = (torch.round(out.double() / step) - torch.round(replay.values[dq].double() / step)).abs()
    return LayerCodes(engine.name, dq.name, 1, int((diff > 0).sum()), diff.numel(), int(diff.max()))
