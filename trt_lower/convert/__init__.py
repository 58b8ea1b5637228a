"""Stage 3, convert: the split graph's engine segments -> ConvertedSegments (trt_lower.values.segment).

In: the Split from the top-level `splitter/`, the TensorRT target, precision, shape ranges and
keep_fp32. Out: per segment its ONNX (built by the top-level `converters/`, float64 narrowed,
fp16 applied, audited against the target's parser table) with its I/O signatures and notes.
Entry: `trt_lower.convert.driver.convert`.
Nothing is re-exported here: importing one module of the stage loads only what that module needs.
"""
