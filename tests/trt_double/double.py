"""The TensorRT Python API subset trt_lower uses, executed by ONNX Runtime on host memory.

Faithful where trt_lower depends on TensorRT's behaviour, and strict where a real version is:
- the version (`__version__`: $TRT_DOUBLE_VERSION, default 10.13.0) decides which enum members
  exist (8.6: no INT64/BF16 DataType and no STRONGLY_TYPED; 11.x: no EXPLICIT_BATCH and no
  FP16/BF16/INT8/FP8 builder flags: using one raises AttributeError), whether the ONNX parser
  accepts the network (8.6 needs EXPLICIT_BATCH), the highest ONNX opset it parses, and which
  ONNX it refuses: what converters/passes/trt_support.py says that version's parser refuses;
- enum members carry the real bindings' values (tests/test_trt_double.py checks them against
  tensorrt-stubs);
- a weakly typed fp16 build fails unless every layer the ONNX keeps float32 is pinned to it
  (the real build would succeed and compute those layers in fp16);
- stricter than real 10.x/11.x, which ignore it: create_network refuses the EXPLICIT_BATCH bit
  there, so a wrong version branch fails loudly;
- failures come back the TensorRT way: parse() returns False and leaves ParserErrors naming the
  node; build_serialized_network, deserialize_cuda_engine and create_timing_cache log an error
  and return None;
- 8.6 turns INT64 engine I/O into INT32: the context reads and writes int32 buffers there;
- the execution context runs the parsed ONNX with ONNX Runtime, reading inputs from and writing
  outputs to the raw addresses it was given (host memory), with shapes checked against the
  context's active optimization profile (profile 0 until `set_optimization_profile_async`, which
  refuses an index the engine lacks and, before 10.0 without PROFILE_SHARING_0806, a profile
  another context holds, and drops the shapes set, as TensorRT invalidates them);
- CUDA devices as TensorRT sees them (`set_device`, `create_stream`): an engine and its contexts
  are bound to the device current when it was deserialized, and an enqueue refuses another
  current device or a stream of another device (on a GPU: an invalid-handle or illegal-access
  error);
- an output downstream of a data-dependent op (NonZero) with a dim the input shapes leave open
  reports -1 until run; enqueueing without an IOutputAllocator for it fails; with one, the
  enqueue runs the stream's earlier work and the engine at once (TensorRT waits for the size),
  asks the allocator for the bytes (reallocate_output_async from 10.x, reallocate_output on 8.x)
  and tells it the shape before returning, and writes the data when the stream runs.
- the builder's knobs: a negative builder_optimization_level is an error that changes nothing;
  set_memory_pool_limit takes a MemoryPoolType and a size_t; set_tactic_sources refuses bits no
  TacticSource has (the default set per version: 8.6 all five, 10.0 on without cuBLAS/cuBLASLt/
  cuDNN); IProgressMonitor (10.0 and newer only) hears each build's phases and steps, and a False
  from step_complete cancels the build; a timing cache records its TensorRT version and GPU:
  another version's does not deserialize, another GPU's is refused unless ignore_mismatch.
- profiling: an engine's layers are its ONNX nodes, a pointwise node fused into the layer before
  it ("a + b"); the engine inspector describes them as the build's ProfilingVerbosity allows
  (DETAILED: JSON objects; LAYER_NAMES_ONLY, TensorRT's default: names; NONE: nothing) and takes
  only a LayerInformationFormat; an IProfiler (its __init__ called) set on a context makes each
  enqueue run the engine at once and report every layer's time (as enqueue_emits_profile does),
  and is refused inside a CUDA graph capture.
- collectives (TensorRT 11's DistCollective layer): the parser imports a DistCollective node from
  11.0 only ("No importer registered for op" before, the 10.15+ support table notwithstanding);
  `IExecutionContext.set_communicator` (11.0 on) takes a capsule, and an enqueue without one is
  refused; the collectives run over the gloo group a test registered for the capsule's address
  (trt_double/collectives.py).
A "plan" is a header (library version, profiles) followed by the ONNX bytes. `state` counts builds,
deserializations and executions, keeps the last build's settings, and holds the failure knobs
(`unsupported_ops`, `build_failure`, `miscompiles`: wrong results planted in what it builds).
"""

from __future__ import annotations

import ctypes
import hashlib
import io
import json
import os
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, TypeVar, cast, overload

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, numpy_helper

from converters.core.segment import OnnxSegment, protobuf_limit
from converters.core.target import for_installed
from converters.passes import trt_support
from converters.passes.bfloat16 import has_bfloat16, widen_bfloat16
from converters.passes.onnx_types import elem_types
from trt_double import miscompile
from trt_double.collectives import CollectiveSession, group_at, has_collectives
from trt_lower.engine.ort_session import DISABLED_OPTIMIZERS

# Under mypy each class of the double derives from its stub class, so every override is checked
# against the real signature; at run time they derive from object.
if TYPE_CHECKING:
    import tensorrt as stubs
    from typing_extensions import Buffer

    _Builder = stubs.Builder
    _BuilderFlag = stubs.BuilderFlag
    _DataType = stubs.DataType
    _Dims = stubs.Dims
    _ExecutionContextAllocationStrategy = stubs.ExecutionContextAllocationStrategy
    _IBuilderConfig = stubs.IBuilderConfig
    _ICudaEngine = stubs.ICudaEngine
    _IExecutionContext = stubs.IExecutionContext
    _IOutputAllocator = stubs.IOutputAllocator
    _IHostMemory = stubs.IHostMemory
    _ILayer = stubs.ILayer
    _ILogger = stubs.ILogger
    _ITensor = stubs.ITensor
    _INetworkDefinition = stubs.INetworkDefinition
    _IOptimizationProfile = stubs.IOptimizationProfile
    _IProgressMonitor = stubs.IProgressMonitor
    _IProfiler = stubs.IProfiler
    _EngineInspector = stubs.EngineInspector
    _ProfilingVerbosity = stubs.ProfilingVerbosity
    _LayerInformationFormat = stubs.LayerInformationFormat
    _TacticSource = stubs.TacticSource
    _ITimingCache = stubs.ITimingCache
    _MemoryPoolType = stubs.MemoryPoolType
    _NetworkDefinitionCreationFlag = stubs.NetworkDefinitionCreationFlag
    _OnnxParser = stubs.OnnxParser
    _ParserError = stubs.ParserError
    _PreviewFeature = stubs.PreviewFeature
    _ISerializationConfig = stubs.ISerializationConfig
    _OnnxParserRefitter = stubs.OnnxParserRefitter
    _SerializationFlag = stubs.SerializationFlag
    _Refitter = stubs.Refitter
    _Runtime = stubs.Runtime
    _TensorLocation = stubs.TensorLocation
    _Weights = stubs.Weights
    _Severity = stubs.ILogger.Severity
    _TensorIOMode = stubs.TensorIOMode
else:
    _Builder = _BuilderFlag = _DataType = _Dims = _IBuilderConfig = _ICudaEngine = object
    _IExecutionContext = _IHostMemory = _ILogger = _INetworkDefinition = _IOptimizationProfile = object
    _ITimingCache = _MemoryPoolType = _NetworkDefinitionCreationFlag = _OnnxParser = _ParserError = object
    _IProgressMonitor = _TacticSource = object
    _IProfiler = _EngineInspector = _ProfilingVerbosity = _LayerInformationFormat = object
    _IOutputAllocator = _ExecutionContextAllocationStrategy = _PreviewFeature = object
    _Runtime = _Severity = _TensorIOMode = _ILayer = _ITensor = object
    _OnnxParserRefitter = _Refitter = _TensorLocation = _Weights = _ISerializationConfig = _SerializationFlag = object

__version__ = os.environ.get("TRT_DOUBLE_VERSION", "10.13.0")

T = TypeVar("T")


def _version() -> tuple[int, int]:
    major, minor = __version__.split(".")[:2]
    return int(major), int(minor)


def _max_opset() -> int:
    major, minor = _version()
    if major < 10:
        return 17
    return 20 if (major, minor) < (10, 15) else 24


def _null(cls: type[T]) -> T:
    """What the bindings return for a null pointer (a failure): None, which the stubs leave out
    of these return types."""
    return cast(T, None)


def _own(obj: object, cls: type[T]) -> T:
    """The argument as the double's own class, as pybind11 would insist."""
    if not isinstance(obj, cls):
        raise TypeError(f"incompatible function arguments: expected {cls.__name__}, got {type(obj).__name__}")
    return obj


# -- enums ------------------------------------------------------------------------------------
def _member(cls: type[T], name: str) -> T:
    return _own(getattr(cls, name), cls)


class _EnumType(type):
    """Members exist only in the TensorRT versions that have them, as in the real bindings."""

    def __getattribute__(cls, name: str) -> Any:
        since, until = type.__getattribute__(cls, "_versions").get(name, (0, 1000))
        if not since <= _version()[0] < until:
            raise AttributeError(
                f"type object '{type.__getattribute__(cls, '__name__')}' has no attribute "
                f"'{name}' in TensorRT {__version__}"
            )
        return type.__getattribute__(cls, name)


class _Enum(metaclass=_EnumType):
    """An int with a name, like pybind11's enums."""

    # member -> (first major version that has it, first major version that does not)
    _versions: ClassVar[dict[str, tuple[int, int]]] = {}

    def __init__(self, value: int, name: str = "") -> None:
        self._value = value
        self._name = name

    @classmethod
    def _define(cls, **members: int) -> None:
        for name, value in members.items():
            setattr(cls, name, cls(value, name))

    @property
    def name(self) -> str:
        return self._name

    @property
    def value(self) -> int:
        return self._value

    def __int__(self) -> int:
        return self._value

    def __index__(self) -> int:
        return self._value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Enum) and type(other) is type(self) and other._value == self._value

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._value))

    def __repr__(self) -> str:
        return f"<{type(self).__name__}.{self._name}: {self._value}>"


class DataType(_Enum, _DataType):
    _versions = {"INT64": (9, 1000), "BF16": (9, 1000)}


DataType._define(FLOAT=0, HALF=1, INT8=2, INT32=3, BOOL=4, UINT8=5, FP8=6, BF16=7, INT64=8)


class TensorIOMode(_Enum, _TensorIOMode):
    pass


TensorIOMode._define(NONE=0, INPUT=1, OUTPUT=2)


class MemoryPoolType(_Enum, _MemoryPoolType):
    pass


MemoryPoolType._define(WORKSPACE=0)


class BuilderFlag(_Enum, _BuilderFlag):
    _versions = {
        "FP16": (0, 11),
        "INT8": (0, 11),
        "FP8": (0, 11),
        "BF16": (9, 11),
        "OBEY_PRECISION_CONSTRAINTS": (0, 11),
        "WEIGHT_STREAMING": (10, 1000),
    }


BuilderFlag._define(FP16=0, INT8=1, REFIT=4, TF32=6, OBEY_PRECISION_CONSTRAINTS=9, FP8=15, BF16=17, WEIGHT_STREAMING=21)


class TacticSource(_Enum, _TacticSource):
    pass


TacticSource._define(CUBLAS=0, CUBLAS_LT=1, CUDNN=2, EDGE_MASK_CONVOLUTIONS=3, JIT_CONVOLUTIONS=4)


_TACTIC_SOURCE_BITS = 5  # TacticSource's members, bits 0-4


