"""A lowered module as one file you ship: `save` and `load` (no model code, nothing unpickled).

In: a LoweredModule (save) or a file (load). Out: the file: the stitched graph as data (graph.py),
eager weights, each engine's ONNX and plans per GPU and TensorRT version (artifact.py); or the
LoweredModule rebuilt from it by the build and stitch stages.
Entries: `trt_lower.deploy.artifact.save` and `load` (also `trt_lower.save`/`trt_lower.load`).
Nothing is re-exported here: importing one module of the stage loads only what that module needs.
"""
