"""Stage 5, stitch: the split graph with each segment swapped for its engine -> LoweredModule.

In: the Split, the built Engines, shape ranges and size conditions (for the input guard) and the
settings (for the report). Out: the LoweredModule (lowered.py), a GraphModule whose engine_<k>
submodules run engines and whose other nodes run eagerly, with its LoweringReport.
"""
from trt_lower.stitch.graph import stitch
from trt_lower.stitch.lowered import LoweredModule

__all__ = ["LoweredModule", "stitch"]
