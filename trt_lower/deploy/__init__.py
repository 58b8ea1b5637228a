"""A lowered module as one file you ship: `save` and `load` (no model code, nothing unpickled).

In: a LoweredModule (save) or a file (load). Out: the file; or the LoweredModule rebuilt from it by
the build and stitch stages. The file is untrusted input on load, read by one module per job:
container.py (the zip, its members verified as read), manifest.py (the manifest's schema),
graph_json.py (the stitched graph as data) with operators.py and safe_ops.py (which operators it
may call, with which arguments; allocations.py, what its eager nodes may allocate per call from
sizes computed at run time), tensor_names.py (the names of the tensors it reads) and
output_classes.py (which classes its structure may name),
onnx_members.py (each engine's ONNX), artifact.py (save and load, which use them).
Entries: `trt_lower.deploy.artifact.save` and `load` (also `trt_lower.save`/`trt_lower.load`).
Nothing is re-exported here: importing one module of the stage loads only what that module needs.
"""
