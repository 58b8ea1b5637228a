"""Matrix products. TensorRT has no integer MatMul, so all of these are float-only."""

from __future__ import annotations

import torch

from converters.core.builder import GraphBuilder, Ref, Value
from converters.core.common import float_inputs
from converters.core.registry import converter

aten = torch.ops.aten


@converter(aten.addmm.default, capability=float_inputs)
def addmm(b: GraphBuilder, bias: Value, mat1: Value, mat2: Value, *, beta: float = 1, alpha: float = 1) -> Ref:
    """addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    dtype = b.out.dtype
    if mat1.shape is not None and mat1.shape[1] == 0:
        # An empty inner dim: the product is zeros and the result beta * bias, but ONNX Runtime's
        # Gemm then returns the bias unscaled.
        product = b.op("MatMul", mat1, mat2, dtype=dtype)
        return b.op("Add", product, b.op("Mul", bias, b.const(beta, dtype), dtype=dtype), dtype=dtype)
    return b.op("Gemm", mat1, mat2, bias, alpha=float(alpha), beta=float(beta), dtype=dtype)


@converter(aten.mm.default, aten.bmm.default, aten.matmul.default, capability=float_inputs)
def matmul(b: GraphBuilder, x: Value, y: Value) -> Ref:
    """mm(Tensor self, Tensor mat2) -> Tensor; bmm(Tensor self, Tensor mat2) -> Tensor"""
    return b.op("MatMul", x, y, dtype=b.out.dtype)
