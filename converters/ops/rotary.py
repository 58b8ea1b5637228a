"""Rotary position embeddings as one op, `trt_lower::rotary_embedding`, converted to ONNX
RotaryEmbedding (opset 23; TensorRT 10.15+ maps it to its own layer).

No ATen op computes a rotary embedding: models write it as elementwise math (Llama's
`q * cos + rotate_half(q) * sin`, GPT-J's rotate-every-two). trt_lower/capture/fused_ops.py
replaces those patterns with this op, only for targets whose opset has RotaryEmbedding; it runs
eagerly too (verification, a node kept eager), computing ONNX's formula in PyTorch.
"""

from __future__ import annotations

import torch

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.dims import dim_size, input_val, shape_of
from converters.core.registry import converter
from converters.core.target import TrtTarget

# ONNX added RotaryEmbedding (and Attention, RMSNormalization) at this opset.
FUSED_OPSET = 23


@torch.library.custom_op("trt_lower::rotary_embedding", mutates_args=())
def rotary_embedding(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """`x` (batch, heads, seq, head_dim) rotated pairwise by the angles whose cosines and sines are
    `cos`/`sin` (batch or 1, seq, head_dim / 2). The pairs are the two halves of head_dim, or
    neighbours (0 with 1, 2 with 3, ...) where `interleaved`. The result is laid out in memory as
    `x` is, as the elementwise form it replaces would be."""
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        rotated = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)
    else:
        x1, x2 = x.chunk(2, dim=-1)
        rotated = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
    return torch.empty_like(x).copy_(rotated)


@rotary_embedding.register_fake
def _(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool) -> torch.Tensor:
    return torch.empty_like(x)


def _rotary_capability(node: torch.fx.Node, trt_target: TrtTarget) -> str | None:
    if trt_target.opset < FUSED_OPSET:
        return (
            f"ONNX RotaryEmbedding needs opset {FUSED_OPSET}; {trt_target.label} is written at opset {trt_target.opset}"
        )
    x = input_val(node, 0)
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return f"RotaryEmbedding of a {x.dtype} tensor"
    return None


@converter(torch.ops.trt_lower.rotary_embedding.default, capability=_rotary_capability)
def rotary(b: GraphBuilder, x: Value, cos: Value, sin: Value, interleaved: bool) -> Ref:
    """trt_lower::rotary_embedding(Tensor x, Tensor cos, Tensor sin, bool interleaved) -> Tensor

    ONNX wants the caches per batch entry: a cache shared by the batch is expanded to it."""
    if str(cos.shape[0]) != str(x.shape[0]):  # str: the same symbol is the same size
        batch = shape_of(b, [dim_size(b, x, 0), dim_size(b, cos, 1), dim_size(b, cos, 2)])
        cos, sin = (Value(b.op("Expand", c, batch).name, c.dtype, (x.shape[0], *c.shape[1:])) for c in (cos, sin))
    return b.op("RotaryEmbedding", x, cos, sin, interleaved=int(interleaved), dtype=x.dtype, shape=x.shape)