def _default_tactic_sources() -> int:
    """10.0 turned cuBLAS, cuBLASLt and cuDNN off by default; 8.6 has all five on."""
    return 0b11000 if _version()[0] >= 10 else 0b11111


class PreviewFeature(_Enum, _PreviewFeature):
    pass


PreviewFeature._define(PROFILE_SHARING_0806=0)


class ProfilingVerbosity(_Enum, _ProfilingVerbosity):
    pass


ProfilingVerbosity._define(LAYER_NAMES_ONLY=0, NONE=1, DETAILED=2)


class LayerInformationFormat(_Enum, _LayerInformationFormat):
    pass


LayerInformationFormat._define(ONELINE=0, JSON=1)


class ExecutionContextAllocationStrategy(_Enum, _ExecutionContextAllocationStrategy):
    _versions = {"STATIC": (10, 1000), "ON_PROFILE_CHANGE": (10, 1000), "USER_MANAGED": (10, 1000)}


ExecutionContextAllocationStrategy._define(STATIC=0, ON_PROFILE_CHANGE=1, USER_MANAGED=2)


class SerializationFlag(_Enum, _SerializationFlag):
    _versions = {"EXCLUDE_WEIGHTS": (10, 1000), "EXCLUDE_LEAN_RUNTIME": (10, 1000)}


SerializationFlag._define(EXCLUDE_WEIGHTS=0, EXCLUDE_LEAN_RUNTIME=1)


class NetworkDefinitionCreationFlag(_Enum, _NetworkDefinitionCreationFlag):
    _versions = {"EXPLICIT_BATCH": (0, 11), "STRONGLY_TYPED": (9, 1000)}


NetworkDefinitionCreationFlag._define(EXPLICIT_BATCH=0, STRONGLY_TYPED=1)
_EXPLICIT_BATCH = 1 << 0
_STRONGLY_TYPED = 1 << 1
_FP16 = 1 << 0  # BuilderFlag.FP16's bit in IBuilderConfig.flags
_OBEY_PRECISION_CONSTRAINTS = 1 << 9
_TF32 = 1 << 6  # on by default, as on the Ampere-and-newer GPUs the double stands for
_REFIT = 1 << 4
_WEIGHT_STREAMING = 1 << 21


# -- logging and plain data -------------------------------------------------------------------
class ILogger(_ILogger):
    class Severity(_Enum, _Severity):
        pass

    def __init__(self) -> None:
        pass

    def log(self, severity: stubs.ILogger.Severity, msg: str) -> None:
        raise NotImplementedError("ILogger.log is pure virtual: subclass it")


ILogger.Severity._define(INTERNAL_ERROR=0, ERROR=1, WARNING=2, INFO=3, VERBOSE=4)


def _error(logger: stubs.ILogger, message: str) -> None:
    logger.log(ILogger.Severity.ERROR, message)


class Dims(_Dims):
    __hash__: ClassVar[None] = None

    def __init__(self, shape: list[int] | tuple[int, ...] = ()) -> None:
        self._dims = tuple(int(d) for d in shape)

    def __len__(self) -> int:
        return len(self._dims)

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[int, ...]: ...

    def __getitem__(self, index: int | slice) -> int | tuple[int, ...]:
        return self._dims[index]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (Dims, tuple, list)) and self._dims == _dims_of(other)

    def __repr__(self) -> str:
        return f"Dims({list(self._dims)})"


def _dims_of(shape: object) -> tuple[int, ...]:
    if isinstance(shape, Dims):
        return shape._dims
    if isinstance(shape, (tuple, list)):
        return tuple(int(d) for d in shape)
    raise TypeError(f"expected Dims, tuple or list, got {type(shape).__name__}")


class IHostMemory(_IHostMemory):
    """Bytes; the real one exposes the buffer protocol, which bytes() reads the same way."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def __bytes__(self) -> bytes:
        return self._data


@dataclass
class BuildRecord:
    """What the last build_serialized_network was given, for tests to assert on."""

    network_flags: int
    builder_flags: int
    workspace_bytes: int | None
    optimization_level: int
    profiles: list[dict[str, tuple[tuple[int, ...], ...]]]  # per optimization profile, in order
    timing_cache_entries: int
    tactic_sources: int = 0


@dataclass
class State:
    unsupported_ops: set[str] = field(default_factory=set)  # the parser rejects these ONNX ops
    # Wrong results the builder plants in the engines it builds (trt_double/miscompile.py).
    miscompiles: list[miscompile.Miscompile] = field(default_factory=list)
    build_failure: str | None = None  # every build fails with this error
    builds: int = 0
    deserializations: int = 0
    executions: int = 0
    # Executions of engines with DistCollective layers, their collectives run over a communicator.
    collective_executions: int = 0
    # IOutputAllocator calls made for data-dependent outputs (reallocate_output(_async), notify_shape).
    output_reallocations: int = 0
    shape_notifications: int = 0
    timing_cache_hits: int = 0
    # What the builds told their IProgressMonitor: ("start", phase, parent, steps), ("step", phase,
    # step), ("finish", phase).
    progress: list[tuple[Any, ...]] = field(default_factory=list)
    refits: int = 0  # engines refitted (Refitter.refit_cuda_engine that succeeded)
    last_build: BuildRecord | None = None
    # Set: CUDA does not start (a driver older than the wheel's CUDA); Builder and Runtime log it
    # and fail to construct, as pybind11 reports a null pointer.
    cuda_failure: str | None = None
    # The GPU's compute capability: plans built for another one do not deserialize.
    compute_capability: str = "8.0"
    # Execution contexts the device memory still has room for (None: no limit); 0 -> None.
    contexts_left: int | None = None
    contexts_created: int = 0
    set_input_shape_calls: int = 0
    set_tensor_address_calls: int = 0
    # Per execution: the context's active profile and how far the input shapes were from that
    # profile's opt shapes (the sum of |size - opt| over every input dim), what its tactics were timed for.
    tuned: list[tuple[int, int]] = field(default_factory=list)
    # Every logger a Builder or Runtime was given (TensorRT uses only the first).
    loggers: list[object] = field(default_factory=list)
    # Stream handle -> work enqueued on it that has not run yet (see synchronize).
    pending: dict[int, list["_Job"]] = field(default_factory=dict)
    # Stream handle -> the work recorded so far, while it is being captured.
    capturing: dict[int, list["_Job"]] = field(default_factory=dict)
    # The CUDA runtime as TensorRT sees it: each thread's current device (cudaSetDevice), and the
    # device of each stream made by `create_stream`; handle 0 (and HostDevice's handles) is the
    # current device's default stream.
    current_devices: dict[int, int] = field(default_factory=dict)
    stream_devices: dict[int, int] = field(default_factory=dict)


state = State()


def reset() -> None:
    global state
    state = State()


# -- CUDA devices and streams ----------------------------------------------------------------
def set_device(index: int) -> None:
    """cudaSetDevice: the calling thread's current device."""
    state.current_devices[threading.get_ident()] = index


def get_device() -> int:
    return state.current_devices.get(threading.get_ident(), 0)


def create_stream(device: int) -> int:
    """cudaStreamCreate on `device`: a new handle, bound to that device for good."""
    handle = (1 << 32) + len(state.stream_devices)
    state.stream_devices[handle] = device
    return handle


def stream_device(handle: int) -> int:
    return state.stream_devices.get(handle, get_device())


# -- network and parser -----------------------------------------------------------------------
class ITensor(_ITensor):
    def __init__(self, name: str, dtype: DataType) -> None:
        self.name = name
        self.dtype = dtype


class ILayer(_ILayer):
    """One per ONNX node (the real parser may make several), its outputs typed as ONNX infers
    them. Weakly typed networks (before 10.x, or without STRONGLY_TYPED) keep the per-layer
    precision and output types the application sets; a build checks them (Builder._problem)."""

    def __init__(self, node: onnx.NodeProto, outputs: list[ITensor]) -> None:
        self.name = node.name
        self.op_type = node.op_type
        self._outputs = outputs
        self._precision: DataType | None = None
        self._output_types: dict[int, DataType] = {}

    @property
    def num_outputs(self) -> int:
        return len(self._outputs)

    def get_output(self, index: int) -> ITensor:
        return self._outputs[index]

    @property  # an attribute in the stubs, a property in the bindings
    def precision(self) -> DataType:
        return self._precision or _member(DataType, "FLOAT")

    @precision.setter
    def precision(self, dtype: stubs.DataType) -> None:
        self._precision = _own(dtype, DataType)

    @property
    def precision_is_set(self) -> bool:
        return self._precision is not None

    def set_output_type(self, index: int, dtype: stubs.DataType) -> None:
        self._output_types[index] = _own(dtype, DataType)

    def output_type_is_set(self, index: int) -> bool:
        return index in self._output_types

    def get_output_type(self, index: int) -> DataType:
        return self._output_types.get(index) or _own(self._outputs[index].dtype, DataType)


def _layers(model: onnx.ModelProto) -> list[ILayer]:
    types = elem_types(model)

    def tensor(name: str) -> ITensor:
        trt_type = _TRT_TYPE.get(TensorProto.DataType.Name(types.get(name, TensorProto.UNDEFINED)), "FLOAT")
        narrow = trt_type == "INT64" and _version()[0] < 9  # 8.6 computes INT64 as INT32
        return ITensor(name, _member(DataType, "INT32" if narrow else trt_type))

    return [ILayer(node, [tensor(o) for o in node.output]) for node in model.graph.node]


class INetworkDefinition(_INetworkDefinition):
    def __init__(self, flags: int) -> None:
        self._flags = flags
        self.model: onnx.ModelProto | None = None  # set by a successful OnnxParser.parse
        # Its large weights, kept apart as a real parser keeps external data apart from the graph.
        self.weights: dict[str, Any] = {}
        self._layers: list[ILayer] = []

    @property
    def flags(self) -> int:
        return self._flags

    @property
    def num_layers(self) -> int:
        return len(self._layers)

    def get_layer(self, index: int) -> ILayer:
        return self._layers[index]


class ParserError(_ParserError):
    def __init__(self, desc: str, node: int) -> None:
        self._desc = desc
        self._node = node

    def desc(self) -> str:
        return self._desc

    def node(self) -> int:
        return self._node

    def __str__(self) -> str:
        return f"In node {self._node}: {self._desc}"


def _asymmetric(node: onnx.NodeProto, initializers: dict[str, onnx.TensorProto]) -> bool:
    """A Q/DQ node whose zero point is not all zeros (absent counts as 0)."""
    zero_point = initializers.get(node.input[2]) if len(node.input) > 2 else None
    return zero_point is not None and bool(numpy_helper.to_array(zero_point).any())


