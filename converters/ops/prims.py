"""prims.*: the primitives torch._refs and decomposed code call (`torch._refs.mul` is prims.mul).

A prim takes operands of one shape and dtype (its caller broadcasts and promotes them), so most
prims mean exactly their ATen namesake: they share its converter and its capability check. The
prims that differ have their own converters beside their family's: prims.div (integers truncate)
in elementwise.py, the reductions (`dims=[]` reduces nothing) in reduce.py and
convert_element_type in shape.py. View prims (broadcast_in_dim, ...) never reach a converter:
torch.export refuses their aliasing outputs. prims.signbit is left out: torch's shape rule gives
it its input's dtype, its kernel bool.
"""

from __future__ import annotations

import torch

from converters.core.registry import converter, lookup
from converters.ops import activation, bitwise, elementwise, math_functions, shape  # noqa: F401  (their ATen converters)

aten = torch.ops.aten
prims = torch.ops.prims

SAME_AS_ATEN = {
    prims.add.default: aten.add.Tensor,
    prims.sub.default: aten.sub.Tensor,
    prims.mul.default: aten.mul.Tensor,
    prims.pow.default: aten.pow.Tensor_Tensor,
    prims.remainder.default: aten.remainder.Tensor,
    prims.fmod.default: aten.fmod.Tensor,
    prims.maximum.default: aten.maximum.default,
    prims.minimum.default: aten.minimum.default,
    prims.fmax.default: aten.fmax.default,
    prims.fmin.default: aten.fmin.default,
    prims.atan2.default: aten.atan2.default,
    prims.hypot.default: aten.hypot.default,
    prims.eq.default: aten.eq.Tensor,
    prims.ne.default: aten.ne.Tensor,
    prims.lt.default: aten.lt.Tensor,
    prims.le.default: aten.le.Tensor,
    prims.gt.default: aten.gt.Tensor,
    prims.ge.default: aten.ge.Tensor,
    prims.bitwise_and.default: aten.bitwise_and.Tensor,
    prims.bitwise_or.default: aten.bitwise_or.Tensor,
    prims.bitwise_xor.default: aten.bitwise_xor.Tensor,
    prims.bitwise_not.default: aten.bitwise_not.default,
    prims.where.default: aten.where.self,
    prims.cat.default: aten.cat.default,
    prims.neg.default: aten.neg.default,
    prims.abs.default: aten.abs.default,
    prims.sign.default: aten.sign.default,
    prims.isfinite.default: aten.isfinite.default,
    prims.reciprocal.default: aten.reciprocal.default,
    prims.sqrt.default: aten.sqrt.default,
    prims.rsqrt.default: aten.rsqrt.default,
    prims.exp.default: aten.exp.default,
    prims.exp2.default: aten.exp2.default,
    prims.expm1.default: aten.expm1.default,
    prims.log.default: aten.log.default,
    prims.log2.default: aten.log2.default,
    prims.log10.default: aten.log10.default,
    prims.log1p.default: aten.log1p.default,
    prims.erf.default: aten.erf.default,
    prims.erfc.default: aten.erfc.default,
    prims.sin.default: aten.sin.default,
    prims.cos.default: aten.cos.default,
    prims.tan.default: aten.tan.default,
    prims.asin.default: aten.asin.default,
    prims.acos.default: aten.acos.default,
    prims.atan.default: aten.atan.default,
    prims.sinh.default: aten.sinh.default,
    prims.cosh.default: aten.cosh.default,
    prims.tanh.default: aten.tanh.default,
    prims.asinh.default: aten.asinh.default,
    prims.acosh.default: aten.acosh.default,
    prims.atanh.default: aten.atanh.default,
    prims.floor.default: aten.floor.default,
    prims.ceil.default: aten.ceil.default,
    prims.round.default: aten.round.default,
    prims.trunc.default: aten.trunc.default,
}

for _prim, _op in SAME_AS_ATEN.items():
    _same = lookup(_op)
    if _same is None:
        raise RuntimeError(f"{_op} has no converter for {_prim} to share")
    converter(_prim, capability=_same.capability)(_same.fn)
