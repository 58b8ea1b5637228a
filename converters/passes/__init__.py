"""Passes over a converted segment's ONNX: float64 narrowing, fp16, weights kept apart, the
TensorRT parser support table."""
