"""Small helpers shared by converter families: operand promotion and capability checks."""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from converters.core.builder import GraphBuilder, Ref, Value, onnx_type
from converters.core.registry import Capability
from converters.core.target import TrtTarget

Operand = Ref | int | float | bool  # a tensor, or a Python scalar of a Scalar overload


def as_operand(b: GraphBuilder, x: Operand, dtype: torch.dtype) -> Ref:
    """`x` as an ONNX value of `dtype`: a cast tensor or a constant scalar."""
    if isinstance(x, Ref):
        return b.cast(x, dtype)
    return b.const(x, dtype)


def promoted_dtype(a: Operand, b: Operand) -> torch.dtype:
    """torch's type promotion for two operands (0-d tensors and Python scalars count less)."""

    def probe(x: Operand) -> Any:
        # Promotion looks at dtype and whether the tensor is 0-d, not at the sizes.
        return torch.empty([1] * len(x.shape), dtype=x.dtype, device="meta") if isinstance(x, Value) else x

    return torch.result_type(probe(a), probe(b))


def normalize_dim(dim: int, rank: int) -> int:
    return dim + rank if dim < 0 else dim


def nan_propagated(
    b: GraphBuilder,
    x: Ref,
    reduced: Ref,
    axes: Sequence[int],
    keepdim: bool,
    *,
    test: str = "IsNaN",
    value: float = float("nan"),
) -> Ref:
    """A float ReduceMax/ReduceMin result as torch computes it: NaN wherever the reduced slice
    holds a NaN (ONNX leaves that open; ONNX Runtime's answer depends on where the NaN sits).
    With test="IsInf", value=inf: inf wherever the slice holds an infinity (a 2-norm). `x` must
    say its dtype."""
    dtype = x.dtype
    if dtype is None:
        raise ValueError(f"nan_propagated: {x.name} has no dtype")
    hits = b.op("Cast", b.op(test, x), to=onnx_type(dtype), dtype=dtype)
    any_hit = b.op("ReduceMax", hits, axes=list(axes), keepdims=int(keepdim), dtype=dtype)
    return b.op("Where", b.op("Greater", any_hit, b.const(0, dtype)), b.const(value, dtype), reduced, dtype=dtype)


# -- capability checks -----------------------------------------------------------------------
def only_first_output_used(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    """For multi-output ops whose ONNX form yields only the first output."""
    for user in node.users:
        if getattr(user.target, "__name__", None) != "getitem" or user.args[1] != 0:
            return f"output {user.args[1] if len(user.args) > 1 else '?'} (training statistics/indices) is used"
    return None


def float_inputs(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    """Capability: TensorRT runs this op on floating-point tensors only."""
    for arg in node.all_input_nodes:
        val = arg.meta.get("val")
        if isinstance(val, torch.Tensor) and not val.dtype.is_floating_point:
            return f"TensorRT runs {node.target} on floating-point tensors only, got {val.dtype}"
    return None


def float_result(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
    """Capability: TensorRT runs this op on floating-point tensors only, and the converter casts
    every input to the node's result dtype (as torch promotes them): the result must be floating."""
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor) and not val.dtype.is_floating_point:
        return f"TensorRT runs {node.target} on floating-point tensors only, got a {val.dtype} result"
    return None


def all_of(*checks: Capability) -> Capability:
    def check(node: torch.fx.Node, trt_target: TrtTarget) -> Optional[str]:
        for c in checks:
            reason = c(node, trt_target)
            if reason:
                return reason
        return None

    # Named and described by its parts (the supported-operators page shows them).
    check.__name__ = " + ".join(c.__name__ for c in checks)
    check.__doc__ = " ".join((c.__doc__ or "").strip().split("\n")[0] for c in checks if c.__doc__)
    return check


def per_spatial_dim(xs: int | Sequence[int], n: int) -> list[int]:
    """An int-or-list pooling/conv argument expanded to `n` spatial dims."""
    xs = [xs] if isinstance(xs, int) else list(xs)
    return xs * n if len(xs) == 1 else xs
