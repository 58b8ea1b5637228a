"""New weights for a refittable TensorRT engine (built with BuilderFlag.REFIT), from the segment's
ONNX converted with them: nothing is built again.

Version branches: 10.x and 11.x refit from the ONNX itself (OnnxParserRefitter, which knows how
its parser named and transformed each initializer), the model handed over in memory where it fits
one protobuf message, else as a file with its weights beside it; 8.6 has no ONNX refitter, and
every weight is set by its initializer's name (its parser names weights after them). Either way
TensorRT must report no missing weight before the engine is refitted, and the engine refitted is a
new one deserialized from the same plan, so the one in use keeps running until it is swapped.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import cast

import numpy as np
import tensorrt as trt
import torch

from converters.core.errors import TrtLowerError
from converters.core.segment import OnnxSegment
from trt_lower.runtime.trt_logger import LOGGER
from trt_lower.runtime.trt_module import TRTEngineModule
from trt_lower.values.segment import ConvertedSegment
from trt_lower.values.versions import parse_version


class RefitError(TrtLowerError, RuntimeError):
    """TensorRT refused to refit an engine (names the engine and TensorRT's reason)."""


def is_refittable(module: torch.nn.Module) -> bool:
    return isinstance(module, TRTEngineModule) and bool(module.engine.refittable)


def _parser_errors(parser: trt.OnnxParserRefitter) -> str:
    return "; ".join(str(parser.get_error(i).desc()) for i in range(parser.num_errors))


def _refit_from_onnx(refitter: trt.Refitter, segment: OnnxSegment) -> str | None:
    parser = trt.OnnxParserRefitter(refitter, LOGGER)
    if segment.fits_one_protobuf():
        ok = parser.refit_from_bytes(segment.to_bytes())
    else:
        with tempfile.TemporaryDirectory(prefix="trt_lower_") as tmp:
            ok = parser.refit_from_file(str(segment.save(Path(tmp) / "model.onnx")))
    return None if ok else _parser_errors(parser) or LOGGER.take_errors() or "the ONNX refitter failed"


def _refit_by_name(refitter: trt.Refitter, segment: OnnxSegment) -> str | None:
    initializers = {t.name: t for t in segment.model.graph.initializer}
    # The arrays must live until the refit: TensorRT reads them then.
    arrays = {}
    for name in refitter.get_all_weights():
        if name not in initializers:
            return f"the engine has weights '{name}', which its ONNX does not"
        arrays[name] = np.ascontiguousarray(segment.values(initializers[name]))
        if not refitter.set_named_weights(name, trt.Weights(arrays[name])):
            return LOGGER.take_errors() or f"weights '{name}' were refused"
    return None


def refit(engine: trt.ICudaEngine, segment: OnnxSegment, name: str) -> None:
    """Refit `engine` (refittable) with the weights of `segment`; RefitError naming `name` if
    TensorRT refuses, or some weight is left unset."""
    LOGGER.take_errors()
    refitter = trt.Refitter(engine, LOGGER)
    major, _ = parse_version(trt.__version__)
    problem = (_refit_from_onnx if major >= 10 else _refit_by_name)(refitter, segment)
    if problem is None:
        missing = list(refitter.get_missing_weights())
        if missing:
            problem = f"weights {', '.join(missing[:8])} were not given"
        elif not refitter.refit_cuda_engine():
            problem = LOGGER.take_errors() or "refit_cuda_engine failed"
    if problem is not None:
        raise RefitError(f"TensorRT could not refit {name}: {problem}")


def stripped_plan(module: torch.nn.Module) -> bytes | None:
    """`module`'s engine serialized without its weights (SerializationFlag.EXCLUDE_WEIGHTS, TensorRT
    10.0 and newer), for a refittable engine; None where there is no such plan."""
    major, _ = parse_version(trt.__version__)
    if major < 10 or not is_refittable(module):
        return None
    engine = cast(TRTEngineModule, module).engine
    config = engine.create_serialization_config()
    config.set_flag(trt.SerializationFlag.EXCLUDE_WEIGHTS)
    plan = engine.serialize_with_config(config)
    return None if plan is None else bytes(plan)


def refitted(module: torch.nn.Module, segment: ConvertedSegment) -> TRTEngineModule:
    """A new engine module of `module`'s plan, refitted with `segment`'s weights; its `plan` is the
    refitted engine serialized (what trt_lower.save stores)."""
    if not isinstance(module, TRTEngineModule):
        raise RefitError(f"{segment.name} is not a TensorRT engine")
    new = TRTEngineModule(
        segment.name,
        module.plan,
        segment.inputs,
        segment.outputs,
        segment.tuple_output,
        cuda_graphs=module.cuda_graphs,
        collectives=bool(segment.collectives),
    )
    refit(new.engine, segment.onnx, segment.name)
    new.plan = bytes(new.engine.serialize())
    return new
