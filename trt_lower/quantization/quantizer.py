"""A PT2E quantizer whose quantize/dequantize pairs sit where TensorRT fuses them.

TensorRT quantizes symmetrically (zero point 0, int8 in [-128, 127]): activations per tensor,
weights per output channel. It fuses a DequantizeLinear into the convolution or matmul that
reads it and a QuantizeLinear into the layer that writes it, so Q/DQ go on the inputs of
convolutions, linear layers and matmuls, and on the inputs of an add that joins a convolution's
output (a residual), which TensorRT then fuses into that convolution. NVIDIA's TensorRT
quantization guide places them the same way.
"""
from __future__ import annotations

import operator
import types
from typing import Any, Iterable, Sequence

import torch
from torchao.quantization.pt2e import move_exported_model_to_eval, move_exported_model_to_train
from torchao.quantization.pt2e.observer import HistogramObserver, PerChannelMinMaxObserver
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from torchao.quantization.pt2e.quantizer import QuantizationAnnotation, QuantizationSpec, Quantizer

aten = torch.ops.aten

_INT8 = dict(dtype=torch.int8, quant_min=-128, quant_max=127)
ACTIVATION = QuantizationSpec(observer_or_fake_quant_ctr=HistogramObserver.with_args(eps=2**-12),
                              qscheme=torch.per_tensor_symmetric, **_INT8)
# Axis 0: the output channels of conv and linear weights (TensorRT's per-channel axis for them).
WEIGHT = QuantizationSpec(observer_or_fake_quant_ctr=PerChannelMinMaxObserver.with_args(eps=2**-12),
                          qscheme=torch.per_channel_symmetric, ch_axis=0, **_INT8)

_CONVS = frozenset({aten.conv1d.default, aten.conv2d.default, aten.conv3d.default})
_MATMULS = frozenset({aten.matmul.default, aten.mm.default, aten.bmm.default})
_ADDS = frozenset({aten.add.Tensor, aten.add_.Tensor})
# What may sit between a convolution and the residual add it feeds (folded or fused by TensorRT).
_PASS_THROUGH = frozenset({aten.batch_norm.default, aten._native_batch_norm_legit_no_training.default,
                           aten.relu.default, aten.relu_.default, operator.getitem})


def _from_conv(node: Any) -> bool:
    """Whether `node` is a convolution's output, through batch norm / relu."""
    while isinstance(node, torch.fx.Node) and node.op == "call_function":
        if node.target in _CONVS:
            return True
        if node.target not in _PASS_THROUGH:
            return False
        node = node.args[0]
    return False


def _annotate(node: torch.fx.Node, inputs: dict[torch.fx.Node, QuantizationSpec]) -> None:
    node.meta["quantization_annotation"] = QuantizationAnnotation(input_qspec_map=inputs, _annotated=True)


class TensorRTQuantizer(Quantizer):  # type: ignore[misc]  # torchao has no types
    """int8, symmetric: per-tensor activations, per-channel weights, at the inputs of conv,
    linear/matmul and residual adds after a conv."""

    def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        for node in model.graph.nodes:
            if node.op != "call_function":
                continue
            args = [a for a in node.args[:2] if isinstance(a, torch.fx.Node)]
            if node.target in _CONVS or node.target is aten.linear.default:
                _annotate(node, {args[0]: ACTIVATION, args[1]: WEIGHT})
            elif node.target in _MATMULS:
                _annotate(node, dict.fromkeys(args, ACTIVATION))
            elif node.target in _ADDS and len(args) == 2 and any(map(_from_conv, args)):
                _annotate(node, dict.fromkeys(args, ACTIVATION))
        return model

    def validate(self, model: torch.fx.GraphModule) -> None:
        pass


def quantize(model: torch.nn.Module, example_inputs: Sequence[torch.Tensor],
             calibration_batches: Iterable[Sequence[torch.Tensor]]) -> torch.fx.GraphModule:
    """`model` quantized for TensorRT: captured with torch.export, observed on every batch of
    `calibration_batches` (tuples of inputs like `example_inputs`), converted to quantize /
    dequantize ops with int8 weights (`convert_pt2e`)."""
    captured = torch.export.export(model.eval(), tuple(example_inputs)).module()
    prepared = prepare_pt2e(captured, TensorRTQuantizer())
    with torch.no_grad():
        for batch in calibration_batches:
            prepared(*batch)
    quantized: torch.fx.GraphModule = convert_pt2e(prepared)
    # lower_to_trt and the accuracy checks call .eval() and then .train(model.training) to put the
    # mode back, which an exported module refuses. torchao's allow_exported_model_train_eval
    # returns None from them and leaves `training` True, so putting it back would rewrite the
    # graph's dropouts to training mode.
    quantized.train = types.MethodType(_train, quantized)  # type: ignore[method-assign]
    quantized.eval = types.MethodType(lambda self: self.train(False), quantized)  # type: ignore[method-assign]
    return quantized.eval()  # type: ignore[no-any-return]


def _train(self: torch.fx.GraphModule, mode: bool = True) -> torch.fx.GraphModule:
    if mode != self.training:
        (move_exported_model_to_train if mode else move_exported_model_to_eval)(self)
        self.training = mode
    return self