class OnnxParser(_OnnxParser):
    def __init__(self, network: stubs.INetworkDefinition, logger: stubs.ILogger) -> None:
        self._network = _own(network, INetworkDefinition)
        self._logger = logger
        self._errors: list[ParserError] = []

    def _fail(self, desc: str, node: int = -1) -> bool:
        self._errors.append(ParserError(desc, node))
        _error(self._logger, f"ModelImporter: {desc}")
        return False

    def parse(self, model: Buffer, path: str | None = None) -> bool:
        if _version()[0] < 10 and not self._network.flags & _EXPLICIT_BATCH:
            return self._fail("the ONNX parser needs a network created with the EXPLICIT_BATCH flag")
        data = bytes(model)
        if len(data) > protobuf_limit():  # as protobuf refuses a message past 2 GB
            return self._fail(
                f"Failed to parse the ONNX model: the message is {len(data)} bytes, over protobuf's "
                f"limit ({protobuf_limit()} here); give the weights beside it as external data"
            )
        try:
            proto = onnx.load_from_string(data)
            # Weights as external data, resolved next to the model file: read as arrays, not into the
            # graph (whose protobuf could not hold them past 2 GB).
            weights = _external_weights(proto, os.path.dirname(path)) if path is not None else {}
        except Exception as e:  # protobuf raises its own DecodeError
            return self._fail(f"Failed to parse the ONNX model: {e}")
        opset = max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=0)
        if opset > _max_opset():
            return self._fail(f"opset {opset} is above {_max_opset()}, the highest this parser knows")
        if _version()[0] < 9 and has_bfloat16(proto):
            return self._fail("BFLOAT16 tensors: this TensorRT has no bfloat16 (9.0+)")
        initializers = {t.name: t for t in proto.graph.initializer}
        for i, node in enumerate(proto.graph.node):
            if node.op_type in state.unsupported_ops or node.op_type == "DistCollective" and _version()[0] < 11:
                self._fail(f"No importer registered for op: {node.op_type}", i)
            elif node.op_type in ("QuantizeLinear", "DequantizeLinear") and _asymmetric(node, initializers):
                # onnx-tensorrt's QuantDequantLinear importer, word for word.
                self._fail(
                    "TensorRT only supports symmetric quantization. The zero point for the "
                    "QuantizeLinear/DequantizeLinear operator must be all zeros.",
                    i,
                )
        # What this version's parser refuses, as the support table records it.
        index = {node.name: i for i, node in enumerate(proto.graph.node)}
        for violation in trt_support.violations(proto, for_installed(*_version())):
            self._fail(violation.rule, index.get(violation.node, -1))
        if self._errors:
            return False
        self._network.model = proto
        self._network.weights = weights
        self._network._layers = _layers(proto)
        return True

    @property
    def num_errors(self) -> int:
        return len(self._errors)

    def get_error(self, index: int) -> ParserError:
        return self._errors[index]


# -- builder ----------------------------------------------------------------------------------
class IOptimizationProfile(_IOptimizationProfile):
    def __init__(self) -> None:
        self.shapes: dict[str, tuple[tuple[int, ...], ...]] = {}

    def set_shape(self, input: str, min: stubs.Dims, opt: stubs.Dims, max: stubs.Dims) -> None:
        low, best, high = (_dims_of(d) for d in (min, opt, max))
        if not len(low) == len(best) == len(high) or not all(a <= b <= c for a, b, c in zip(low, best, high)):
            raise ValueError(f"profile for '{input}' needs min <= opt <= max of one rank, got {low}, {best}, {high}")
        self.shapes[input] = (low, best, high)

    def __bool__(self) -> bool:
        return True


class ITimingCache(_ITimingCache):
    """Kernel timings of one TensorRT version on one GPU model (here: compute capability), which
    the serialized form records: another version's does not deserialize, another GPU's is refused
    by set_timing_cache unless ignore_mismatch."""

    MAGIC = b"trt_double timing cache\n"

    def __init__(self, entries: dict[str, float], version: str, compute_capability: str) -> None:
        self.entries = entries
        self.version = version
        self.compute_capability = compute_capability

    @classmethod
    def parse(cls, data: bytes) -> "ITimingCache | None":
        if not data:
            return cls({}, __version__, state.compute_capability)
        if not data.startswith(cls.MAGIC):
            return None
        try:
            blob = json.loads(data[len(cls.MAGIC) :])
            cache = cls(dict(blob["entries"]), str(blob["version"]), str(blob["compute_capability"]))
        except (ValueError, KeyError, TypeError):
            return None
        return cache if cache.version == __version__ else None

    def serialize(self) -> IHostMemory:
        blob = {"entries": self.entries, "version": self.version, "compute_capability": self.compute_capability}
        return IHostMemory(self.MAGIC + json.dumps(blob, sort_keys=True).encode())


class _ProgressMonitor(_IProgressMonitor):
    """IProgressMonitor, the base class applications derive from: 10.0 and newer (`__getattr__`)."""

    def __init__(self) -> None:
        self._initialised = True

    def phase_start(self, phase_name: str, parent_phase: str, num_steps: int) -> None:
        raise NotImplementedError("IProgressMonitor.phase_start is pure virtual: override it")

    def step_complete(self, phase_name: str, step: int) -> bool:
        raise NotImplementedError("IProgressMonitor.step_complete is pure virtual: override it")

    def phase_finish(self, phase_name: str) -> None:
        raise NotImplementedError("IProgressMonitor.phase_finish is pure virtual: override it")


def __getattr__(name: str) -> Any:
    if name == "IProgressMonitor" and _version()[0] >= 10:
        return _ProgressMonitor
    raise AttributeError(f"module 'tensorrt' has no attribute '{name}' in TensorRT {__version__}")


class IBuilderConfig(_IBuilderConfig):
    def __init__(self, logger: stubs.ILogger) -> None:
        self._logger = logger
        self.flags = _TF32
        self._optimization_level = 3
        self._pools: dict[int, int] = {}
        self._timing_cache: ITimingCache | None = None
        self._tactic_sources = _default_tactic_sources()
        self._progress_monitor: _ProgressMonitor | None = None
        self._profiling_verbosity = _member(ProfilingVerbosity, "LAYER_NAMES_ONLY")  # TensorRT's default
        self.profiles: list[IOptimizationProfile] = []
        self.preview_features: set[int] = set()

    @property
    def builder_optimization_level(self) -> int:
        return self._optimization_level

    @builder_optimization_level.setter
    def builder_optimization_level(self, level: int) -> None:
        # TensorRT's API check: a negative level is an error and changes nothing; above the
        # highest (5) it builds as at 5.
        if level < 0:
            _error(self._logger, f"IBuilderConfig::setBuilderOptimizationLevel: level {level} must be >= 0")
            return
        self._optimization_level = level

    @property
    def profiling_verbosity(self) -> ProfilingVerbosity:
        return self._profiling_verbosity

    @profiling_verbosity.setter
    def profiling_verbosity(self, verbosity: stubs.ProfilingVerbosity) -> None:
        self._profiling_verbosity = _own(verbosity, ProfilingVerbosity)

    @property
    def progress_monitor(self) -> _ProgressMonitor:
        self._progress_monitor_api()
        return self._progress_monitor if self._progress_monitor is not None else _null(_ProgressMonitor)

    @progress_monitor.setter
    def progress_monitor(self, monitor: stubs.IProgressMonitor) -> None:
        self._progress_monitor_api()
        own = _own(monitor, _ProgressMonitor)
        if not getattr(own, "_initialised", False):  # pybind11 refuses a trampoline never initialised
            raise TypeError(f"{type(own).__name__}.__init__() must be called when overriding __init__")
        self._progress_monitor = own

    def _progress_monitor_api(self) -> None:
        if _version()[0] < 10:
            raise AttributeError(
                f"'tensorrt.IBuilderConfig' object has no attribute 'progress_monitor' in TensorRT {__version__}"
            )

    def set_memory_pool_limit(self, pool: stubs.MemoryPoolType, pool_size: int) -> None:
        pool = _own(pool, MemoryPoolType)
        if not isinstance(pool_size, int) or pool_size < 0:  # a size_t: pybind11 refuses anything else
            raise TypeError(f"set_memory_pool_limit(): incompatible function arguments: pool_size={pool_size!r}")
        self._pools[int(pool)] = pool_size

    def set_tactic_sources(self, tactic_sources: int) -> bool:
        """False (and an error) for a bit no TacticSource member has, as TensorRT's API check does."""
        if not isinstance(tactic_sources, int) or tactic_sources < 0:
            raise TypeError(f"set_tactic_sources(): incompatible function arguments: {tactic_sources!r}")
        if tactic_sources >> _TACTIC_SOURCE_BITS:
            _error(self._logger, f"IBuilderConfig::setTacticSources: invalid tactic sources {tactic_sources:#x}")
            return False
        self._tactic_sources = tactic_sources
        return True

    def get_tactic_sources(self) -> int:
        return self._tactic_sources

    def set_flag(self, flag: stubs.BuilderFlag) -> None:
        self.flags |= 1 << int(flag)

    def clear_flag(self, flag: stubs.BuilderFlag) -> None:
        self.flags &= ~(1 << int(flag))

    def set_preview_feature(self, feature: stubs.PreviewFeature, enable: bool) -> None:
        if enable:
            self.preview_features.add(int(feature))
        else:
            self.preview_features.discard(int(feature))

    def create_timing_cache(self, serialized_timing_cache: Buffer) -> ITimingCache:
        cache = ITimingCache.parse(bytes(serialized_timing_cache))
        if cache is None:
            _error(self._logger, "Failed to deserialize the timing cache: bad magic or corrupted data")
            return _null(ITimingCache)
        return cache

    def set_timing_cache(self, cache: stubs.ITimingCache, ignore_mismatch: bool) -> bool:
        own = _own(cache, ITimingCache)
        if own.compute_capability != state.compute_capability and not ignore_mismatch:
            _error(
                self._logger,
                f"IBuilderConfig::setTimingCache: the timing cache was made for a device of compute capability "
                f"{own.compute_capability}, this one is {state.compute_capability}",
            )
            return False
        self._timing_cache = own
        return True

    def get_timing_cache(self) -> ITimingCache:
        return self._timing_cache if self._timing_cache is not None else _null(ITimingCache)

    def add_optimization_profile(self, profile: stubs.IOptimizationProfile) -> int:
        """-1 (and an error) for an invalid profile: here, one that sets no shape at all."""
        own = _own(profile, IOptimizationProfile)
        if not own.shapes:
            _error(self._logger, "IBuilderConfig::addOptimizationProfile: the profile is not valid")
            return -1
        self.profiles.append(own)
        return len(self.profiles) - 1


def _static_shape(value: onnx.ValueInfoProto) -> tuple[int, ...]:
    """-1 for a dim without a fixed size, as TensorRT reports it."""
    return tuple(d.dim_value if d.HasField("dim_value") else -1 for d in value.type.tensor_type.shape.dim)


def _graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    initializers = {i.name for i in model.graph.initializer}
    return [v for v in model.graph.input if v.name not in initializers]


_PLAN_MAGIC = b"trt_double plan\n"


def _external_weights(proto: onnx.ModelProto, directory: str) -> dict[str, Any]:
    """The values of `proto`'s external initializers, read from their files beside the model as
    arrays, each initializer declared as trt_lower keeps its weights apart (OnnxSegment)."""
    segment = OnnxSegment(proto)
    for tensor in proto.graph.initializer:
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        where = {entry.key: entry.value for entry in tensor.external_data}
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
        array = np.fromfile(
            os.path.join(directory, where["location"]),
            dtype=dtype,
            count=int(np.prod(tensor.dims, dtype=np.int64)),
            offset=int(where.get("offset", 0)),
        )
        tensor.CopyFrom(segment.initializer(tensor.name, array.reshape(tuple(tensor.dims))))
    return segment.weights


