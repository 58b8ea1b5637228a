"""CudaDevice (trt_lower/values/device.py), the code that picks devices and streams on a real GPU, run
on two modelled GPUs: tests/trt_double/torch_cuda.py stands in for torch.cuda, and the TensorRT
double refuses an enqueue under another device than its engine's or on another device's stream.
The engines here read and write host buffers bound the way TRTEngineModule binds them."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Iterator

import pytest
import torch
from onnx import TensorProto, helper
from trt_double.torch_cuda import TorchCuda

from trt_lower.values import device as devices
from trt_lower.values.device import CudaDevice

GPU = [torch.device("cuda", 0), torch.device("cuda", 1)]


@pytest.fixture
def cuda(trt_double: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Iterator[TorchCuda]:
    fake = TorchCuda(devices=2)
    monkeypatch.setattr(devices, "cuda", fake)
    yield fake


def _logger() -> object:
    # Imported late: the module binds `tensorrt` (here the double) when first imported.
    return importlib.import_module("trt_lower.runtime.trt_logger").LOGGER


def _plan(trt: ModuleType) -> bytes:
    """An engine computing y = x + x on 4 floats."""
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]) for n in "xy")
    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "twice", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    builder = trt.Builder(_logger())
    network = builder.create_network(0)
    assert trt.OnnxParser(network, _logger()).parse(model.SerializeToString())
    return bytes(builder.build_serialized_network(network, builder.create_builder_config()))


class Engine:
    """An engine deserialized while GPU `index` was current, its I/O in aligned host buffers."""

    def __init__(self, trt: ModuleType, cuda: TorchCuda, index: int) -> None:
        aligned_empty = importlib.import_module("trt_lower.runtime.trt_module").aligned_empty
        with cuda.device(index):
            engine = trt.Runtime(_logger()).deserialize_cuda_engine(_plan(trt))
        self.context = engine.create_execution_context()
        self.x = aligned_empty((4,), torch.float32, torch.device("cpu"))
        self.y = aligned_empty((4,), torch.float32, torch.device("cpu"))
        self.feed(torch.arange(4.0))
        for name, t in (("x", self.x), ("y", self.y)):
            assert self.context.set_tensor_address(name, t.data_ptr())

    def feed(self, x: torch.Tensor) -> None:
        self.x.copy_(x)
        self.y.zero_()

    def run(self, stream: int) -> None:
        """An enqueue as TRTEngineModule makes it: a refusal raises."""
        if not self.context.execute_async_v3(stream):
            raise RuntimeError(_logger().take_errors())  # type: ignore[attr-defined]

    def check(self) -> None:
        torch.testing.assert_close(self.y, self.x * 2)


def test_double_binds_an_engine_to_the_device_current_when_deserialized(
    trt_double: ModuleType, cuda: TorchCuda
) -> None:
    engine = Engine(trt_double, cuda, 1)
    with pytest.raises(RuntimeError, match="bound to device 1 but the current device is 0"):
        engine.run(cuda.Stream(1).cuda_stream)
    with cuda.device(1), pytest.raises(RuntimeError, match="stream belongs to device 0"):
        engine.run(cuda.Stream(0).cuda_stream)
    with cuda.device(1):
        stream = cuda.Stream(1)
        engine.run(stream.cuda_stream)
        stream.synchronize()
    engine.check()


def test_enqueue_runs_on_the_engines_device_whatever_is_current(trt_double: ModuleType, cuda: TorchCuda) -> None:
    engines = [Engine(trt_double, cuda, i) for i in (0, 1)]
    gpu = CudaDevice()
    # Current device 0, default streams: engine 1 runs on a stream of GPU 1, under GPU 1.
    with gpu.stream(GPU[1]) as stream:
        engines[1].run(stream)
    assert cuda.current_device() == 0
    cuda.current_stream(1).synchronize()
    engines[1].check()
    # A caller's own stream on GPU 1 (current device 1 inside): engine 0 runs on GPU 0.
    caller = cuda.Stream(1)
    with cuda.stream(caller):
        with gpu.stream(GPU[0]) as stream:
            engines[0].run(stream)
        assert cuda.current_device() == 1
    cuda.current_stream(0).synchronize()
    engines[0].check()


def test_cuda_graphs_capture_and_replay_on_the_engines_device(trt_double: ModuleType, cuda: TorchCuda) -> None:
    gpu = CudaDevice()
    for index in (1, 0):  # torch's process-wide capture stream would be made on the first one's GPU
        engine = Engine(trt_double, cuda, index)
        replay = gpu.capture(engine.run, GPU[index])  # the warm-up runs for real
        engine.check()
        engine.feed(torch.tensor([5.0, -1.0, 0.5, 3.0]))
        replay()  # from GPU 0, default stream: the replay switches to the engine's GPU
        cuda.current_stream(index).synchronize()
        engine.check()  # the replay ran the captured enqueue on the new input
        assert cuda.current_device() == 0


def test_one_side_stream_per_gpu_not_one_per_call(trt_double: ModuleType, cuda: TorchCuda) -> None:
    engines = [Engine(trt_double, cuda, i) for i in (0, 1)]
    gpu = CudaDevice()
    for _ in range(3):
        for index, engine in enumerate(engines):
            with gpu.stream(GPU[index]) as stream:
                engine.run(stream)
            engine.check()
    assert cuda.streams_created == 2


def test_callers_stream_joins_the_side_stream_when_an_enqueue_raises(trt_double: ModuleType, cuda: TorchCuda) -> None:
    engine, refused = Engine(trt_double, cuda, 0), Engine(trt_double, cuda, 1)
    gpu = CudaDevice()
    with pytest.raises(RuntimeError, match="bound to device 1"):
        with gpu.stream(GPU[0]) as stream:
            engine.run(stream)
            refused.run(stream)  # TensorRT refuses it: the call raises with work already queued
    caller = cuda.current_stream(0)
    (side,) = {waiter for waiter, _ in cuda.joins if waiter != caller}
    assert cuda.joins == [(side, caller), (caller, side)]
    caller.synchronize()
    engine.check()  # work queued before the failure ran before the caller's stream went on


class _Output:
    """What `hold` touches of an output tensor: its device and record_stream."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.recorded: list[int] = []

    def record_stream(self, stream: object) -> None:
        self.recorded.append(getattr(stream, "cuda_stream"))


def test_outputs_made_on_the_side_stream_are_recorded_on_the_default_stream(
    trt_double: ModuleType, cuda: TorchCuda
) -> None:
    """From the default stream the engine runs on a side stream, whose memory pool its outputs
    come from, and the caller uses them on the default stream: recorded there, another thread's
    call cannot reuse their memory before that work has run. On the caller's own stream there
    is nothing to record."""
    gpu, out = CudaDevice(), _Output(GPU[1])
    with gpu.stream(GPU[1]) as side:
        gpu.hold(side, [out])
    assert side != 0 and out.recorded == [cuda.default_stream(1).cuda_stream]
    own, mine = cuda.Stream(1), _Output(GPU[1])
    with cuda.stream(own), gpu.stream(GPU[1]) as stream:
        gpu.hold(stream, [mine])
    assert stream == own.cuda_stream and mine.recorded == []
