"""TRTEngineModule: one engine segment executed by TensorRT, zero-copy on torch tensors."""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence, cast

import tensorrt as trt
import torch

from converters.core.errors import TrtLowerError
from trt_lower.runtime.communicator import Communicator
from trt_lower.runtime.engine_module import EngineModule, Outputs
from trt_lower.runtime.streaming_budget import WeightStreamingError
from trt_lower.runtime.trt_logger import LOGGER
from trt_lower.runtime.trt_output_allocator import OutputAllocator
from trt_lower.values import device as devices
from trt_lower.values.dtypes import TRT_TYPES
from trt_lower.values.signature import EngineInputError, TensorSig
from trt_lower.values.versions import parse_version

log = logging.getLogger("trt_lower")

# (engine dtype, segment dtype) pairs cast at the engine boundary.
_NARROWED = {(torch.int32, torch.int64), (torch.float32, torch.float64)}
_INT32 = torch.iinfo(torch.int32)
# TensorRT's documented alignment of I/O tensor addresses.
ALIGNMENT = 256
# CUDA graphs kept per execution context's thread and stream, the least recently used dropped
# first: each holds its input and output buffers (and a context, without activation memory).
MAX_GRAPHS = 32

Shapes = tuple[torch.Size, ...]
# Per output: its shape, or None where the data decides it (served by an OutputAllocator).
OutShapes = tuple[tuple[int, ...] | None, ...]


class PlanLoadError(TrtLowerError, RuntimeError):
    """TensorRT could not deserialize a plan, or it does not fit the segment it was built for."""


class DeviceMemoryError(TrtLowerError, RuntimeError):
    """TensorRT could not create an execution context: the GPU has no room for its activations.
    The plan is fine (another is no smaller): not a PlanLoadError, so no cache entry is dropped."""


def _shape(dims: trt.Dims) -> tuple[int, ...]:
    return tuple(int(dims[i]) for i in range(len(dims)))


