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
import torch.utils._pytree as pytree
from torchao.quantization.pt2e import move_exported_model_to_eval, move_exported_model_to_train
from torchao.quantization.pt2e.observer import HistogramObserver, PerChannelMinMaxObserver
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from torchao.quantization.pt2e.quantizer import QuantizationAnnotation, QuantizationSpec, Quantizer

from converters.core.errors import TrtLowerError
from trt_lower.quantization import fp8
from trt_lower.quantization.int4 import int4_weight_only
from trt_lower.values.call import model_call
from trt_lower.values.renamed import renamed_keywords

aten = torch.ops.aten

_INT8 = dict(dtype=torch.int8, quant_min=-128, quant_max=127)
ACTIVATION = QuantizationSpec(
    observer_or_fake_quant_ctr=HistogramObserver.with_args(eps=2**-12), qscheme=torch.per_tensor_symmetric, **_INT8
)
# Axis 0: the output channels of conv and linear weights (TensorRT's per-channel axis for them).
WEIGHT = QuantizationSpec(
    observer_or_fake_quant_ctr=PerChannelMinMaxObserver.with_args(eps=2**-12),
    qscheme=torch.per_channel_symmetric,
    ch_axis=0,
    **_INT8,
)

_CONVS = frozenset({aten.conv1d.default, aten.conv2d.default, aten.conv3d.default})
_MATMULS = frozenset({aten.matmul.default, aten.mm.default, aten.bmm.default})
_ADDS = frozenset({aten.add.Tensor, aten.add_.Tensor})
# What may sit between a convolution and the residual add it feeds (folded or fused by TensorRT).
_PASS_THROUGH = frozenset(
    {
        aten.batch_norm.default,
        aten._native_batch_norm_legit_no_training.default,
        aten.relu.default,
        aten.relu_.default,
        operator.getitem,
    }
)


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
    linear/matmul and residual adds after a conv. Other observers (`activation`, `weight`) place
    the same points for another format (FP8: trt_lower/quantization/fp8.py)."""

    def __init__(self, activation: QuantizationSpec = ACTIVATION, weight: QuantizationSpec = WEIGHT) -> None:
        super().__init__()
        self.activation, self.weight = activation, weight

    def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        for node in model.graph.nodes:
            if node.op != "call_function":
                continue
            args = [a for a in node.args[:2] if isinstance(a, torch.fx.Node)]
            if node.target in _CONVS or node.target is aten.linear.default:
                _annotate(node, {args[0]: self.activation, args[1]: self.weight})
            elif node.target in _MATMULS:
                _annotate(node, dict.fromkeys(args, self.activation))
            elif node.target in _ADDS and len(args) == 2 and any(map(_from_conv, args)):
                _annotate(node, dict.fromkeys(args, self.activation))
        return model

    def validate(self, model: torch.fx.GraphModule) -> None:
        pass


class CalibrationError(TrtLowerError, ValueError):
    """Calibration data quantize() cannot observe: no batch at all, a batch of another form than
    the example inputs', or NaN/infinite values (which would make the observed ranges meaningless)."""


Batch = torch.Tensor | Sequence[Any]


def _inputs(batch: Batch, what: str, count: int | None = None) -> tuple[Any, ...]:
    """A batch's inputs: a tensor is the model's one input, a tuple or list holds them all; each
    float tensor in it finite. CalibrationError naming `what` otherwise."""
    try:
        inputs, _ = model_call(batch, name=what)
    except ValueError:
        raise CalibrationError(
            f"{what} is a {type(batch).__name__}: a batch is a tensor (the model's one input) "
            "or a tuple or list of the model's inputs"
        ) from None
    if count is not None and len(inputs) != count:
        raise CalibrationError(f"{what} holds {len(inputs)} input(s), the example inputs {count}")
    for i, t in enumerate(pytree.tree_leaves(inputs)):
        if isinstance(t, torch.Tensor) and t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise CalibrationError(
                f"{what}: its tensor {i} holds NaN or infinite values, which calibration "
                "cannot observe (the int8 scales come from the values' range)"
            )
    return inputs


# The formats quantize() writes.
DTYPES = ("int8", "fp8", "int4_weight_only")


@renamed_keywords(example_inputs="inputs")
def quantize(
    model: torch.nn.Module,
    inputs: Batch | None = None,
    calibration_batches: Iterable[Batch] = (),
    *,
    kwargs: dict[str, Any] | None = None,
    dtype: str = "int8",
    group_size: int = 128,
) -> torch.nn.Module:
    """`model` quantized for TensorRT. dtype="int8" and "fp8": captured with torch.export,
    observed on every batch of `calibration_batches`, converted to quantize / dequantize ops:
    int8 weights (`convert_pt2e`), or FP8 E4M3 (torchao's float8 ops, amax scales;
    trt_lower/quantization/fp8.py), which TensorRT runs on Ada/Hopper and newer GPUs (target
    "latest"). The example `inputs` (formerly `example_inputs=`, which warns until the next release)
    and each batch are a tensor (the model's one input, as a
    DataLoader of inputs yields them) or a tuple or list of the model's inputs. CalibrationError,
    naming the batch, for an empty set of batches, a batch of another number of inputs than the
    example's, or NaN/infinite values. kwargs: the model's keyword arguments (a dict, as
    lower_to_trt takes them), the same for the example and every batch. dtype="int4_weight_only": a copy of `model` with INT4
    linear weights, one scale per `group_size` input channels, activations float; no inputs
    needed (trt_lower/quantization/int4.py). ValueError for another `dtype`."""
    if dtype not in DTYPES:
        raise ValueError(f"quantize: dtype must be one of {DTYPES}, got {dtype!r}")
    if dtype == "int4_weight_only":
        return int4_weight_only(model, group_size)
    if inputs is None:
        raise CalibrationError(f"inputs is None: {dtype} quantization captures the model with example inputs")
    example = _inputs(inputs, "inputs")
    keywords = model_call(example, kwargs)[1]
    captured = torch.export.export(model.eval(), example, keywords).module()
    specs = (fp8.ACTIVATION, fp8.WEIGHT) if dtype == "fp8" else (ACTIVATION, WEIGHT)
    prepared = prepare_pt2e(captured, TensorRTQuantizer(*specs))
    seen = 0
    with torch.no_grad():
        for k, batch in enumerate(calibration_batches):
            prepared(*_inputs(batch, f"calibration batch {k}", len(example)), **keywords)
            seen += 1
    if not seen:
        raise CalibrationError(
            f"calibration_batches is empty: {dtype} scales need the activations' ranges from at "
            "least one batch of representative inputs"
        )
    quantized: torch.fx.GraphModule = fp8.convert(prepared) if dtype == "fp8" else convert_pt2e(prepared)
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
