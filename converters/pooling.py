"""Max/average pooling and adaptive pooling."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from converters._common import all_of, float_inputs, ints, only_first_output_used
from converters.builder import GraphBuilder, Value
from converters.registry import converter

aten = torch.ops.aten


def _pool_attrs(n: int, kernel_size: Sequence[int], stride: Sequence[int], padding: Sequence[int] | int,
                ceil_mode: bool) -> dict[str, object]:
    kernel = ints(kernel_size, n)
    pads = ints(padding, n)
    return dict(
        kernel_shape=kernel,
        strides=ints(stride, n) if stride else kernel,
        pads=pads + pads,
        ceil_mode=int(ceil_mode),
    )


def _pool(b: GraphBuilder, op_type: str, x: Value, out_shape: Sequence[int], **attrs: Any) -> Value:
    """`op_type` over the last two dims of a (N, C, H, W) or unbatched (C, H, W) input."""
    unbatched = x.rank == 3
    if unbatched:  # torch pools (C, H, W) too; ONNX needs the batch dim
        x = b.op("Unsqueeze", x, b.ints([0]), dtype=x.dtype, shape=(1, *x.shape))  # type: ignore[misc]
    y = b.op(op_type, x, dtype=x.dtype, **attrs)
    if attrs.get("ceil_mode"):
        y = _drop_window_in_padding(b, y, x, attrs, out_shape)
    return b.op("Squeeze", y, b.ints([0]), dtype=x.dtype) if unbatched else y


def _drop_window_in_padding(b: GraphBuilder, y: Value, x: Value, attrs: dict[str, Any],
                            out_shape: Sequence[int]) -> Value:
    """With ceil_mode, ONNX (and TensorRT) keep a last window that starts inside the right
    padding; torch drops it. The other windows coincide, so slice the extra one off."""
    in_shape = x.shape[2:]  # type: ignore[index]
    onnx_out = [
        -(-(i + 2 * p - k) // s) + 1
        for i, p, k, s in zip(in_shape, attrs["pads"], attrs["kernel_shape"], attrs["strides"])
    ]
    want = [int(d) for d in out_shape[-2:]]
    if onnx_out == want:
        return y
    return b.op("Slice", y, b.ints([0, 0]), b.ints(want), b.ints([2, 3]), dtype=y.dtype)


def _unit_dilation(node: torch.fx.Node) -> Optional[str]:
    dilation = node.args[4] if len(node.args) > 4 else 1
    if any(d != 1 for d in ints(dilation, 2)):  # type: ignore[arg-type]
        return "TensorRT 10 pools only with dilation 1"
    return None


@converter(
    aten.max_pool2d_with_indices.default,
    capability=all_of(float_inputs, only_first_output_used, _unit_dilation),
)
def max_pool2d_with_indices(
    b: GraphBuilder,
    x: Value,
    kernel_size: Sequence[int],
    stride: Sequence[int] = (),
    padding: Sequence[int] = (0,),
    dilation: Sequence[int] = (1,),
    ceil_mode: bool = False,
) -> tuple[Value, None]:
    """max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0,
    int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)

    Only the values: TensorRT's MaxPool has no Indices output (checked in the capability).
    """
    return _pool(b, "MaxPool", x, b.out[0].shape, **_pool_attrs(2, kernel_size, stride, padding, ceil_mode)), None


def _no_divisor_override(node: torch.fx.Node) -> Optional[str]:
    if len(node.args) > 6 and node.args[6] is not None:
        return "divisor_override has no ONNX equivalent"
    return None


@converter(aten.avg_pool2d.default, capability=all_of(float_inputs, _no_divisor_override))
def avg_pool2d(
    b: GraphBuilder,
    x: Value,
    kernel_size: Sequence[int],
    stride: Sequence[int] = (),
    padding: Sequence[int] = (0,),
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Value:
    """avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0,
    bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor"""
    attrs = _pool_attrs(2, kernel_size, stride, padding, ceil_mode)
    return _pool(b, "AveragePool", x, b.out.shape, count_include_pad=int(count_include_pad), **attrs)


def _adaptive_divisible(node: torch.fx.Node) -> Optional[str]:
    in_shape = node.args[0].meta["val"].shape[-2:]  # type: ignore[union-attr]
    out_size = node.args[1]
    for i, o in zip(in_shape, out_size):  # type: ignore[arg-type]
        if o != 1 and i % o:
            return f"adaptive pooling from {tuple(in_shape)} to {tuple(out_size)} has uneven windows"  # type: ignore[arg-type]
    return None


@converter(aten._adaptive_avg_pool2d.default, capability=all_of(float_inputs, _adaptive_divisible))
def adaptive_avg_pool2d(b: GraphBuilder, x: Value, output_size: Sequence[int]) -> Value:
    """_adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor

    Uneven windows are refused; even ones are a plain AveragePool (Global for 1x1).
    """
    if all(o == 1 for o in output_size):
        return _pool(b, "GlobalAveragePool", x, b.out.shape)
    kernel = [i // o for i, o in zip(x.shape[-2:], output_size)]  # type: ignore[index]
    return _pool(b, "AveragePool", x, b.out.shape, kernel_shape=kernel, strides=kernel)
