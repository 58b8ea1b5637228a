"""The same small CNN and transformer through every capture path: torch.export, fx
GraphModule, TorchScript (traced and scripted) and torch.compile."""

from __future__ import annotations

import logging
from typing import Any, Callable

import pytest
import torch
import torchvision

import trt_lower
from trt_lower import dynamo_backend
from trt_lower.engine import backend


class SmallCNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn(self.conv1(x)))
        y = torch.nn.functional.max_pool2d(y, 2) + 0.5
        y = torch.relu(self.conv2(y)).mean(dim=(2, 3))
        return self.fc(y)


class SmallTransformer(torch.nn.Module):
    """One pre-norm encoder block with multi-head attention, written out."""

    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads, self.head_dim, self.scale = heads, dim // heads, (dim // heads) ** -0.5
        self.embed = torch.nn.Embedding(100, dim)
        self.norm1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.mlp1 = torch.nn.Linear(dim, 4 * dim)
        self.mlp2 = torch.nn.Linear(4 * dim, dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q = q.reshape(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = k.reshape(b, s, self.heads, self.head_dim).transpose(1, 2)
        v = v.reshape(b, s, self.heads, self.head_dim).transpose(1, 2)
        attn = torch.softmax(q @ k.transpose(-2, -1) * self.scale, dim=-1)
        x = x + self.proj((attn @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.mlp2(torch.nn.functional.gelu(self.mlp1(self.norm2(x))))


MODELS: dict[str, Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]] = {
    "cnn": lambda: (SmallCNN().eval(), (torch.randn(2, 3, 16, 16),)),
    "transformer": lambda: (SmallTransformer().eval(), (torch.randint(0, 100, (2, 8)),)),
}

CAPTURES: dict[str, Callable[[torch.nn.Module, tuple[torch.Tensor, ...]], torch.nn.Module]] = {
    "export": lambda m, x: m,
    "fx": lambda m, x: torch.fx.symbolic_trace(m),
    "torchscript-trace": lambda m, x: torch.jit.trace(m, x),
    "torchscript-script": lambda m, x: torch.jit.script(m),
}


@pytest.mark.parametrize("capture", sorted(CAPTURES))
@pytest.mark.parametrize("model_name", sorted(MODELS))
def test_capture_path(model_name: str, capture: str) -> None:
    model, inputs = MODELS[model_name]()
    captured = CAPTURES[capture](model, inputs)
    lowered = trt_lower.lower_to_trt(captured, inputs, backend="onnxruntime")
    assert len(lowered.report.engines) == 1 and lowered.report.coverage >= 0.95, str(lowered.report)
    with torch.no_grad():
        torch.testing.assert_close(lowered(*inputs), model(*inputs), rtol=1e-4, atol=1e-4)


class Recorder:
    """Wraps lower_to_trt inside the Dynamo backend to see what each compile produced."""

    def __init__(self) -> None:
        self.lowered: list[trt_lower.LoweredModule] = []

    def __call__(self, *args: Any, **kwargs: Any) -> trt_lower.LoweredModule:
        lowered = trt_lower.lower_to_trt(*args, **kwargs)
        self.lowered.append(lowered)
        return lowered


class WithGraphBreak(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cnn = SmallCNN()
        self.head = torch.nn.Linear(5, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.cnn(x)
        if y.sum() > 0:  # data-dependent Python control flow: Dynamo breaks the graph here
            y = y * 2
        return torch.sigmoid(self.head(y)) * 3 + 1


def test_torch_compile_lowers_each_graph_and_does_not_recompile(monkeypatch: pytest.MonkeyPatch) -> None:
    torch._dynamo.reset()
    recorder = Recorder()
    monkeypatch.setattr(dynamo_backend, "lower_to_trt", recorder)
    model = WithGraphBreak().eval()
    x = torch.randn(2, 3, 16, 16)
    compiled = torch.compile(model, backend="trt_lower", options={"backend": "onnxruntime"})
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
        assert len(recorder.lowered) >= 2  # one per graph around the break
        for lowered in recorder.lowered:
            assert lowered.report.engines and lowered.report.coverage >= 0.95, str(lowered.report)
        compiled(x)
    assert len(recorder.lowered) == 2 or len(recorder.lowered) == 3  # the taken branch adds one
    count = len(recorder.lowered)
    with torch.no_grad():
        compiled(x)
    assert len(recorder.lowered) == count, "a second call with the same shapes recompiled"


def test_torch_compile_warns_once_that_tensorrt_is_not_usable(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """backend="auto" without TensorRT: one warning, not one per Dynamo graph."""
    torch._dynamo.reset()
    monkeypatch.setattr(backend, "_warned_unusable", set())
    monkeypatch.setattr(backend.trt_engine, "unavailable_reason", lambda: "no tensorrt module")
    model = WithGraphBreak().eval()
    compiled = torch.compile(model, backend="trt_lower")
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="trt_lower"):
        for x in (torch.randn(2, 3, 16, 16), -torch.ones(2, 3, 16, 16)):  # both branches
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    warned = [r.getMessage() for r in caplog.records if "TensorRT is not usable" in r.getMessage()]
    assert warned == ["trt_lower: TensorRT is not usable (no tensorrt module); running engines on ONNX Runtime"]


def test_torch_compile_options_reach_lower_to_trt() -> None:
    torch._dynamo.reset()
    model = SmallCNN().eval()
    x = torch.randn(1, 3, 16, 16)
    compiled = torch.compile(
        model,
        backend="trt_lower",
        options={"backend": "onnxruntime", "require_full": True, "fallback_ops": ["aten.relu.default"]},
    )
    with pytest.raises(Exception, match="forced to eager by fallback_ops"):
        compiled(x)


def test_torchscript_that_cannot_convert_says_why() -> None:
    class Weird(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = x
            for _ in range(int(x.shape[0])):
                out = torch.cat([out, x])
            return out

    scripted = torch.jit.script(Weird())
    try:
        lowered = trt_lower.lower_to_trt(scripted, (torch.randn(2, 3),), backend="onnxruntime")
    except trt_lower.CaptureError as e:
        assert "TorchScript" in str(e) and "eager nn.Module" in str(e)
    else:  # the converter handled it: then the result must be right
        torch.testing.assert_close(lowered(torch.randn(2, 3) * 0 + 1), Weird()(torch.ones(2, 3)))


class CountingRecorder(Recorder):
    """Also counts the calls that reach each lowered module (its engines), not eager."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.inputs: list[Any] = []

    def __call__(self, *args: Any, **kwargs: Any) -> trt_lower.LoweredModule:
        self.inputs.append(args[1])
        lowered = super().__call__(*args, **kwargs)
        forward = lowered.forward

        def counted(*inputs: Any) -> Any:
            self.calls += 1
            return forward(*inputs)

        lowered.forward = counted  # type: ignore[method-assign]
        return lowered


def test_torch_compile_default_dynamic_keeps_engines_across_batch_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    """dynamic=None: the second batch size makes Dynamo hand over a graph with a symbolic batch."""
    torch._dynamo.reset()
    recorder = CountingRecorder()
    monkeypatch.setattr(dynamo_backend, "lower_to_trt", recorder)
    model = torchvision.models.resnet18(num_classes=10).eval()
    compiled = torch.compile(model, backend="trt_lower", options={"backend": "onnxruntime"})
    with torch.no_grad():
        for n in (2, 3, 4, 5):
            x = torch.randn(n, 3, 32, 32)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-3)
    assert len(recorder.lowered) == 2, "one static graph, then one dynamic graph for every later batch"
    dynamic = recorder.lowered[-1]
    assert len(dynamic.report.engines) == 1 and dynamic.report.coverage == 1.0, str(dynamic.report)
    assert recorder.calls == 4, "a call ran eagerly"


def test_torch_compile_takes_ranges_from_mark_dynamic(monkeypatch: pytest.MonkeyPatch) -> None:
    torch._dynamo.reset()
    recorder = CountingRecorder()
    monkeypatch.setattr(dynamo_backend, "lower_to_trt", recorder)
    model = SmallCNN().eval()
    compiled = torch.compile(model, backend="trt_lower", options={"backend": "onnxruntime"})
    with torch.no_grad():
        for n in (3, 5):
            x = torch.randn(n, 3, 16, 16)
            torch._dynamo.mark_dynamic(x, 0, min=2, max=6)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    assert len(recorder.lowered) == 1 and recorder.calls == 2
    (spec,) = recorder.inputs[0]
    assert spec.min_shape == (2, 3, 16, 16) and spec.max_shape == (6, 3, 16, 16), spec


class WithCond(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.lin(x)) * 2 + 1
        z = torch.cond(y.sum() > 0, lambda t: t * 3 - 1, lambda t: torch.sigmoid(t), (y,))
        return torch.tanh(self.lin(z)) + 0.5


def test_torch_cond_runs_inside_the_engine() -> None:
    model = WithCond().eval()
    x = torch.randn(2, 4)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="onnxruntime")
    assert lowered.report.fallbacks == [], str(lowered.report)
    assert len(lowered.report.engines) == 1 and "cond" in lowered.report.engines[0].ops, str(lowered.report)
    with torch.no_grad():
        for sign in (1, -1):  # both branches
            torch.testing.assert_close(lowered(x * sign), model(x * sign))


def test_a_dynamo_size_without_bounds_takes_the_default_range() -> None:
    """Dynamo's unbounded sizes carry torch's int_oo, which calls itself finite but is no int
    (int() of it raised AttributeError, FasterRCNN under torch.compile)."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    size = ShapeEnv().create_unbacked_symint()
    assert dynamo_backend._dim_range(size, 5) == (0, 5, dynamo_backend.DEFAULT_DYNAMIC_MAX)
