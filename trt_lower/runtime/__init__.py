"""Call time only: the modules that run an engine inside the lowered graph (ONNX Runtime and
TensorRT), the input guard, output allocation and the eager ops' bindings.

In: a ready session or deserialized plan (from the build stage) and the segment's signatures.
Out: torch tensors. Knows nothing of how the ONNX was written or the engine built: it imports
only trt_lower.values. Nothing is re-exported here, so that a deployment that runs ONNX Runtime
never imports TensorRT and the other way round.
"""
