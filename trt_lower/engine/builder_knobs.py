"""The TensorRT builder's knobs users may set, as data importable without TensorRT: what
lowering_options.py checks the values against, what trt_builder.py maps them to
(docs/build-options.md has each knob's per-version availability).
"""

from __future__ import annotations

# IBuilderConfig.builder_optimization_level: 0 (fastest build) .. 5 (longest search); the
# attribute exists from 8.6 on, the oldest TensorRT trt_lower builds with.
OPTIMIZATION_LEVELS = range(6)
# trt.TacticSource members by the name users give. Every one is in the API of 8.6 and later;
# cuBLAS, cuBLASLt and cuDNN are deprecated (and off by default from 10.0), not removed.
TACTIC_SOURCES = {
    "cublas": "CUBLAS",
    "cublas_lt": "CUBLAS_LT",
    "cudnn": "CUDNN",
    "edge_mask_convolutions": "EDGE_MASK_CONVOLUTIONS",
    "jit_convolutions": "JIT_CONVOLUTIONS",
}
# IProgressMonitor (IBuilderConfig.progress_monitor) arrived in TensorRT 10.0.
PROGRESS_MONITOR_SINCE = 10
