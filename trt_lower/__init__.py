"""trt_lower: lower PyTorch models to TensorRT engines, with eager fallback."""
from trt_lower.accuracy import AccuracyResult, check_accuracy
from trt_lower.artifact import ArtifactError, load, save
from trt_lower.api import UnsupportedOpsError, lower_to_trt
from trt_lower.benchmark import BenchmarkResult, benchmark
from trt_lower.capture import CaptureError
from trt_lower.engine.errors import EngineBuildError
from trt_lower.lowered import LoweredModule
from trt_lower.report import LoweringReport
from trt_lower.runtime import EngineInputError
from trt_lower.spec import TensorSpec
from trt_lower import dynamo_backend

dynamo_backend.register()

__all__ = [
    "AccuracyResult",
    "ArtifactError",
    "BenchmarkResult",
    "CaptureError",
    "EngineBuildError",
    "EngineInputError",
    "LoweredModule",
    "LoweringReport",
    "TensorSpec",
    "UnsupportedOpsError",
    "benchmark",
    "check_accuracy",
    "load",
    "lower_to_trt",
    "save",
]