def _plan(
    segment: OnnxSegment,
    profiles: list[dict[str, Any]],
    sharing: bool,
    refittable: bool,
    stripped: bool = False,
    *,
    streaming: bool = False,
    verbosity: int = 0,
) -> IHostMemory:
    """The plan: a header, the graph, then its large weights at the offsets the header gives;
    `stripped` (serialized with EXCLUDE_WEIGHTS): every weight's values left out, as zeros."""
    if stripped:
        segment = _zeroed(segment)
    graph = segment.graph_bytes("")
    header = json.dumps(
        {
            "version": __version__,
            "compute_capability": state.compute_capability,
            "profiles": profiles,
            "profile_sharing": sharing,
            "refittable": refittable,
            "stripped": stripped,
            "weight_streaming": streaming,
            "profiling_verbosity": verbosity,
            "graph_bytes": len(graph),
            "weights": {} if stripped else segment.layout(),
        }
    ).encode()
    weights = io.BytesIO()
    segment.write_weights(weights)
    return IHostMemory(_PLAN_MAGIC + len(header).to_bytes(4, "big") + header + graph + weights.getvalue())


def _zeroed(segment: OnnxSegment) -> OnnxSegment:
    """`segment` with every weight declared (name, type, dims) and no values: a stripped plan's
    graph, the size of the graph alone; the values come from a refit."""
    model = onnx.ModelProto()
    model.CopyFrom(segment.model)
    for tensor in model.graph.initializer:
        if tensor.data_type in _WEIGHT_TYPES:
            tensor.CopyFrom(TensorProto(name=tensor.name, data_type=tensor.data_type, dims=tensor.dims))
    return OnnxSegment(model)


def _unstripped(model: bytes) -> tuple[bytes, dict[str, Any]]:
    """A stripped plan's graph with zeros for its weights (kept apart), until a refit sets them."""
    proto = onnx.load_from_string(model)
    segment = OnnxSegment(proto)
    for tensor in proto.graph.initializer:
        if tensor.data_type in _WEIGHT_TYPES:
            dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
            tensor.CopyFrom(segment.initializer(tensor.name, np.zeros(tuple(tensor.dims), dtype)))
    return bytes(proto.SerializeToString()), segment.weights


def _plan_weights(graph: bytes, blob: memoryview, layout: dict[str, list[int]]) -> dict[str, Any]:
    """A plan's weights: arrays over its bytes, at the offsets its header gives."""
    tensors = {t.name: t for t in onnx.load_from_string(graph).graph.initializer}
    weights = {}
    for name, (offset, length) in layout.items():
        tensor = tensors[name]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
        weights[name] = np.frombuffer(blob, dtype=dtype, count=length // dtype.itemsize, offset=offset).reshape(
            tuple(tensor.dims)
        )
    return weights


def _session(segment: OnnxSegment) -> ort.InferenceSession | CollectiveSession:
    """What runs an engine's network: ONNX Runtime, in stages cut at its collectives where it has
    DistCollective layers (trt_double/collectives.py)."""
    return CollectiveSession(segment, _ort_session) if has_collectives(segment.model) else _ort_session(segment)


def _ort_session(segment: OnnxSegment) -> ort.InferenceSession:
    """ONNX Runtime over the network, its large weights handed over apart (no protobuf limit).
    bfloat16 is computed in float32 (no bfloat16 kernels on the CPU); Q/DQ are not fused (TensorRT
    quantizes only where they say; ONNX Runtime's QDQ fusions would quantize more), nor a Gemm's
    Transposes (ONNX Runtime's fusion drops graph outputs: engine/ort_session.py)."""
    runnable = widen_bfloat16(segment)
    options = ort.SessionOptions()
    if runnable.weights:
        values = [ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(a)) for a in runnable.weights.values()]
        options.add_external_initializers(list(runnable.weights), values)
    return ort.InferenceSession(
        runnable.model.SerializeToString(),
        options,
        providers=["CPUExecutionProvider"],
        disabled_optimizers=DISABLED_OPTIMIZERS,
    )


def _use_logger(logger: stubs.ILogger) -> None:
    if state.cuda_failure is not None:
        _error(logger, state.cuda_failure)
        raise TypeError("pybind11::init(): factory function returned nullptr")
    if all(logger is not known for known in state.loggers):
        state.loggers.append(logger)


def _unpinned_float32(network: INetworkDefinition, config: IBuilderConfig) -> str | None:
    """With FP16 on a weakly typed network TensorRT may run any layer in fp16: a layer the ONNX
    keeps float32 stays so only with its precision and output types set to FLOAT and
    OBEY_PRECISION_CONSTRAINTS (the real build would not fail, its results would overflow)."""
    float32 = _member(DataType, "FLOAT")
    for layer in network._layers:
        outputs = [j for j in range(layer.num_outputs) if layer.get_output(j).dtype == float32]
        pinned = (
            layer.precision_is_set
            and layer.precision == float32
            and all(layer.output_type_is_set(j) and layer.get_output_type(j) == float32 for j in outputs)
        )
        if outputs and not pinned:
            return (
                f"trt_double: a weakly typed fp16 build may run layer '{layer.name}' ({layer.op_type}) in fp16, "
                "which the ONNX keeps float32: set its precision and output types to FLOAT"
            )
    if not config.flags & _OBEY_PRECISION_CONSTRAINTS and any(layer.precision_is_set for layer in network._layers):
        return "trt_double: per-layer precisions without OBEY_PRECISION_CONSTRAINTS are only preferences"
    return None


def _report_progress(monitor: _ProgressMonitor | None, layers: int) -> bool:
    """Tell `monitor` a build's phases as TensorRT does (a top phase, a nested one with a step per
    layer); False when step_complete asked to stop (the phases still finish)."""
    if monitor is None:
        return True
    go_on = True
    monitor.phase_start("Building engine", None, 1)  # type: ignore[arg-type]  # the stub says str; TensorRT passes None
    state.progress.append(("start", "Building engine", None, 1))
    monitor.phase_start("Tactic selection", "Building engine", max(layers, 1))
    state.progress.append(("start", "Tactic selection", "Building engine", max(layers, 1)))
    for step in range(max(layers, 1)):
        state.progress.append(("step", "Tactic selection", step))
        if not monitor.step_complete("Tactic selection", step):
            go_on = False
            break
    for phase in ("Tactic selection", "Building engine"):
        monitor.phase_finish(phase)
        state.progress.append(("finish", phase))
    return go_on


class Builder(_Builder):
    def __init__(self, logger: stubs.ILogger) -> None:
        self._logger = logger
        _use_logger(logger)

    def create_network(self, flags: int = 0) -> INetworkDefinition:
        if _version()[0] >= 10 and flags & _EXPLICIT_BATCH:
            raise ValueError(
                f"trt_double: TensorRT {__version__} ignores EXPLICIT_BATCH (deprecated in 10, "
                "removed in 11): use create_network(0)"
            )
        return INetworkDefinition(flags)

    def create_builder_config(self) -> IBuilderConfig:
        return IBuilderConfig(self._logger)

    def create_optimization_profile(self) -> IOptimizationProfile:
        return IOptimizationProfile()

    def _problem(self, network: INetworkDefinition, config: IBuilderConfig) -> str | None:
        if network.model is None:
            return "the network is empty (was the ONNX parsed?)"
        if state.build_failure is not None:
            return state.build_failure
        if network.flags & _STRONGLY_TYPED and config.flags & _FP16:
            return "precision builder flags (FP16) are not allowed on a strongly typed network"
        if config.flags & _WEIGHT_STREAMING and not (_version()[0] >= 11 or network.flags & _STRONGLY_TYPED):
            return "WEIGHT_STREAMING needs a strongly typed network (NetworkDefinitionCreationFlag.STRONGLY_TYPED)"
        if config.flags & _FP16:
            problem = _unpinned_float32(network, config)
            if problem is not None:
                return problem
        if has_bfloat16(network.model) and float(state.compute_capability) < 8.0:
            return f"bfloat16 needs compute capability 8.0 or newer, this GPU has {state.compute_capability}"
        inputs = {v.name: _static_shape(v) for v in _graph_inputs(network.model)}
        for profile in config.profiles:
            for name, (low, best, high) in profile.shapes.items():
                if name not in inputs:
                    return f"optimization profile names '{name}', which is not a network input"
                static = inputs[name]
                if len(low) != len(static) or any(
                    s != -1 and not a == b == c == s for s, a, b, c in zip(static, low, best, high)
                ):
                    return f"optimization profile for '{name}' {low}..{high} does not fit its dims {static}"
        dynamic = [n for n, s in inputs.items() if -1 in s]
        if dynamic and not config.profiles:
            return f"network has dynamic inputs {dynamic} but no optimization profile"
        for i, profile in enumerate(config.profiles):
            missing = [n for n in dynamic if n not in profile.shapes]
            if missing:
                return f"optimization profile {i} has no shapes for dynamic inputs {missing}"
        try:
            _session(OnnxSegment(network.model, network.weights))
        except Exception as e:  # ONNX Runtime raises its own exception types
            return f"could not build the network: {e}"
        return None

    def _time_layers(self, model: onnx.ModelProto, cache: ITimingCache | None) -> None:
        """Add an entry per distinct layer configuration (node without its names), as tactic timing would."""
        if cache is None:
            return
        for node in model.graph.node:
            anonymous = onnx.NodeProto()
            anonymous.CopyFrom(node)
            anonymous.ClearField("name")
            anonymous.ClearField("input")
            anonymous.ClearField("output")
            key = hashlib.sha256(anonymous.SerializeToString()).hexdigest()[:16]
            if key in cache.entries:
                state.timing_cache_hits += 1
            cache.entries[key] = 1.0

    def build_serialized_network(self, network: stubs.INetworkDefinition, config: stubs.IBuilderConfig) -> IHostMemory:
        net, cfg = _own(network, INetworkDefinition), _own(config, IBuilderConfig)
        problem = self._problem(net, cfg)
        if problem is not None or net.model is None:
            _error(self._logger, f"Builder: {problem}")
            return _null(IHostMemory)
        profiles = [dict(p.shapes) for p in cfg.profiles]
        state.builds += 1
        state.last_build = BuildRecord(
            network_flags=net.flags,
            builder_flags=cfg.flags,
            workspace_bytes=cfg._pools.get(0),
            optimization_level=cfg.builder_optimization_level,
            profiles=profiles,
            timing_cache_entries=len(cfg._timing_cache.entries) if cfg._timing_cache else 0,
            tactic_sources=cfg._tactic_sources,
        )
        if not _report_progress(cfg._progress_monitor, len(net.model.graph.node)):
            _error(self._logger, "Builder: the build was cancelled by the IProgressMonitor")
            return _null(IHostMemory)
        self._time_layers(net.model, cfg._timing_cache)
        # Before 10.0 a profile serves one execution context at a time unless the engine was built
        # with PROFILE_SHARING_0806 (on by default from 10.0).
        sharing = _version()[0] >= 10 or int(PreviewFeature.PROFILE_SHARING_0806) in cfg.preview_features
        segment = OnnxSegment(
            miscompile.plant(net.model, state.miscompiles) if state.miscompiles else net.model, net.weights
        )
        return _plan(
            segment,
            profiles,
            sharing,
            bool(cfg.flags & _REFIT),
            streaming=bool(cfg.flags & _WEIGHT_STREAMING),
            verbosity=int(cfg.profiling_verbosity),
        )


