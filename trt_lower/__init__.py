"""trt_lower: lower PyTorch models to TensorRT engines, with eager fallback.

The public face: lower_to_trt (api.py), TensorSpec, the options it takes (lowering_options.py), save and load
(deploy/), check_accuracy (debug/), benchmark (benchmarking/), the torch.compile backend
(dynamo_backend.py) and `converter` for users' own ops (converters/core/user.py). lower_to_trt runs the stages, each a sub-package: capture/ -> the top-level
splitter/ -> convert/ (driving the top-level converters/) -> engine/ -> stitch/, over the shared
values/; runtime/ is what runs at call time; report/, deploy/, triton/ (serving), debug/,
benchmarking/ and cli/ are the uses.

Each public name is imported on first use (PEP 562): `import trt_lower` alone loads none of them.
"""

from __future__ import annotations

import importlib
import sys
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

# Public name -> the module that defines it.
_PUBLIC = {
    "AccuracyResult": "trt_lower.debug.accuracy",
    "ArtifactError": "trt_lower.deploy.artifact",
    "BenchmarkResult": "trt_lower.benchmarking.measure",
    "CaptureError": "trt_lower.capture.aten_graph",
    "CollectiveError": "trt_lower.runtime.collectives",
    "EagerAllocationError": "trt_lower.deploy.allocations",
    "EngineBuildError": "trt_lower.engine.errors",
    "EngineInputError": "trt_lower.values.signature",
    "LoweredModule": "trt_lower.stitch.lowered",
    "RankMismatchError": "trt_lower.deploy.ranks",
    "LoweringReport": "trt_lower.report.report",
    "Profile": "trt_lower.profile.profile",
    "ProfileError": "trt_lower.profile.measure",
    "TensorSpec": "trt_lower.values.spec",
    "TimingCacheError": "trt_lower.engine.errors",
    "UnsupportedOpsError": "trt_lower.values.errors",
    "WeightUpdateError": "trt_lower.refit.errors",
    "benchmark": "trt_lower.benchmarking.measure",
    "GraphBuilder": "converters.core.builder",
    "Value": "converters.core.builder",
    "check_accuracy": "trt_lower.debug.accuracy",
    "converter": "converters.core.user",
    "load": "trt_lower.deploy.artifact",
    "lower_to_trt": "trt_lower.api",
    "save": "trt_lower.deploy.artifact",
    "CalibrationError": "trt_lower.quantization.quantizer",
    "ConversionError": "converters.core.interpreter",
    "GenerationLimitError": "trt_lower.llm.generation",
    "IndexOutOfRangeError": "splitter.index_check",
    "InputStructureError": "trt_lower.runtime.inputs",
    "InEngineCollectivesError": "trt_lower.values.collectives",
    "LoweredMismatch": "trt_lower.testing",
    "TrtLowerError": "converters.core.errors",
    "VerificationError": "trt_lower.verify.stage",
    "WeightStreamingError": "trt_lower.runtime.streaming_budget",
}
__all__ = sorted(_PUBLIC)

if TYPE_CHECKING:
    __version__: str
    from converters.core.builder import GraphBuilder as GraphBuilder
    from converters.core.builder import Value as Value
    from converters.core.errors import TrtLowerError as TrtLowerError
    from converters.core.interpreter import ConversionError as ConversionError
    from converters.core.user import converter as converter
    from splitter.index_check import IndexOutOfRangeError as IndexOutOfRangeError
    from trt_lower.api import lower_to_trt as lower_to_trt
    from trt_lower.benchmarking.measure import BenchmarkResult as BenchmarkResult
    from trt_lower.benchmarking.measure import benchmark as benchmark
    from trt_lower.capture.aten_graph import CaptureError as CaptureError
    from trt_lower.debug.accuracy import AccuracyResult as AccuracyResult
    from trt_lower.debug.accuracy import check_accuracy as check_accuracy
    from trt_lower.deploy.allocations import EagerAllocationError as EagerAllocationError
    from trt_lower.deploy.artifact import ArtifactError as ArtifactError
    from trt_lower.deploy.artifact import load as load
    from trt_lower.deploy.artifact import save as save
    from trt_lower.deploy.ranks import RankMismatchError as RankMismatchError
    from trt_lower.engine.errors import EngineBuildError as EngineBuildError
    from trt_lower.engine.errors import TimingCacheError as TimingCacheError
    from trt_lower.llm.generation import GenerationLimitError as GenerationLimitError
    from trt_lower.profile.measure import ProfileError as ProfileError
    from trt_lower.profile.profile import Profile as Profile
    from trt_lower.quantization.quantizer import CalibrationError as CalibrationError
    from trt_lower.refit.errors import WeightUpdateError as WeightUpdateError
    from trt_lower.report.report import LoweringReport as LoweringReport
    from trt_lower.runtime.collectives import CollectiveError as CollectiveError
    from trt_lower.runtime.inputs import InputStructureError as InputStructureError
    from trt_lower.runtime.streaming_budget import WeightStreamingError as WeightStreamingError
    from trt_lower.stitch.lowered import LoweredModule as LoweredModule
    from trt_lower.testing import LoweredMismatch as LoweredMismatch
    from trt_lower.values.collectives import InEngineCollectivesError as InEngineCollectivesError
    from trt_lower.values.errors import UnsupportedOpsError as UnsupportedOpsError
    from trt_lower.values.signature import EngineInputError as EngineInputError
    from trt_lower.values.spec import TensorSpec as TensorSpec
    from trt_lower.verify.stage import VerificationError as VerificationError


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from trt_lower.values.versions import own_version

        return own_version()
    if name not in _PUBLIC:
        raise AttributeError(f"module 'trt_lower' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC, "__version__"})


# An installed trt_lower declares the `torch_dynamo_backends` entry point, which torch loads on
# first use of torch.compile(backend="trt_lower"). A source tree has no such metadata: there the
# backend is registered now, but only where torch is already imported (a script about to compile),
# so that `import trt_lower` alone (the CLI, a deployment) stays light.
if "torch" in sys.modules and "trt_lower" not in entry_points(group="torch_dynamo_backends").names:
    importlib.import_module("trt_lower.dynamo_backend").register()
