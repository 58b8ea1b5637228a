"""Models larger than one GPU, over torch.distributed (docs/distributed.md): lowering a
tensor-parallel model on each rank lives here. Running one is spread over the layers it belongs
to, as the layering rules want (tests/test_layering.py): the per-rank artifact's record and
checks in deploy/ranks.py, the collectives' errors in runtime/collectives.py, torchrun's
environment for `trt-lower` in cli/distributed.py."""