def aligned_empty(shape: Sequence[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """An uninitialised tensor whose address is ALIGNMENT-aligned (torch's CUDA allocator gives
    that already; host memory and views may not)."""
    t = torch.empty(shape, dtype=dtype, device=device)
    if t.data_ptr() % ALIGNMENT == 0:
        return t
    nbytes = math.prod(shape) * dtype.itemsize
    raw = torch.empty(nbytes + ALIGNMENT, dtype=torch.uint8, device=device)
    offset = -raw.data_ptr() % ALIGNMENT
    return raw[offset : offset + nbytes].view(dtype).view(tuple(shape))


class _Binding:
    """An execution context and what was last set on it, so a call sets only what changed."""

    def __init__(self, context: trt.IExecutionContext, inputs: int, outputs: int, profile: int = 0) -> None:
        self.context = context
        self.profile = profile  # the optimization profile the context runs on
        self.shapes: list[torch.Size | None] = [None] * inputs
        self.addresses = [0] * (inputs + outputs)
        self.graphs: OrderedDict[Shapes, _Graph] = OrderedDict()
        # The activation memory this thread and stream's graph contexts share (made when first needed).
        self.graph_memory: torch.Tensor | None = None
        self.allocator: OutputAllocator | None = None  # set on the context for data-dependent outputs


@dataclass
class _Graph:
    """A CUDA graph of one enqueue, with the static buffers it reads and writes and the context
    it was captured on; `replay` is None where capture failed (those calls run without a graph)."""

    replay: Callable[[], None] | None
    inputs: list[torch.Tensor] = field(default_factory=list)
    outputs: list[torch.Tensor] = field(default_factory=list)
    binding: _Binding | None = None  # the graph's own context: replays need it alive


class TRTEngineModule(EngineModule):
    """Runs a deserialized engine with name-based I/O bound to torch tensors' memory: inputs are
    made contiguous and 256-byte aligned, outputs are allocated by torch in the engine's shapes
    and dtypes, and TensorRT reads and writes them in place, on torch's current stream of the
    engine's GPU (a side stream when that is the default stream).

    Per call it does only what changed: `set_input_shape` when an input's shape differs from the
    last call on the same execution context, `set_tensor_address` when an address does, and
    output shapes are looked up per input shapes. Nothing waits for the GPU.

    An execution context must not be used by two threads, or on two streams, at once (it owns its
    scratch memory): each (thread, stream) gets its own context. That costs the context's device
    memory once per thread and stream, where a lock would cost nothing in memory but serialize
    the threads, including their host work.

    TensorRT 8.6 turns INT64 engine I/O into INT32, and float64 runs as float32 everywhere: such
    inputs are cast down before the engine (an int64 input outside int32 is refused, never
    wrapped: that check reads the values, one device-to-host sync per call, on 8.6 only) and
    outputs cast back up after it, so callers always see the segment's own dtypes.

    With `cuda_graphs`, the first call with given input shapes copies its inputs into static
    buffers, runs the engine on them once for real and records the enqueue into a CUDA graph;
    later calls with those shapes copy their inputs in, replay, and return copies of the
    outputs. If capture fails, those shapes run without a graph (with a warning). TensorRT keeps
    shape-dependent state in an execution context, which a graph does not record: each graph is
    captured on a context of its own, whose shapes never change, and the graphs of one thread and
    stream share one block of activation memory (their replays run one after another there).

    Outputs whose shape the data decides (TensorRT reports -1 for them once the input shapes are
    set) get their memory from an OutputAllocator set on the context, and their shape from it
    after the enqueue (see trt_output_allocator.py); such engines run without CUDA graphs.

    An engine with `collectives` inside (TensorRT 11's DistCollective layers) gives every context
    the world process group's NCCL communicator (communicator.py) as it makes it.
    """

    def __init__(
        self,
        name: str,
        plan: bytes,
        inputs: tuple[TensorSig, ...],
        outputs: tuple[TensorSig, ...],
        tuple_output: bool,
        *,
        cuda_graphs: bool = False,
        collectives: bool = False,
    ) -> None:
        self._device = devices.current()
        super().__init__(name, inputs, outputs, tuple_output, self._device.torch_device())
        self.plan = plan
        self.cuda_graphs = cuda_graphs
        LOGGER.take_errors()
        # The runtime must outlive the engines it deserialized.
        self._runtime = trt.Runtime(LOGGER)
        engine = self._runtime.deserialize_cuda_engine(plan)
        if engine is None:
            raise PlanLoadError(LOGGER.take_errors() or "deserialize_cuda_engine returned no engine")
        self._engine = engine
        self._check_io()
        dtypes = {s.name: TRT_TYPES[engine.get_tensor_dtype(s.name).name] for s in inputs + outputs}
        self._in_names = tuple(s.name for s in inputs)
        self._out_names = tuple(s.name for s in outputs)
        self._in_casts = tuple(None if dtypes[s.name] == s.dtype else dtypes[s.name] for s in inputs)
        self._out_dtypes = tuple(dtypes[s.name] for s in outputs)
        self._casts_back = tuple(None if dtypes[s.name] == s.dtype else s.dtype for s in outputs)
        # Input shapes -> output shapes; static engines know theirs.
        self._out_shapes: dict[Shapes, OutShapes] = {}
        static = all(s.is_static for s in inputs + outputs)
        self._static_out = tuple(s.min_shape for s in outputs) if static else None
        # Valid addresses for empty tensors (TensorRT refuses null ones), one slot per I/O tensor,
        # made when first needed.
        self._scratch: torch.Tensor | None = None
        self._local = threading.local()
        if self.streamable_bytes:
            # TensorRT puts the weights on the GPU when the first context is made, all of them under
            # its default budget (10.1 on): the automatic budget first, as free device memory allows.
            self._apply_budget(None)
        # An engine with collectives inside: every context runs them on the process group's NCCL
        # communicator, which this module holds as long as its contexts.
        self._communicator = Communicator(name) if collectives else None
        # One context now, so that a shortage of device memory (or a refused communicator) shows at load time.
        self._spare = [self._create_context()]

    @property
    def engine(self) -> trt.ICudaEngine:
        """The deserialized engine (engine/trt_refit.py refits a new module's before it is used)."""
        return self._engine

    def describe_backend(self) -> str:
        graphs = ", cuda_graphs" if self.cuda_graphs else ""
        return f"tensorrt {trt.__version__}{graphs}"

    # -- weight streaming (docs/weight-streaming.md) --------------------------------------------
    @property
    def streamable_bytes(self) -> int:
        if parse_version(trt.__version__)[0] < 10:
            return 0
        return int(self._engine.streamable_weights_size)

    @property
    def weight_streaming_budget(self) -> int | None:
        if parse_version(trt.__version__) >= (10, 1):
            return min(int(self._engine.weight_streaming_budget_v2), self.streamable_bytes)
        budget = int(self._engine.weight_streaming_budget)  # 10.0: -1 streams nothing, 0 TensorRT chooses
        return self.streamable_bytes if budget == -1 else budget or None

    def set_weight_streaming_budget(self, budget: int | None) -> None:
        """TensorRT takes a budget only while the engine has no execution context: this module's
        are dropped (calls must not be running on other threads) and made again on the new budget."""
        self._spare.clear()
        self._local = threading.local()
        try:
            self._apply_budget(budget)
        finally:
            self._spare.append(self._create_context())

    def _apply_budget(self, budget: int | None) -> None:
        engine = self._engine
        LOGGER.take_errors()
        if parse_version(trt.__version__) >= (10, 1):
            engine.weight_streaming_budget_v2 = (
                engine.get_weight_streaming_automatic_budget() if budget is None else budget
            )
        else:  # 10.0's API (deprecated from 10.1): 0 lets TensorRT choose, -1 streams nothing
            engine.weight_streaming_budget = 0 if budget is None else -1 if budget >= self.streamable_bytes else budget
        errors = LOGGER.take_errors()
        if errors:
            least = (
                ""
                if parse_version(trt.__version__) >= (10, 1)
                else f" (its minimum: {engine.minimum_weight_streaming_budget})"
            )
            raise WeightStreamingError(
                f"{self.name}: TensorRT refused the weight streaming budget "
                f"{'automatic' if budget is None else budget}{least}: {errors}"
            )

    # -- construction checks --------------------------------------------------------------------
    def _check_io(self) -> None:
        engine = self._engine
        io = {engine.get_tensor_name(i) for i in range(engine.num_io_tensors)}
        wanted = {s.name for s in self.inputs + self.outputs}
        if io != wanted:
            raise PlanLoadError(f"the engine's I/O tensors {sorted(io)} are not the segment's {sorted(wanted)}")
        for sig in self.inputs + self.outputs:
            got = TRT_TYPES.get(engine.get_tensor_dtype(sig.name).name)
            if got != sig.dtype and (got, sig.dtype) not in _NARROWED:
                raise PlanLoadError(f"engine tensor '{sig.name}' is {got}, the segment's is {sig.dtype}")
        # The signature check is the engine's: its profiles must be the segment's shape ranges.
        count = len(self.profile.profiles)
        if self.inputs and engine.num_optimization_profiles != count:
            raise PlanLoadError(
                f"the engine has {engine.num_optimization_profiles} optimization profiles, the segment {count}"
            )
        for sig in self.inputs:
            for k, (sig_low, _, sig_high) in enumerate(sig.ranges):
                low, _, high = (_shape(d) for d in engine.get_tensor_profile_shape(sig.name, k))
                if (low, high) != (sig_low, sig_high):
                    raise PlanLoadError(
                        f"engine input '{sig.name}' has the profile {k} {low}..{high}, the segment's "
                        f"range is {sig_low}..{sig_high}"
                    )
        # Static outputs are allocated in the segment's shapes: TensorRT writes the engine's.
        for sig in self.outputs:
            shape = _shape(engine.get_tensor_shape(sig.name))
            if sig.is_static and -1 not in shape and shape != sig.min_shape:
                raise PlanLoadError(
                    f"engine output '{sig.name}' has the shape {shape}, the segment's is {sig.min_shape}"
                )

    def _create_context(self) -> trt.IExecutionContext:
        context = self._engine.create_execution_context()
        if context is None:
            raise DeviceMemoryError(
                f"{self.name}: TensorRT could not create an execution context (out of device "
                f"memory?): {LOGGER.take_errors() or 'no reason given'}"
            )
        self._communicate(context)
        return context

    def _communicate(self, context: trt.IExecutionContext) -> None:
        if self._communicator is not None:
            self._communicator.give(context, LOGGER.take_errors)

    def _graph_context(self, binding: _Binding) -> trt.IExecutionContext:
        """A context for one CUDA graph, on the activation memory `binding`'s graphs share."""
        engine = self._engine
        version = parse_version(trt.__version__)
        if version[0] >= 10:
            context = engine.create_execution_context(trt.ExecutionContextAllocationStrategy.USER_MANAGED)
        else:
            context = engine.create_execution_context_without_device_memory()
        if context is None:
            raise RuntimeError(
                f"{self.name}: TensorRT could not create an execution context: "
                f"{LOGGER.take_errors() or 'no reason given'}"
            )
        # setDeviceMemoryV2 (10.1 on) also covers weight streaming's scratch.
        v2 = version >= (10, 1)
        size = engine.device_memory_size_v2 if v2 else engine.device_memory_size
        if binding.graph_memory is None:
            binding.graph_memory = aligned_empty((max(size, 1),), torch.uint8, self.device)
        if v2:
            context.set_device_memory(binding.graph_memory.data_ptr(), size)
        else:
            context.device_memory = binding.graph_memory.data_ptr()  # type: ignore[attr-defined]  # 8.6's, not in 10.13's stubs
        self._communicate(context)
        return context

    # -- profiling ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def profiled(self, profiler: trt.IProfiler) -> Iterator[None]:
        """Until the block ends, this thread's calls report each layer's time to `profiler` (an
        enqueue then waits for the engine, TensorRT's way of timing layers), and the module's
        calls run without CUDA graphs (a replay reports nothing); then this thread's contexts have
        no profiler again. Set on the contexts, not checked per call: calls outside the block cost
        what they did."""
        graphs, self.cuda_graphs = self.cuda_graphs, False
        self._local.profiler = profiler
        for context in self._thread_contexts():
            context.profiler = profiler
        try:
            yield
        finally:
            self.cuda_graphs = graphs
            self._local.profiler = None
            for context in self._thread_contexts():
                context.profiler = None  # type: ignore[assignment]  # pybind11 passes None as setProfiler(nullptr)

    def _thread_contexts(self) -> list[trt.IExecutionContext]:
        return [b.context for b in getattr(self._local, "bindings", {}).values()]

    # -- calls --------------------------------------------------------------------------------
    def _binding(self, stream: int, profile: int) -> _Binding:
        """This thread's context on `stream` for `profile`: one per profile in use, since a
        context runs on one profile and switching it costs a synchronization and every input
        shape set again."""
        bindings: dict[tuple[int, int], _Binding] | None = getattr(self._local, "bindings", None)
        if bindings is None:
            bindings = self._local.bindings = {}
        binding = bindings.get((stream, profile))
        if binding is None:
            context = self._spare.pop() if self._spare else self._create_context()
            self._use_profile(context, profile, stream)
            profiler = getattr(self._local, "profiler", None)  # a new context made while profiling
            if profiler is not None:
                context.profiler = profiler
            binding = bindings[stream, profile] = _Binding(context, len(self.inputs), len(self.outputs), profile)
        return binding

    def _use_profile(self, context: trt.IExecutionContext, profile: int, stream: int) -> None:
        """Put a new context on `profile` (contexts start on profile 0), on the stream it runs on."""
        if profile and not context.set_optimization_profile_async(profile, stream):
            raise RuntimeError(
                f"{self.name}: TensorRT refused optimization profile {profile}: {LOGGER.take_errors() or 'no reason'}"
            )

    def _engine_inputs(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The inputs in the engine's dtypes, contiguous and aligned."""
        args = []
        for t, to, sig in zip(tensors, self._in_casts, self.inputs):
            if to is not None:
                if to == torch.int32 and t.numel():
                    bounds = t.aminmax()
                    if not (_INT32.min <= bounds.min and bounds.max <= _INT32.max):
                        raise EngineInputError(
                            f"{self.name}: input '{sig.source}' holds values outside int32, "
                            f"and TensorRT {trt.__version__} engines take int64 as int32"
                        )
                t = t.to(to)
            if not t.is_contiguous():
                t = t.contiguous()
            if t.data_ptr() % ALIGNMENT:
                t = aligned_empty(t.shape, t.dtype, t.device).copy_(t)
            args.append(t)
        return args

    def _set_address(self, binding: _Binding, index: int, name: str, t: torch.Tensor) -> None:
        if t.numel():
            address = t.data_ptr()
        else:
            if self._scratch is None:
                self._scratch = aligned_empty((ALIGNMENT * len(binding.addresses),), torch.uint8, self.device)
            address = self._scratch.data_ptr() + ALIGNMENT * index
        if binding.addresses[index] != address:
            if not binding.context.set_tensor_address(name, address):
                raise RuntimeError(f"{self.name}: TensorRT refused the address of '{name}': {LOGGER.take_errors()}")
            binding.addresses[index] = address

    def _output_shapes(self, binding: _Binding, key: Shapes) -> OutShapes:
        shapes = self._out_shapes.get(key)
        if shapes is None:
            known = (_shape(binding.context.get_tensor_shape(name)) for name in self._out_names)
            shapes = self._out_shapes[key] = tuple(None if -1 in shape else shape for shape in known)
        return shapes

    def _set_allocator(self, binding: _Binding, shapes: OutShapes) -> None:
        """Set an allocator for the data-dependent outputs (shape None) on the context, once."""
        if binding.allocator is None:
            allocator = OutputAllocator(lambda size: aligned_empty((size,), torch.uint8, self.device))
            for name, shape in zip(self._out_names, shapes):
                if shape is None and not binding.context.set_output_allocator(name, allocator):
                    raise RuntimeError(
                        f"{self.name}: TensorRT refused an output allocator for '{name}': {LOGGER.take_errors()}"
                    )
            binding.allocator = allocator

    def _bind(self, binding: _Binding, args: Sequence[torch.Tensor]) -> list[torch.Tensor | None]:
        """Point the context at `args` and at new output tensors, which it returns (None for
        the outputs its OutputAllocator serves)."""
        context = binding.context
        for i, (t, name) in enumerate(zip(args, self._in_names)):
            shape = t.shape
            if binding.shapes[i] != shape:
                if not context.set_input_shape(name, shape):
                    raise EngineInputError(f"{self.name}: {LOGGER.take_errors()}")
                binding.shapes[i] = shape
            self._set_address(binding, i, name, t)
        shapes = self._static_out or self._output_shapes(binding, tuple(t.shape for t in args))
        if any(shape is None for shape in shapes):
            self._set_allocator(binding, shapes)
        outputs = [
            None if shape is None else aligned_empty(shape, dtype, self.device)
            for shape, dtype in zip(shapes, self._out_dtypes)
        ]
        for j, (out, name) in enumerate(zip(outputs, self._out_names), len(args)):
            if out is not None:
                self._set_address(binding, j, name, out)
        return outputs

    def _allocated(self, binding: _Binding, outputs: list[torch.Tensor | None]) -> list[torch.Tensor]:
        """`outputs` with the data-dependent ones taken from the allocator (after the enqueue)."""
        if binding.allocator is None:
            return cast(list[torch.Tensor], outputs)
        allocator = binding.allocator
        return [
            allocator.take(name, dtype) if t is None else t
            for t, name, dtype in zip(outputs, self._out_names, self._out_dtypes)
        ]

    def _enqueue(self, context: trt.IExecutionContext, stream: int) -> None:
        if not context.execute_async_v3(stream):
            raise RuntimeError(f"{self.name}: TensorRT execution failed: {LOGGER.take_errors()}")

    def _graph(self, binding: _Binding, args: Sequence[torch.Tensor], stream: int) -> _Graph:
        """The CUDA graph for these input shapes, captured on the first call with them."""
        key = tuple(t.shape for t in args)
        graph = binding.graphs.get(key)
        if graph is not None:
            binding.graphs.move_to_end(key)
            return graph
        graph = binding.graphs[key] = self._capture(binding, args, stream)
        if len(binding.graphs) > MAX_GRAPHS:
            binding.graphs.popitem(last=False)
        return graph

    def _capture(self, binding: _Binding, args: Sequence[torch.Tensor], stream: int) -> _Graph:
        try:
            context = self._graph_context(binding)
            self._use_profile(context, binding.profile, stream)
            own = _Binding(context, len(self.inputs), len(self.outputs), binding.profile)
        except RuntimeError as e:  # no memory for one more context: these shapes run without a graph
            log.warning(
                "trt_lower: %s: no CUDA graph for input shapes %s: %s", self.name, [tuple(t.shape) for t in args], e
            )
            return _Graph(None)
        # Real inputs first: the warm-up run before capture executes for real, and garbage
        # indices there would be an illegal memory access.
        inputs = [aligned_empty(t.shape, t.dtype, self.device).copy_(t) for t in args]
        outputs = self._bind(own, inputs)
        if any(t is None for t in outputs):
            log.warning(
                "trt_lower: %s: no CUDA graph: an output's shape depends on the data, which "
                "TensorRT learns during the run (a graph replays fixed sizes)",
                self.name,
            )
            return _Graph(None)
        try:
            replay = self._device.capture(lambda stream: self._enqueue(own.context, stream), self.device)
        except RuntimeError as e:
            log.warning(
                "trt_lower: %s: CUDA graph capture failed (%s); running without a graph for input shapes %s",
                self.name,
                e,
                [tuple(t.shape) for t in args],
            )
            return _Graph(None)
        return _Graph(replay, inputs, cast(list[torch.Tensor], outputs), own)

    def run(self, tensors: Sequence[torch.Tensor]) -> Outputs:
        args = self._engine_inputs(tensors)
        graph = None
        profile = self.profile(tuple(t.shape for t in args)) if self.profile.several else 0
        with self._device.stream(self.device) as stream:
            binding = self._binding(stream, profile)
            if self.cuda_graphs:
                graph = self._graph(binding, args, stream)
            if graph is not None and graph.replay is not None:
                for static, t in zip(graph.inputs, args):
                    static.copy_(t)
                graph.replay()
                results = graph.outputs
            else:
                bound = self._bind(binding, args)
                self._enqueue(binding.context, stream)
                results = self._allocated(binding, bound)
                self._device.hold(stream, [*args, *results])
        if graph is not None and graph.replay is not None:
            # The next replay overwrites the static buffers: hand out copies.
            results = [t.clone() for t in results]
        results = [t if back is None else t.to(back) for t, back in zip(results, self._casts_back)]
        return tuple(results) if self.tuple_output else results[0]
