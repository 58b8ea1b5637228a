"""The Triton backends a saved model can be written for, apart from the exporter that imports
torch and onnx: `trt-lower triton --help` lists them without loading either."""

PLATFORMS = ("auto", "python", "tensorrt_plan", "onnxruntime_onnx")
