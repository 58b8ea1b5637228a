"""The values every stage shares, below all of them: what one stage hands the next (tensor
signatures and shape ranges, converted segments, built engines, the settings), the executors' dtype
names, version parsing, the device and stream helpers and the progress bars.

In: nothing of trt_lower (only the converters' ONNX container, `converters.core.segment`, and
their TensorRT versions). Out: plain data and small helpers; every other package imports these.
Nothing is re-exported here, so that importing one module (the runtime's signatures, say) loads
no other.
"""
