"""New weights for a lowered module without building its engines again (LoweredModule.update_weights).

In: a LoweredModule that lower_to_trt made (it keeps its `Lowering`) and a model or state dict of
the same architecture. The graph is split and converted again with the new weights (conversion is
cheap, an engine build is not): state.py checks the new tensors against the lowered ones,
rederive.py converts, diff.py checks that every engine's ONNX differs in its weights only,
engines.py makes each engine's new module (a new ONNX Runtime session, a refitted TensorRT
engine), verify.py compares the result with eager PyTorch (verification's own check), and
update.py swaps it all in at once, or nothing. names.py runs the same derivation for a
weight-stripped artifact: which of the model's tensors, by its own names, each weight is.
"""
