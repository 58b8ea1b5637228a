"""Stage 4b, verify: each built engine fed the inputs eager PyTorch computed for it and compared
with its eager subgraph at its precision's tolerance; a failing engine is bisected to the smallest
set of nodes that still fails, and repaired (split at the culprit, keep it float32, keep it eager)
before stitching. The same checks serve the debugging tools (trt_lower.debug) and saved models'
probes (trt_lower.deploy). Entry: `trt_lower.verify.stage.Verifier`.
"""
