"""INT8 and FP8 (E4M3) quantization of PyTorch models for TensorRT's explicit quantization (Q/DQ),
with PT2E.

`quantize(model, inputs, calibration_batches, dtype="int8")` captures the model, places
observers where TensorRT fuses quantize/dequantize pairs (`TensorRTQuantizer`), calibrates them and
converts: the result computes what the TensorRT engine will (int8 or FP8 weights and activations,
float accumulation in between) and lowers with `lower_to_trt` like any module (FP8: with
trt_version="latest"). Needs torchao (the `quant` extra).

In: a model, example inputs and calibration batches. Out: the quantized module (int8: after
convert_pt2e; FP8: fp8.py's conversion), for `lower_to_trt`.
"""

from trt_lower.quantization.quantizer import CalibrationError, TensorRTQuantizer, quantize

__all__ = ["CalibrationError", "TensorRTQuantizer", "quantize"]
