"""The machinery converters share: registry, GraphBuilder, the FX -> ONNX interpreter, helpers,
the TensorRT target."""
