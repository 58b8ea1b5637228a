"""Stage 4, build: ConvertedSegments -> the engine modules that run them, for both backends.

In: converted segments, the resolved backend and the settings. Out: an Engine (trt_lower.values.
segment) per segment: an ONNX Runtime session (ort_session.py) or a TensorRT plan built by the
parser and builder (trt_builder.py) or loaded from the engine cache (cache.py, trt_engines.py),
wrapped in the runtime's engine module. backend.py decides which backend runs here.
Entry: `trt_lower.engine.engines.build`.
Nothing is re-exported here: importing one module of the stage loads only what that module needs.
"""
