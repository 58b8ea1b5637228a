"""nn.Modules that run an engine segment inside the stitched graph."""
from trt_lower.runtime.ort_module import OrtEngineModule
from trt_lower.runtime.signature import EngineInputError, TensorSig

__all__ = ["EngineInputError", "OrtEngineModule", "TensorSig"]
