"""Stage 5, stitch: the split graph with each segment swapped for its engine -> LoweredModule.

In: the Split, the built Engines, shape ranges and size conditions (for the input guard) and the
settings (for the report). Out: the LoweredModule (lowered.py), a GraphModule whose engine_<k>
submodules run engines and whose other nodes run eagerly, with its LoweringReport.
Entry: `trt_lower.stitch.swap.stitch`.
Nothing is re-exported here: importing one module of the stage loads only what that module needs.
"""
