"""Engine creation: TensorRT plans and ONNX Runtime sessions from a segment's ONNX bytes."""
