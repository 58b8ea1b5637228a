"""scaled_dot_product_attention, kept whole at capture and written in its math form:
softmax(q @ kᵀ * scale + mask) @ v, a boolean or causal mask added as 0 / -inf as torch does.

MatMul/Softmax/MatMul is the pattern TensorRT fuses into its attention kernels. Targets written at
opset 23 get ONNX Attention instead, which TensorRT (10.14+) maps to its own attention layer,
wherever Attention-23 computes what torch does (`_attention_23_reason`).
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np
import torch
from numpy.typing import NDArray

from converters.core.builder import GraphBuilder, Ref, Value, onnx_type
from converters.core.dims import arg_val, dim_size_scalar, input_val, node_arg
from converters.core.fold import constant_value
from converters.core.registry import converter
from converters.core.target import TrtTarget
from converters.ops.rotary import FUSED_OPSET

aten = torch.ops.aten


def _sdpa_capability(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    for i, name in enumerate(("query", "key", "value")):
        val = arg_val(node, i)
        if val is None or not val.dtype.is_floating_point:
            return f"attention with a non-floating-point {name}"
    q, k = input_val(node, 0), input_val(node, 1)
    if node_arg(node, 4, "dropout_p", 0.0):
        return "attention dropout (training)"
    mask = arg_val(node, 3, "attn_mask")
    if mask is not None and mask.dtype not in (torch.bool, q.dtype):
        return f"a {mask.dtype} attention mask for {q.dtype} queries"
    gqa = node.kwargs.get("enable_gqa") and q.shape[-3] != k.shape[-3]
    if gqa and (
        trt_target.opset < FUSED_OPSET
        or _attention_23_reason(q.shape, k.shape, input_val(node, 2).shape, bool(node_arg(node, 5, "is_causal")))
    ):
        return "grouped-query attention (heads of key/value shared by several query heads) without ONNX Attention"
    return None


def _same(a: object, b: object) -> bool:
    """Two sizes known equal: equal ints, or the same symbol."""
    return str(a) == str(b)


def _attention_23_reason(q: Sequence[object], k: Sequence[object], v: Sequence[object], causal: bool) -> str | None:
    """Why ONNX Attention-23 does not compute this call as torch does (then it is written in its
    math form), or None."""
    if not len(q) == len(k) == len(v) == 4:
        return "Attention takes (batch, heads, seq, dim) only"
    if not (_same(q[0], k[0]) and _same(k[0], v[0]) and _same(k[1], v[1])):
        return "torch broadcasts the batch (or key/value heads); Attention does not"
    hq, hk = q[1], k[1]
    if not _same(hq, hk) and not (isinstance(hq, int) and isinstance(hk, int) and hq % hk == 0):
        return "query heads are not a known multiple of key/value heads"
    if causal and not _same(q[2], k[2]):
        # Attention-23 aligns its causal mask by the cached (past) length: readers differ on
        # queries and keys of other lengths, torch aligns it top-left.
        return "causal attention over queries and keys of different lengths"
    return None


@converter(aten.scaled_dot_product_attention.default, capability=_sdpa_capability)
def scaled_dot_product_attention(
    b: GraphBuilder,
    q: Value,
    k: Value,
    v: Value,
    attn_mask: Value | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Ref:
    """scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None,
    float dropout_p=0.0, bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor"""
    if b.opset >= FUSED_OPSET and _attention_23_reason(q.shape, k.shape, v.shape, is_causal) is None:
        return _attention_23(b, q, k, v, attn_mask, is_causal, scale)
    dtype = q.dtype
    factor: Ref
    if scale is not None:
        factor = b.const(scale, dtype)
    elif isinstance(q.shape[-1], int):
        factor = b.const(1 / math.sqrt(q.shape[-1]), dtype)
    else:
        head_dim = b.cast(dim_size_scalar(b, q, q.rank - 1), dtype)
        factor = b.op("Reciprocal", b.op("Sqrt", head_dim))
    perm = list(range(k.rank))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    scores = b.op("Mul", b.op("MatMul", q, b.op("Transpose", k, perm=perm)), factor)
    minus_inf = b.const(-math.inf, dtype)
    known = None if attn_mask is None else constant_value(b, attn_mask)
    if known is not None and _masks_nothing(known):
        attn_mask = None  # e.g. transformers' mask built from torch.ones: a no-op, left out
    if is_causal:
        # Top-left aligned: query i sees keys 0..i.
        one = b.const(1, torch.int64)
        zero = b.const(0, torch.int64)
        rows = b.op("Range", zero, dim_size_scalar(b, q, q.rank - 2), one)
        cols = b.op("Range", zero, dim_size_scalar(b, k, k.rank - 2), one)
        visible = b.op("LessOrEqual", cols, b.op("Unsqueeze", rows, b.ints([1])))
        scores = b.op("Add", scores, b.op("Where", visible, b.const(0, dtype), minus_inf))
    elif attn_mask is not None:
        # As torch does, a boolean mask becomes an additive one (0 or -inf): built from
        # constants, ONNX Runtime folds it and the masking is one Add, as in the exporter's ONNX.
        bias = b.op("Where", attn_mask, b.const(0, dtype), minus_inf) if attn_mask.dtype == torch.bool else attn_mask
        scores = b.op("Add", scores, bias)
    probs = b.op("Softmax", scores, axis=-1)
    if attn_mask is not None and (known is None or _masks_a_row(known)):
        # torch's math path gives a query that sees no key zeros, not NaN. Left out where the
        # mask is known to leave every query a key, as it is without a mask.
        blind = b.op("Equal", b.op("ReduceMax", scores, axes=[-1], keepdims=1), minus_inf)
        probs = b.op("Where", blind, b.const(0, dtype), probs)
    return b.op("MatMul", probs, v, dtype=dtype)


def _attention_23(
    b: GraphBuilder, q: Value, k: Value, v: Value, attn_mask: Value | None, is_causal: bool, scale: float | None
) -> Ref:
    """ONNX Attention; GQA as torch's enable_gqa (each key/value head serves consecutive query
    heads). Without `scale`, Attention's default is torch's: 1/sqrt(head_dim)."""
    known = None if attn_mask is None else constant_value(b, attn_mask)
    if known is not None and _masks_nothing(known):
        attn_mask = None
    out = b.op(
        "Attention",
        q,
        k,
        v,
        attn_mask,
        is_causal=int(is_causal),
        scale=None if scale is None else float(scale),
        dtype=q.dtype,
    )
    if attn_mask is None or (known is not None and not _masks_a_row(known)):
        return out
    # A query that sees no key gets zeros, as from torch's math path: ONNX says so since an
    # erratum that TensorRT's attention layer may predate.
    if attn_mask.dtype == torch.bool:
        blind = b.op(
            "Not",
            b.op(
                "Cast", b.op("ReduceMax", b.cast(attn_mask, q.dtype), axes=[-1], keepdims=1), to=onnx_type(torch.bool)
            ),
        )
    else:
        blind = b.op("Equal", b.op("ReduceMax", attn_mask, axes=[-1], keepdims=1), b.const(-math.inf, q.dtype))
    return b.op("Where", blind, b.const(0, q.dtype), out, dtype=q.dtype)


def _masks_nothing(mask: NDArray[Any]) -> bool:
    return bool(mask.all()) if mask.dtype == np.bool_ else not mask.any()


def _masks_a_row(mask: NDArray[Any]) -> bool:
    """Whether some query sees no key: a row all False, or all -inf for an additive mask."""
    hidden = ~mask if mask.dtype == np.bool_ else np.isneginf(mask)
    return bool(hidden.all(axis=-1).any())
