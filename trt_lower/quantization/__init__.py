"""INT8 quantization of PyTorch models for TensorRT's explicit quantization (Q/DQ), with PT2E.

`quantize(model, example_inputs, calibration_batches)` captures the model, places observers where
TensorRT fuses quantize/dequantize pairs (`TensorRTQuantizer`), calibrates them and converts: the
result computes what the TensorRT engine will (int8 weights and activations, float accumulation
in between) and lowers with `lower_to_trt` like any module. Needs torchao (the `quant` extra).

In: a model, example inputs and calibration batches. Out: the quantized module (after
convert_pt2e), for `lower_to_trt`.
"""
from trt_lower.quantization.quantizer import CalibrationError, TensorRTQuantizer, quantize

__all__ = ["CalibrationError", "TensorRTQuantizer", "quantize"]
