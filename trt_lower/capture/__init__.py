"""Stage 1, capture: a model and its example inputs (or TensorSpec ranges) -> a CapturedGraph.

In: an nn.Module, fx.GraphModule or TorchScript module, and tensors/TensorSpecs. Out: the ATen FX
graph (torch.export, decomposed to core ATen with fusable ops kept whole), its weights as
constants, the shape symbols' ranges and the size conditions the graph was captured under.
Files: aten_graph.py (the entry, `capture`: the model as an ATen graph), conditions.py (size
conditions), decompositions.py, quotients.py (rounded quotients of sizes as integer division).
Entry: `trt_lower.capture.aten_graph.capture`.
Nothing is re-exported here: importing one module of the stage loads only what that module needs.
"""
