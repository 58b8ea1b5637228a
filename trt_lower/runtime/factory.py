"""The runtime module of one engine segment, on the backend the lowering resolved to."""
from __future__ import annotations

from typing import Sequence

import torch

from converters.passes.weights import OnnxSegment
from trt_lower.engine.build_settings import BuildSettings
from trt_lower.runtime.ort_module import OrtEngineModule
from trt_lower.runtime.signature import TensorSig
from trt_lower.settings import LoweringSettings


def engine_module(name: str, segment: OnnxSegment, inputs: tuple[TensorSig, ...], outputs: tuple[TensorSig, ...],
                  tuple_output: bool, *, backend: str, nodes: Sequence[str],
                  settings: LoweringSettings) -> tuple[torch.nn.Module, bool | None]:
    """The module, and for TensorRT whether its engine came from the cache. `nodes` are the
    segment's FX nodes, named by an EngineBuildError when TensorRT cannot build it."""
    if backend == "onnxruntime":
        return OrtEngineModule(name, segment, inputs, outputs, tuple_output), None
    # Imports tensorrt, so only here: backend resolution has checked that it is usable.
    from trt_lower.engine.trt_engines import load_engine

    # TensorRT parses (and the cache keys on) the self-contained model, weights embedded.
    return load_engine(name, segment.to_bytes(), inputs, outputs, tuple_output, nodes=nodes,
                       build=BuildSettings(precision=settings.precision), cache_dir=settings.cache_dir,
                       cuda_graphs=settings.cuda_graphs)