# -- runtime ----------------------------------------------------------------------------------
# ONNX element type name -> TensorRT DataType name
_TRT_TYPE = {
    "FLOAT": "FLOAT",
    "FLOAT16": "HALF",
    "BFLOAT16": "BF16",
    "INT8": "INT8",
    "UINT8": "UINT8",
    "INT32": "INT32",
    "INT64": "INT64",
    "BOOL": "BOOL",
}
_NUMPY = {
    "FLOAT": np.float32,
    "BF16": ml_dtypes.bfloat16,
    "HALF": np.float16,
    "INT8": np.int8,
    "UINT8": np.uint8,
    "INT32": np.int32,
    "INT64": np.int64,
    "BOOL": np.bool_,
}


@dataclass(frozen=True)
class _Tensor:
    name: str
    mode: str  # "INPUT" or "OUTPUT"
    onnx_type: str  # what ONNX Runtime reads and writes
    engine_type: str  # what the engine's I/O buffers hold
    shape: tuple[int, ...]


def _host_array(address: int, dtype: type, shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """A numpy view of the memory at `address` (host memory: this is the double)."""
    count = int(np.prod(shape, dtype=np.int64))
    nbytes = count * np.dtype(dtype).itemsize
    memory = memoryview((ctypes.c_uint8 * nbytes).from_address(address))
    return np.frombuffer(memory, dtype=dtype, count=count).reshape(shape)


# Ops whose output shapes depend on the data, not only on the input shapes.
_DATA_DEPENDENT_OPS = {"NonZero", "Unique", "Compress"}


def _data_dependent_outputs(model: onnx.ModelProto) -> frozenset[str]:
    """Graph outputs computed from a data-dependent op's result with a dim not fixed by the
    graph: their size is known only once the engine has run."""
    tainted: set[str] = set()
    for node in model.graph.node:  # topologically sorted
        if node.op_type in _DATA_DEPENDENT_OPS or tainted.intersection(node.input):
            tainted.update(node.output)
    return frozenset(v.name for v in model.graph.output if v.name in tainted and -1 in _static_shape(v))


# Pointwise ops TensorRT fuses into the layer that makes their input (here: when it is the node
# just before, and nothing else reads that value): the fused layer is named "a + b".
_FUSED_POINTWISE = {"Relu", "Sigmoid", "Tanh", "Add", "Sub", "Mul", "Div", "Erf", "Gelu", "Clip"}


@dataclass(frozen=True)
class _EngineLayer:
    name: str
    layer_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def _engine_layers(model: onnx.ModelProto) -> list[_EngineLayer]:
    """The engine's layers, as TensorRT names them: one per ONNX node (named after it; an unnamed
    one "(Unnamed Layer* i) [op]"), a pointwise node fused into the layer before it."""
    readers: dict[str, int] = {}
    for node in model.graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    graph_outputs = {v.name for v in model.graph.output}
    layers: list[_EngineLayer] = []
    for i, node in enumerate(model.graph.node):
        name = node.name or f"(Unnamed Layer* {i}) [{node.op_type}]"
        last = layers[-1] if layers else None
        fused = (
            last is not None
            and node.op_type in _FUSED_POINTWISE
            and any(v in last.outputs and readers[v] == 1 and v not in graph_outputs for v in node.input)
        )
        if last is not None and fused:
            inputs = last.inputs + tuple(v for v in node.input if v not in last.outputs)
            layers[-1] = _EngineLayer(f"{last.name} + {name}", last.layer_type, inputs, tuple(node.output))
        else:
            layers.append(_EngineLayer(name, node.op_type, tuple(node.input), tuple(node.output)))
    return layers


class IProfiler(_IProfiler):
    """The base class applications derive from; they must call its __init__ (pybind11's trampoline)."""

    def __init__(self) -> None:
        self._initialised = True

    def report_layer_time(self, layer_name: str, ms: float) -> None:
        raise NotImplementedError("IProfiler.report_layer_time is pure virtual: override it")


class EngineInspector(_EngineInspector):
    """The layers as the engine was built to describe them (its ProfilingVerbosity): with DETAILED
    each layer's JSON object, with LAYER_NAMES_ONLY its name, with NONE nothing. ONELINE text is
    not doubled: trt_lower reads JSON."""

    def __init__(self, engine: ICudaEngine) -> None:
        self._engine = engine

    def _describe(self, layer: _EngineLayer, index: int) -> Any:
        verbosity = self._engine._verbosity.name
        if verbosity == "DETAILED":
            return {"Name": layer.name, "LayerType": layer.layer_type, "Inputs": layer.inputs, "Outputs": layer.outputs}
        return layer.name if verbosity == "LAYER_NAMES_ONLY" else str(index)

    def _json(self, format: stubs.LayerInformationFormat) -> None:
        if _own(format, LayerInformationFormat) != _member(LayerInformationFormat, "JSON"):
            raise NotImplementedError("trt_double: only LayerInformationFormat.JSON is doubled")

    def get_engine_information(self, format: stubs.LayerInformationFormat) -> str:
        self._json(format)
        if self._engine._verbosity.name == "NONE":
            return "{}"
        layers = [self._describe(layer, i) for i, layer in enumerate(self._engine._layers)]
        bindings = list(self._engine._tensors)
        return json.dumps({"Layers": layers, "Bindings": bindings})

    def get_layer_information(self, layer_index: int, format: stubs.LayerInformationFormat) -> str:
        self._json(format)
        layers = self._engine._layers
        if not 0 <= layer_index < len(layers):
            _error(
                self._engine._logger, f"IEngineInspector::getLayerInformation: layer index {layer_index} out of range"
            )
            return ""
        if self._engine._verbosity.name == "NONE":
            return ""
        return json.dumps(self._describe(layers[layer_index], layer_index))


class IOutputAllocator(_IOutputAllocator):
    """The base class applications derive from (its methods are theirs to write)."""

    def __init__(self) -> None:
        pass


ALIGNMENT = 256  # bytes: TensorRT's documented alignment of I/O tensor addresses


class _StreamableWeights(_ICudaEngine):
    """Weight streaming as TensorRT has it (10.0 on): an engine built with WEIGHT_STREAMING keeps
    its streamable weights (here: every float or int8 initializer of two or more dims) in host
    memory and holds `budget` bytes of them on the device. Strict where TensorRT is:
    - the budget is set on the engine before its execution contexts exist: set while one is alive
      (or on an engine built without the flag) it logs an error and stays as it was;
    - 10.0 has only the first API (weight_streaming_budget: -1 streams nothing, 0 lets TensorRT
      choose, else a value in [minimum_weight_streaming_budget, streamable_weights_size - 1]);
      10.1 adds weight_streaming_budget_v2 (any value >= 0; streamable_weights_size or more, the
      default, streams nothing), get_weight_streaming_automatic_budget and
      weight_streaming_scratch_memory_size, and deprecates the first, whose mixing with the
      second is undefined (the double refuses it); the double drops the first on 11.x, so that
      trt_lower cannot lean on a deprecated API there.
    """

    _logger: stubs.ILogger
    _segment: OnnxSegment
    _streaming = False
    # The budget each API set last (None: never set): TensorRT keeps one, the double tells them apart.
    _budget_v1: int | None = None
    _budget_v2: int | None = None

    def _stream_weights(self, streaming: bool) -> None:
        self._streaming = streaming

    @property
    def _live_contexts(self) -> weakref.WeakSet[object]:
        contexts: weakref.WeakSet[object] = self.__dict__.setdefault("_contexts", weakref.WeakSet())
        return contexts

    def _weight_sizes(self) -> list[int]:
        if not self._streaming:
            return []
        return [
            int(np.prod(t.dims, dtype=np.int64)) * onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
            for t in self._segment.model.graph.initializer
            if t.data_type in _WEIGHT_TYPES and len(t.dims) >= 2
        ]

    def _refuse_budget(self, api: str, value: int) -> str | None:
        if not self._streaming:
            return f"ICudaEngine::{api}: the engine was not built with BuilderFlag::kWEIGHT_STREAMING"
        if len(self._live_contexts):
            return f"ICudaEngine::{api}: the budget cannot change while execution contexts of the engine exist"
        if (self._budget_v1 if api.endswith("V2") else self._budget_v2) is not None:
            return f"ICudaEngine::{api}: mixing the V1 and V2 weight streaming APIs is undefined behaviour"
        return None

    def _since(self, version: tuple[int, int], until: int, name: str) -> None:
        if not version <= _version() < (until, 0):
            raise AttributeError(f"'ICudaEngine' has no attribute '{name}' in TensorRT {__version__}")

    @property
    def streamable_weights_size(self) -> int:
        self._since((10, 0), 1000, "streamable_weights_size")
        return sum(self._weight_sizes())

    @property
    def weight_streaming_budget_v2(self) -> int:
        self._since((10, 1), 1000, "weight_streaming_budget_v2")
        return self.streamable_weights_size if self._budget_v2 is None else self._budget_v2

    @weight_streaming_budget_v2.setter
    def weight_streaming_budget_v2(self, budget: int) -> None:
        self._since((10, 1), 1000, "weight_streaming_budget_v2")
        problem = self._refuse_budget("setWeightStreamingBudgetV2", budget)
        if problem is None and budget < 0:
            problem = f"ICudaEngine::setWeightStreamingBudgetV2: the budget {budget} is negative"
        if problem is not None:
            _error(self._logger, problem)
            return
        self._budget_v2 = budget

    @property
    def weight_streaming_budget(self) -> int:
        self._since((10, 0), 11, "weight_streaming_budget")
        return 0 if self._budget_v1 is None else self._budget_v1

    @weight_streaming_budget.setter
    def weight_streaming_budget(self, budget: int) -> None:
        self._since((10, 0), 11, "weight_streaming_budget")
        problem = self._refuse_budget("setWeightStreamingBudget", budget)
        size, least = self.streamable_weights_size, self.minimum_weight_streaming_budget
        if problem is None and budget not in (-1, 0) and not least <= budget <= size - 1:
            problem = f"ICudaEngine::setWeightStreamingBudget: {budget} is neither -1, 0 nor in [{least}, {size - 1}]"
        if problem is not None:
            _error(self._logger, problem)
            return
        self._budget_v1 = budget

    @property
    def minimum_weight_streaming_budget(self) -> int:
        self._since((10, 0), 11, "minimum_weight_streaming_budget")
        return max(self._weight_sizes(), default=0)  # one layer's weights at a time

    def get_weight_streaming_automatic_budget(self) -> int:
        """Half the streamable weights: the double has no device memory to size it by."""
        self._since((10, 1), 1000, "get_weight_streaming_automatic_budget")
        return self.streamable_weights_size // 2

    @property
    def weight_streaming_scratch_memory_size(self) -> int:
        """Room for the largest weight in flight, while the budget streams some."""
        self._since((10, 1), 1000, "weight_streaming_scratch_memory_size")
        streaming = self.weight_streaming_budget_v2 < self.streamable_weights_size
        return max(self._weight_sizes(), default=0) if streaming else 0


class ICudaEngine(_StreamableWeights):
    def __init__(
        self,
        model: bytes,
        profiles: list[dict[str, list[list[int]]]],
        logger: stubs.ILogger,
        profile_sharing: bool = True,
        weights: dict[str, Any] | None = None,
        refittable: bool = False,
        stripped: bool = False,
        verbosity: int = 0,
    ) -> None:
        proto = onnx.load_from_string(model)
        self._verbosity = _member(ProfilingVerbosity, ("LAYER_NAMES_ONLY", "NONE", "DETAILED")[verbosity])
        self._layers = _engine_layers(proto)
        self._logger = logger
        # From a plan serialized without its weights: nothing runs until a refit has set them all.
        self._stripped = stripped
        # What serialize() writes again (a refit replaces the weights).
        self._segment = OnnxSegment(proto, weights or {})
        self._profiles_json = profiles
        self._refittable = refittable
        # Without sharing (8.6 unless built with PROFILE_SHARING_0806), the context that set
        # shapes on a profile first (or switched to it) holds it, and another's use of it fails.
        self._profile_sharing = profile_sharing
        self._profile_holders: dict[int, IExecutionContext] = {}
        # An engine is bound to the device current when it was deserialized, and so are its contexts.
        self._device = get_device()
        # ONNX Runtime has no bfloat16 kernels on the CPU: bfloat16 engine tensors are computed in
        # float32, their buffers converted on the way in and out.
        self._session = _session(OnnxSegment(proto, weights or {}))
        self._shape_cache: dict[tuple[tuple[int, ...], ...], dict[str, tuple[int, ...]]] = {}
        self._profiles = [
            {name: tuple(tuple(s) for s in shapes) for name, shapes in profile.items()} for profile in profiles
        ]
        # Their shape is -1 until the engine has run; they need an IOutputAllocator.
        self._data_dependent = _data_dependent_outputs(proto)
        # TensorRT 8.6 casts INT64 to INT32, engine I/O included.
        narrow = _version()[0] < 9
        self._tensors: dict[str, _Tensor] = {}
        for mode, values in (("INPUT", _graph_inputs(proto)), ("OUTPUT", list(proto.graph.output))):
            for v in values:
                onnx_type = _TRT_TYPE[TensorProto.DataType.Name(v.type.tensor_type.elem_type)]
                engine_type = "INT32" if narrow and onnx_type == "INT64" else onnx_type
                onnx_type = "FLOAT" if onnx_type == "BF16" else onnx_type
                self._tensors[v.name] = _Tensor(v.name, mode, onnx_type, engine_type, _static_shape(v))

    @property
    def num_io_tensors(self) -> int:
        return len(self._tensors)

    @property
    def refittable(self) -> bool:
        return self._refittable

    def serialize(self) -> IHostMemory:
        return _plan(
            self._segment,
            self._profiles_json,
            self._profile_sharing,
            self._refittable,
            streaming=self._streaming,
            verbosity=int(self._verbosity),
        )

    @property
    def profiling_verbosity(self) -> ProfilingVerbosity:
        return self._verbosity

    def create_engine_inspector(self) -> EngineInspector:
        return EngineInspector(self)

    def create_serialization_config(self) -> ISerializationConfig:
        return ISerializationConfig()

    def serialize_with_config(self, arg0: stubs.ISerializationConfig) -> IHostMemory:
        config = _own(arg0, ISerializationConfig)
        exclude = config.get_flag(_member(SerializationFlag, "EXCLUDE_WEIGHTS"))
        if exclude and not self._refittable:
            _error(self._logger, "ICudaEngine::serializeWithConfig: EXCLUDE_WEIGHTS needs an engine built refittable")
            return _null(IHostMemory)
        return _plan(
            self._segment,
            self._profiles_json,
            self._profile_sharing,
            self._refittable,
            stripped=exclude,
            streaming=self._streaming,
            verbosity=int(self._verbosity),
        )

    def _refit(self, weights: dict[str, np.ndarray[Any, Any]]) -> None:
        """Replace the values of the named initializers (a Refitter has checked them)."""
        model = onnx.ModelProto()
        model.CopyFrom(self._segment.model)
        segment = OnnxSegment(model, dict(self._segment.weights))
        tensors = {t.name: t for t in model.graph.initializer}
        for name, array in weights.items():
            segment.assign(tensors[name], array.copy())  # TensorRT copies the weights into the engine
        self._segment = segment
        self._session = _session(segment)
        self._stripped = False

    def get_tensor_name(self, index: int) -> str:
        return list(self._tensors)[index]

    def get_tensor_mode(self, name: str) -> TensorIOMode:
        return _member(TensorIOMode, self._tensors[name].mode)

    def get_tensor_dtype(self, name: str) -> DataType:
        return _member(DataType, self._tensors[name].engine_type)

    def get_tensor_shape(self, name: str) -> Dims:
        return Dims(self._tensors[name].shape)

    @property
    def num_optimization_profiles(self) -> int:
        """At least 1, as TensorRT's (an engine of static inputs has one implicit profile)."""
        return max(len(self._profiles), 1)

    def get_tensor_profile_shape(self, name: str, profile_index: int) -> list[stubs.Dims]:
        if not 0 <= profile_index < len(self._profiles) or name not in self._profiles[profile_index]:
            raise ValueError(f"no profile {profile_index} shape for '{name}'")
        return [Dims(s) for s in self._profiles[profile_index][name]]

    # The device memory a context's activations take (the double computes on the host).
    _DEVICE_MEMORY = 4096

    @property
    def device_memory_size(self) -> int:
        return self._DEVICE_MEMORY

    @property
    def device_memory_size_v2(self) -> int:
        if _version() < (10, 1):
            raise AttributeError(f"'ICudaEngine' has no attribute 'device_memory_size_v2' in TensorRT {__version__}")
        return self._DEVICE_MEMORY + self.weight_streaming_scratch_memory_size

    def create_execution_context(self, strategy: object = None) -> IExecutionContext:
        user_managed = strategy is not None and int(cast(Any, strategy)) == 2
        if user_managed:
            return self._context(with_memory=False)
        if state.contexts_left is not None:
            if state.contexts_left <= 0:
                _error(self._logger, "IExecutionContext: out of device memory for the context's activations")
                return _null(IExecutionContext)
            state.contexts_left -= 1
        return self._context(with_memory=True)

    def create_execution_context_without_device_memory(self) -> IExecutionContext:
        if _version()[0] >= 11:
            raise AttributeError(
                "'ICudaEngine' has no attribute 'create_execution_context_without_device_memory' "
                f"in TensorRT {__version__}"
            )
        return self._context(with_memory=False)

    def _context(self, with_memory: bool) -> IExecutionContext:
        state.contexts_created += 1
        context = IExecutionContext(self, with_memory)
        self._live_contexts.add(context)
        return context


@dataclass
class _Job:
    """One enqueued execution: the context's bindings as they were at enqueue time; it reads
    the input memory and writes the outputs when it runs (when its stream is synchronized).
    With `values` (an engine with data-dependent outputs, run at enqueue) it only writes them."""

    context: "IExecutionContext"
    shapes: dict[str, tuple[int, ...]]
    addresses: dict[str, int]
    values: dict[str, np.ndarray[Any, Any]] | None = None

    def run(self) -> None:
        if self.values is None:
            self.context._execute(self.shapes, self.addresses)
        else:
            self.context._write(self.values, self.addresses)


def synchronize(stream: int) -> None:
    """Run the work enqueued on `stream`, in order (cudaStreamSynchronize)."""
    jobs = state.pending.pop(stream, [])
    for job in jobs:
        job.run()
    for job in jobs:
        job.context._release(stream)


def begin_capture(stream: int) -> None:
    """Work enqueued on `stream` is recorded, not run, until end_capture."""
    state.capturing[stream] = []


def end_capture(stream: int) -> list[_Job]:
    return state.capturing.pop(stream)


def replay(jobs: list[_Job], stream: int) -> None:
    """Enqueue the recorded work again on `stream`: it runs on the buffers' contents then.
    TensorRT keeps shape-dependent state in the context, which the graph does not record: a
    context whose input shapes changed since the capture would replay wrongly, and raises here."""
    for job in jobs:
        if job.context._shapes != job.shapes:
            raise RuntimeError(
                "trt_double: a CUDA graph replayed on an IExecutionContext whose input shapes "
                f"changed since its capture ({job.shapes} -> {job.context._shapes}): TensorRT "
                "wants one context per captured graph"
            )
        job.context._claim(stream)
        state.pending.setdefault(stream, []).append(job)


class IExecutionContext(_IExecutionContext):
    """Strict where TensorRT is: addresses non-null and 256-byte aligned, every dynamic input's
    shape set before an enqueue, work run only when its stream is synchronized, and one user at
    a time: from the first call that binds it until its enqueued work has run, a context
    belongs to one thread and one stream; another raises (TensorRT would corrupt silently)."""

    def __init__(self, engine: ICudaEngine, with_memory: bool = True) -> None:
        self._engine = engine
        self._has_memory = with_memory  # else the application must give it memory before an enqueue
        self._shapes: dict[str, tuple[int, ...]] = {}
        self._addresses: dict[str, int] = {}
        self._user: tuple[int, int | None] | None = None  # (thread, stream with pending work)
        self._pending = 0
        self._allocators: dict[str, IOutputAllocator] = {}
        self._allocated: dict[str, int] = {}  # what each allocator last returned
        self._profile = 0  # the active optimization profile
        self._profiler: IProfiler | None = None
        self._group: Any = None  # the process group of the communicator set (TensorRT 11's DistCollective)

    @property
    def profiler(self) -> IProfiler:
        return self._profiler if self._profiler is not None else _null(IProfiler)

    @profiler.setter
    def profiler(self, profiler: stubs.IProfiler) -> None:
        # pybind11 passes None as a null pointer: setProfiler(nullptr) detaches the profiler.
        own = None if profiler is None else _own(profiler, IProfiler)
        if own is not None and not getattr(own, "_initialised", False):
            raise TypeError(f"{type(own).__name__}.__init__() must be called when overriding __init__")
        self._profiler = own

    def set_communicator(self, communicator: object) -> bool:
        """TensorRT 11: the NCCL communicator (a PyCapsule of an ncclComm_t) the engine's
        DistCollective layers run on; here an address trt_double/collectives.py registered."""
        if _version()[0] < 11:
            raise AttributeError(f"'IExecutionContext' has no attribute 'set_communicator' in TensorRT {__version__}")
        group = group_at(communicator)
        if group is None:
            _error(self._engine._logger, "IExecutionContext::setCommunicator: not a communicator trt_double knows")
            return False
        self._group = group
        return True

    def _claim(self, stream: int | None) -> None:
        thread = threading.get_ident()
        if self._user is not None:
            user_thread, user_stream = self._user
            if user_thread != thread:
                raise RuntimeError(
                    "trt_double: an IExecutionContext is used by two threads at once "
                    "(TensorRT would mix their bindings silently)"
                )
            if stream is not None and user_stream is not None and user_stream != stream and self._pending:
                raise RuntimeError(
                    "trt_double: an IExecutionContext is used on two streams at once "
                    "(its work on another stream has not run yet)"
                )
        if stream is not None:
            self._pending += 1
        self._user = (thread, stream if stream is not None else (self._user or (0, None))[1])

    def _release(self, stream: int) -> None:
        self._pending -= 1
        if not self._pending:
            self._user = None

    def set_input_shape(self, name: str, shape: tuple[int, ...] | list[int] | stubs.Dims) -> bool:
        self._claim(None)
        state.set_input_shape_calls += 1
        tensor = self._engine._tensors.get(name)
        dims = _dims_of(shape)
        if tensor is None or tensor.mode != "INPUT":
            _error(self._engine._logger, f"IExecutionContext::setInputShape: '{name}' is not an input tensor")
            return False
        if not self._hold_profile(self._profile, "setInputShape"):
            return False
        low, _, high = self._engine._profiles[self._profile][name]
        if len(dims) != len(low) or not all(a <= d <= b for d, a, b in zip(dims, low, high)):
            _error(
                self._engine._logger,
                f"IExecutionContext::setInputShape: {name} {dims} is outside the optimization profile {low}..{high}",
            )
            return False
        self._shapes[name] = dims
        return True

    def _hold_profile(self, index: int, call: str) -> bool:
        """Whether this context may use profile `index`: always where profiles are shared, else
        when no other context holds it (then this one does)."""
        engine = self._engine
        if engine._profile_sharing or engine._profile_holders.setdefault(index, self) is self:
            return True
        _error(
            engine._logger,
            f"IExecutionContext::{call}: profile {index} has been chosen by another "
            "IExecutionContext (build with PreviewFeature.PROFILE_SHARING_0806 to share it)",
        )
        return False

    @property
    def active_optimization_profile(self) -> int:
        return self._profile

    def set_optimization_profile_async(self, profile_index: int, stream_handle: int) -> bool:
        """Switch to another profile: its shapes are set again afterwards (TensorRT invalidates them)."""
        self._claim(None)
        engine = self._engine
        if not 0 <= profile_index < engine.num_optimization_profiles:
            _error(
                engine._logger,
                f"IExecutionContext::setOptimizationProfileAsync: profile {profile_index} is not in "
                f"[0, {engine.num_optimization_profiles})",
            )
            return False
        if stream_device(stream_handle) != engine._device:
            _error(
                engine._logger,
                f"IExecutionContext::setOptimizationProfileAsync: the stream belongs to device "
                f"{stream_device(stream_handle)}, the engine to device {engine._device}",
            )
            return False
        if not self._hold_profile(profile_index, "setOptimizationProfileAsync"):
            return False
        if engine._profile_holders.get(self._profile) is self and self._profile != profile_index:
            del engine._profile_holders[self._profile]
        self._profile = profile_index
        self._shapes = {}
        return True

    def set_tensor_address(self, name: str, memory: int) -> bool:
        self._claim(None)
        state.set_tensor_address_calls += 1
        tensor = self._engine._tensors.get(name)
        if tensor is None:
            _error(self._engine._logger, f"IExecutionContext::setTensorAddress: no tensor named '{name}'")
            return False
        if not memory:
            _error(self._engine._logger, f"IExecutionContext::setTensorAddress: null address for '{name}'")
            return False
        if memory % ALIGNMENT:
            _error(
                self._engine._logger,
                f"IExecutionContext::setTensorAddress: the address of '{name}' is not {ALIGNMENT}-byte aligned",
            )
            return False
        self._addresses[name] = memory
        return True

    def _give_memory(self, memory: int, size: int) -> None:
        if not memory or memory % ALIGNMENT or size < self._engine._DEVICE_MEMORY:
            raise ValueError(
                f"trt_double: device memory {memory:#x} of {size} bytes: TensorRT wants an aligned "
                f"block of at least {self._engine._DEVICE_MEMORY} bytes"
            )
        self._has_memory = True

    def set_device_memory(self, memory: int, size: int) -> None:
        if _version() < (10, 1):
            raise AttributeError(f"'IExecutionContext' has no attribute 'set_device_memory' in TensorRT {__version__}")
        self._give_memory(memory, size)

    @property
    def device_memory(self) -> object:
        raise AttributeError("trt_double: device_memory is write-only")

    @device_memory.setter
    def device_memory(self, memory: int) -> None:
        self._give_memory(memory, self._engine._DEVICE_MEMORY)

    def get_tensor_shape(self, name: str) -> Dims:
        tensor = self._engine._tensors[name]
        if tensor.mode == "OUTPUT" and -1 in tensor.shape:
            if name in self._engine._data_dependent:
                return Dims(tensor.shape)
            return Dims(self._output_shapes(self._shapes)[name])
        return Dims(self._shapes.get(name, tensor.shape))

    def set_output_allocator(self, name: str, output_allocator: stubs.IOutputAllocator) -> bool:
        self._claim(None)
        tensor = self._engine._tensors.get(name)
        if tensor is None or tensor.mode != "OUTPUT":
            _error(self._engine._logger, f"IExecutionContext::setOutputAllocator: '{name}' is not an output tensor")
            return False
        self._allocators[name] = _own(output_allocator, IOutputAllocator)
        return True

    def get_output_allocator(self, name: str) -> IOutputAllocator:
        return self._allocators.get(name) or _null(IOutputAllocator)

    def _output_shapes(self, shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
        """Output shapes for the input shapes set, as TensorRT infers them: here by running the
        engine once on zeros of those shapes (cached per shapes)."""
        inputs = {n: t for n, t in self._engine._tensors.items() if t.mode == "INPUT"}
        key = tuple(shapes.get(n, t.shape) for n, t in inputs.items())
        if key not in self._engine._shape_cache:
            feeds: dict[str, Any] = {
                n: np.zeros(shape, dtype=_NUMPY[t.onnx_type]) for (n, t), shape in zip(inputs.items(), key)
            }
            outputs = [t.name for t in self._engine._tensors.values() if t.mode == "OUTPUT"]
            values = self._engine._session.run(outputs, feeds)
            self._engine._shape_cache[key] = {n: tuple(v.shape) for n, v in zip(outputs, values)}
        return self._engine._shape_cache[key]

    def execute_async_v3(self, stream_handle: int) -> bool:
        tensors = self._engine._tensors
        if self._engine._stripped:
            _error(
                self._engine._logger,
                "IExecutionContext::enqueueV3: the engine was deserialized from a plan "
                "without its weights and has not been refitted",
            )
            return False
        if not self._has_memory:
            _error(
                self._engine._logger,
                "IExecutionContext::enqueueV3: the context was created without device memory and none was set",
            )
            return False
        served = self._engine._data_dependent
        unserved = sorted(served - set(self._allocators))
        if unserved:
            _error(
                self._engine._logger,
                f"IExecutionContext::enqueueV3: outputs {unserved} have data-dependent "
                "shapes and no IOutputAllocator is set",
            )
            return False
        missing = [n for n in tensors if n not in self._addresses and n not in served]
        if missing:
            _error(self._engine._logger, f"IExecutionContext::enqueueV3: address is not set for {missing}")
            return False
        unset = [n for n, t in tensors.items() if t.mode == "INPUT" and -1 in t.shape and n not in self._shapes]
        if unset:
            _error(self._engine._logger, f"IExecutionContext::enqueueV3: input shapes not set for {unset}")
            return False
        device, engine_device = get_device(), self._engine._device
        if device != engine_device:
            _error(
                self._engine._logger,
                f"IExecutionContext::enqueueV3: the engine is bound to device {engine_device}"
                f" but the current device is {device} (cudaSetDevice to it first)",
            )
            return False
        if stream_device(stream_handle) != engine_device:
            _error(
                self._engine._logger,
                f"IExecutionContext::enqueueV3: the stream belongs to device "
                f"{stream_device(stream_handle)}, the engine to device {engine_device}",
            )
            return False
        if isinstance(self._engine._session, CollectiveSession) and self._group is None:
            _error(
                self._engine._logger,
                "IExecutionContext::enqueueV3: the engine has DistCollective layers and no communicator is set "
                "(set_communicator)",
            )
            return False
        if served:
            return self._enqueue_data_dependent(stream_handle)
        if self._profiler is not None and stream_handle in state.capturing:
            _error(
                self._engine._logger, "IExecutionContext::enqueueV3: profiling is not supported in CUDA graph capture"
            )
            return False
        state.tuned.append((self._profile, self._opt_distance()))
        job = _Job(self, dict(self._shapes), dict(self._addresses))
        if stream_handle in state.capturing:
            state.capturing[stream_handle].append(job)
            return True
        if self._profiler is not None:
            synchronize(stream_handle)  # the stream's earlier work is not this engine's time
        self._claim(stream_handle)
        state.pending.setdefault(stream_handle, []).append(job)
        if self._profiler is not None:
            self._profiled(lambda: synchronize(stream_handle))
        return True

    def _profiled(self, run: Callable[[], object]) -> None:
        """Run the engine now and report each layer's time, as TensorRT's enqueue does with a
        profiler attached (enqueue_emits_profile): the run's time shared among the layers, each
        named as the engine's inspector names it (the layer's index where built with NONE)."""
        start = time.perf_counter()
        run()
        layers = self._engine._layers
        ms = (time.perf_counter() - start) * 1e3 / max(len(layers), 1)
        none = self._engine._verbosity.name == "NONE"
        for i, layer in enumerate(layers):
            cast(IProfiler, self._profiler).report_layer_time(str(i) if none else layer.name, ms)

    def _opt_distance(self) -> int:
        """How far the input shapes set are from the active profile's opt shapes."""
        profile = self._engine._profiles[self._profile] if self._engine._profiles else {}
        return sum(
            abs(d - o)
            for name, shape in self._shapes.items()
            if name in profile
            for d, o in zip(shape, profile[name][1])
        )

    def _enqueue_data_dependent(self, stream: int) -> bool:
        """TensorRT learns the data-dependent sizes on the GPU and waits for them inside the
        enqueue: the stream's earlier work runs, then the engine; the allocators get the sizes and
        shapes now, the memory gets the data when the stream runs."""
        if stream in state.capturing:
            _error(
                self._engine._logger,
                "IExecutionContext::enqueueV3: an engine with data-dependent output "
                "shapes synchronizes its stream, which a CUDA graph capture forbids",
            )
            return False
        synchronize(stream)
        shapes = dict(self._shapes)
        inputs = {n: t for n, t in self._engine._tensors.items() if t.mode == "INPUT"}
        feeds = {
            n: _host_array(self._addresses[n], _NUMPY[t.engine_type], shapes.get(n, t.shape)).astype(
                _NUMPY[t.onnx_type]
            )
            for n, t in inputs.items()
        }
        outputs = [n for n, t in self._engine._tensors.items() if t.mode == "OUTPUT"]
        results: list[Any] = []

        def run() -> None:
            results.extend(self._engine._session.run(outputs, feeds))

        if self._profiler is not None:
            self._profiled(run)
        else:
            run()
        values = dict(zip(outputs, results))
        addresses = dict(self._addresses)
        for name in sorted(self._engine._data_dependent):
            value, allocator = values[name], self._allocators[name]
            size = value.size * np.dtype(_NUMPY[self._engine._tensors[name].engine_type]).itemsize
            current = self._allocated.get(name, 0)
            state.output_reallocations += 1
            # The application's methods (the stubs' base class declares none); 10.x calls the
            # async one where the application wrote it.
            method = getattr(allocator, "reallocate_output_async", None) if _version()[0] >= 10 else None
            if method is not None:
                memory = method(name, current, size, ALIGNMENT, stream)
            else:
                memory = getattr(allocator, "reallocate_output")(name, current, size, ALIGNMENT)
            if not memory or memory % ALIGNMENT:
                _error(
                    self._engine._logger,
                    f"IExecutionContext::enqueueV3: the IOutputAllocator gave "
                    f"{'no' if not memory else 'unaligned'} memory for '{name}'",
                )
                return False
            addresses[name] = self._allocated[name] = memory
            state.shape_notifications += 1
            getattr(allocator, "notify_shape")(name, Dims(value.shape))
        self._claim(stream)
        state.pending.setdefault(stream, []).append(_Job(self, shapes, addresses, values))
        return True

    def _write(self, values: dict[str, np.ndarray[Any, Any]], addresses: dict[str, int]) -> None:
        for name, value in values.items():
            if value.size:
                engine_type = _NUMPY[self._engine._tensors[name].engine_type]
                _host_array(addresses[name], engine_type, value.shape)[...] = value.astype(engine_type)
        state.executions += 1

    def _execute(self, shapes: dict[str, tuple[int, ...]], addresses: dict[str, int]) -> None:
        session = self._engine._session
        if isinstance(session, CollectiveSession):
            inputs = {n: t for n, t in self._engine._tensors.items() if t.mode == "INPUT"}
            feeds = {
                n: _host_array(addresses[n], _NUMPY[t.engine_type], shapes.get(n, t.shape)).astype(_NUMPY[t.onnx_type])
                for n, t in inputs.items()
            }
            names = [n for n, t in self._engine._tensors.items() if t.mode == "OUTPUT"]
            state.collective_executions += 1
            self._write(dict(zip(names, session.run(names, feeds, self._group))), addresses)
            return
        binding = session.io_binding()
        converted: list[tuple[_Tensor, tuple[int, ...]]] = []  # outputs whose buffers hold another dtype
        outputs = self._output_shapes(shapes)
        for t in self._engine._tensors.values():
            shape = shapes.get(t.name, t.shape) if t.mode == "INPUT" else outputs[t.name]
            address, ort_type = addresses[t.name], _NUMPY[t.onnx_type]
            if t.mode == "INPUT" and t.engine_type == t.onnx_type:
                binding.bind_input(t.name, "cpu", 0, ort_type, shape, address)
            elif t.mode == "INPUT":
                binding.bind_cpu_input(t.name, _host_array(address, _NUMPY[t.engine_type], shape).astype(ort_type))
            elif t.engine_type == t.onnx_type and 0 not in shape:
                binding.bind_output(t.name, "cpu", 0, ort_type, shape, address)
            else:  # another dtype, or empty: ONNX Runtime refuses to bind those by address
                binding.bind_output(t.name, "cpu")
                converted.append((t, shape))
        # A failure here is an illegal access or a trap on a GPU: it surfaces at the next sync.
        session.run_with_iobinding(binding)
        results = binding.get_outputs()  # in the order outputs were bound
        bound = [t.name for t in self._engine._tensors.values() if t.mode == "OUTPUT"]
        for t, shape in converted:
            value = results[bound.index(t.name)].numpy()
            _host_array(addresses[t.name], _NUMPY[t.engine_type], shape)[...] = value.astype(_NUMPY[t.engine_type])
        state.executions += 1


class Runtime(_Runtime):
    def __init__(self, logger: stubs.ILogger) -> None:
        self._logger = logger
        _use_logger(logger)

    def deserialize_cuda_engine(
        self, serialized_engine: Buffer | stubs.IStreamReader | stubs.IStreamReaderV2
    ) -> ICudaEngine:
        if not isinstance(serialized_engine, (bytes, bytearray, memoryview)):
            raise TypeError("trt_double reads plans from bytes only")
        data = bytes(serialized_engine)
        start = len(_PLAN_MAGIC) + 4
        try:
            if not data.startswith(_PLAN_MAGIC):
                raise ValueError("magic tag does not match")
            length = int.from_bytes(data[len(_PLAN_MAGIC) : start], "big")
            header = json.loads(data[start : start + length])
        except ValueError as e:
            _error(self._logger, f"IRuntime::deserializeCudaEngine: Serialization assertion failed: {e}")
            return _null(ICudaEngine)
        if header["version"] != __version__:
            _error(
                self._logger,
                "IRuntime::deserializeCudaEngine: the engine plan file is not compatible with "
                f"this version of TensorRT, expecting library version {__version__} got "
                f"{header['version']}",
            )
            return _null(ICudaEngine)
        if header["compute_capability"] != state.compute_capability:
            _error(
                self._logger,
                "IRuntime::deserializeCudaEngine: the engine plan was built for a device of "
                f"compute capability {header['compute_capability']}, this one is "
                f"{state.compute_capability}",
            )
            return _null(ICudaEngine)
        try:
            payload = memoryview(data)[start + length :]
            graph = bytes(payload[: header["graph_bytes"]])
            stripped = bool(header.get("stripped", False))
            graph, weights = (
                _unstripped(graph)
                if stripped
                else (graph, _plan_weights(graph, payload[header["graph_bytes"] :], header["weights"]))
            )
            engine = ICudaEngine(
                graph,
                header["profiles"],
                self._logger,
                header.get("profile_sharing", True),
                weights,
                header.get("refittable", False),
                stripped,
                header.get("profiling_verbosity", 0),
            )
            engine._stream_weights(bool(header.get("weight_streaming", False)))
        except Exception as e:  # protobuf / ONNX Runtime errors on a damaged payload
            _error(self._logger, f"IRuntime::deserializeCudaEngine: corrupted plan: {e}")
            return _null(ICudaEngine)
        state.deserializations += 1
        return engine


# -- refit ------------------------------------------------------------------------------------
# The initializer types an engine's weights have: what a Refitter lists and takes.
_WEIGHT_TYPES = {
    TensorProto.FLOAT: "FLOAT",
    TensorProto.FLOAT16: "HALF",
    TensorProto.BFLOAT16: "BF16",
    TensorProto.INT8: "INT8",
}


class Weights(_Weights):
    """Host weights over a numpy array (the real class also takes a pointer and a count)."""

    def __init__(self, a: np.ndarray[Any, Any]) -> None:
        if not isinstance(a, np.ndarray):
            raise TypeError(f"incompatible constructor arguments: expected numpy.ndarray, got {type(a).__name__}")
        self._array = a

    @property
    def dtype(self) -> DataType:
        onnx_type = onnx.helper.np_dtype_to_tensor_dtype(self._array.dtype)
        return _member(DataType, _WEIGHT_TYPES.get(onnx_type, _TRT_TYPE[TensorProto.DataType.Name(onnx_type)]))

    @property
    def size(self) -> int:
        return int(self._array.size)

    @property
    def nbytes(self) -> int:
        return int(self._array.nbytes)

    def numpy(self) -> Any:
        return self._array


class Refitter(_Refitter):
    """As strict as TensorRT's: only a refittable engine; names, types and counts checked on
    set_named_weights; with REFIT every weight must be given before refit_cuda_engine (which
    otherwise fails, leaving the engine as it was)."""

    def __init__(self, engine: stubs.ICudaEngine, logger: stubs.ILogger) -> None:
        self._engine = _own(engine, ICudaEngine)
        self._logger = logger
        if not self._engine.refittable:
            _error(logger, "IRefitter: the engine was not built refittable (BuilderFlag.REFIT)")
            raise TypeError("pybind11::init(): factory function returned nullptr")
        model = self._engine._segment.model
        self._weights = {t.name: t for t in model.graph.initializer if t.data_type in _WEIGHT_TYPES}
        self._given: dict[str, np.ndarray[Any, Any]] = {}

    def get_all_weights(self) -> list[str]:
        return list(self._weights)

    def get_missing_weights(self) -> list[str]:
        return [name for name in self._weights if name not in self._given]

    def set_named_weights(
        self, name: str, weights: stubs.Weights, location: stubs.TensorLocation | None = None
    ) -> bool:
        if name not in self._weights:
            _error(self._logger, f"IRefitter::setNamedWeights: no refittable weights are named '{name}'")
            return False
        array = _own(weights, Weights).numpy()
        tensor = self._weights[name]
        expected = _member(DataType, _WEIGHT_TYPES[tensor.data_type])
        count = int(np.prod(tensor.dims, dtype=np.int64))
        if weights.dtype != expected or array.size != count:
            _error(
                self._logger,
                f"IRefitter::setNamedWeights: weights '{name}' must be {expected.name} of {count} "
                f"values, got {weights.dtype.name} of {array.size}",
            )
            return False
        self._given[name] = array.reshape(tuple(tensor.dims))
        return True

    def refit_cuda_engine(self) -> bool:
        missing = self.get_missing_weights()
        if missing:
            _error(self._logger, f"IRefitter::refitCudaEngine: missing weights {missing}")
            return False
        self._engine._refit(self._given)
        state.refits += 1
        return True


class OnnxParserRefitter(_OnnxParserRefitter):
    """Sets every refittable weight of the refitter's engine from an ONNX model's initializers
    of the same names (refit_cuda_engine is the caller's to call). TensorRT 10.0 and newer."""

    def __init__(self, refitter: stubs.Refitter, logger: stubs.ILogger) -> None:
        if _version()[0] < 10:
            raise AttributeError(f"module 'tensorrt' has no attribute 'OnnxParserRefitter' in TensorRT {__version__}")
        self._refitter = _own(refitter, Refitter)
        self._logger = logger
        self._errors: list[ParserError] = []

    def _fail(self, desc: str) -> bool:
        self._errors.append(ParserError(desc, -1))
        _error(self._logger, f"OnnxParserRefitter: {desc}")
        return False

    def refit_from_bytes(self, model: Buffer, path: str | None = None) -> bool:
        try:
            proto = onnx.load_from_string(bytes(model))
            external = _external_weights(proto, os.path.dirname(path)) if path is not None else {}
        except Exception as e:  # protobuf's DecodeError, a missing weights file
            return self._fail(f"Failed to parse the ONNX model: {e}")
        tensors = {t.name: t for t in proto.graph.initializer}
        missing = [n for n in self._refitter.get_all_weights() if n not in tensors]
        if missing:
            return self._fail(f"the model has no initializers for the engine's weights {missing}")
        for name in self._refitter.get_all_weights():
            tensor = tensors[name]
            if tensor.data_location == TensorProto.EXTERNAL and name not in external:
                return self._fail(f"initializer '{name}' is external data and no model path was given")
            array = external[name] if name in external else numpy_helper.to_array(tensor)
            if not self._refitter.set_named_weights(name, Weights(np.ascontiguousarray(array))):
                return self._fail(f"weights '{name}' were refused")
        return True

    def refit_from_file(self, model: str) -> bool:
        try:
            with open(model, "rb") as file:
                data = file.read()
        except OSError as e:
            return self._fail(f"cannot read {model}: {e}")
        return self.refit_from_bytes(data, model)

    @property
    def num_errors(self) -> int:
        return len(self._errors)

    def get_error(self, index: int) -> ParserError:
        return self._errors[index]

    def clear_errors(self) -> None:
        self._errors.clear()


class ISerializationConfig(_ISerializationConfig):
    def __init__(self) -> None:
        self._flags = 0

    def set_flag(self, flag: stubs.SerializationFlag) -> bool:
        self._flags |= 1 << int(flag)
        return True

    def clear_flag(self, flag: stubs.SerializationFlag) -> bool:
        self._flags &= ~(1 << int(flag))
        return True

    def get_flag(self, flag: stubs.SerializationFlag) -> bool:
        return bool(self._flags & (1 << int(flag)))
