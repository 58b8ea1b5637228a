"""Real models: trt_lower on ONNX Runtime vs a whole-graph ONNX Runtime session (CPU).

    python bench/bench_models.py [--blocks 6] [--calls 10] [--models resnet18,bert,...] [--json out.json]

Each model (torchvision and transformers architectures in small configs, random weights,
BatchNorm statistics calibrated by a few train-mode passes) is lowered with
backend="onnxruntime" and, independently, exported whole with `torch.onnx.export` (TorchScript
exporter, opset 17) into a session with trt_lower's own session options. The two run in
alternating blocks of `--calls` calls (the order flips per block); a block's median per call
gives one ratio, whole-graph time / lowered time (above 1: lowered is faster). Printed per
model: the median ratio over blocks and its spread; then the geometric mean over models. The
anchor gets numpy inputs made once; "torch" is the ratio against the same session fed from torch
tensors on each call, as a PyTorch caller would run it. A fourth contender, for a model lowered to
one engine, is that engine's ONNX alone in a bare `session.run`:
whole / engine is the ratio without trt_lower's per-call code, the part the emitted ONNX decides
(bench/onnx_opdiff.py lists where the two graphs differ after ONNX Runtime's optimizer).
See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
import warnings
from typing import Any, Callable

import numpy as np
import torch
import torchvision
import transformers

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import trt_lower  # noqa: E402
from trt_lower.engine.ort_session import create_session  # noqa: E402
from trt_lower.runtime import ort_module  # noqa: E402
from trt_lower.runtime.ort_module import OrtEngineModule  # noqa: E402

Example = tuple[torch.nn.Module, tuple[torch.Tensor, ...]]
IMAGE = (1, 3, 96, 96)


def _vision(name: str) -> Callable[[], Example]:
    def build() -> Example:
        model = getattr(torchvision.models, name)(weights=None)
        with torch.no_grad():  # BatchNorm statistics from the data, not the defaults
            model.train()
            for _ in range(3):
                model(torch.randn(4, *IMAGE[1:]))
        return model.eval(), (torch.randn(*IMAGE),)

    return build


class _Hidden(torch.nn.Module):
    """A transformers encoder/decoder body, token ids in, last hidden state out (plain tensors
    in and out, so the TorchScript exporter traces it)."""

    def __init__(self, body: torch.nn.Module) -> None:
        super().__init__()
        self.body = body

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        hidden: torch.Tensor = self.body(input_ids=ids, return_dict=True).last_hidden_state
        return hidden


def _text(config: Any, model_class: Any) -> Callable[[], Example]:
    def build() -> Example:
        return _Hidden(model_class(config)).eval(), (torch.randint(0, config.vocab_size, (1, 32)),)

    return build


_SMALL: dict[str, Any] = dict(
    hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512, vocab_size=1000
)
MODELS: dict[str, Callable[[], Example]] = {
    "resnet18": _vision("resnet18"),
    "mobilenet_v3_small": _vision("mobilenet_v3_small"),
    "mobilenet_v2": _vision("mobilenet_v2"),
    "shufflenet_v2_x0_5": _vision("shufflenet_v2_x0_5"),
    "squeezenet1_1": _vision("squeezenet1_1"),
    "efficientnet_b0": _vision("efficientnet_b0"),
    "mnasnet0_5": _vision("mnasnet0_5"),
    "regnet_y_400mf": _vision("regnet_y_400mf"),
    "bert": _text(transformers.BertConfig(**_SMALL), transformers.BertModel),
    "roberta": _text(transformers.RobertaConfig(**_SMALL), transformers.RobertaModel),
    "distilbert": _text(
        transformers.DistilBertConfig(dim=128, n_layers=2, n_heads=2, hidden_dim=512, vocab_size=1000),
        transformers.DistilBertModel,
    ),
    "gpt2": _text(transformers.GPT2Config(n_embd=128, n_layer=2, n_head=2, vocab_size=1000), transformers.GPT2Model),
}


def _names(inputs: tuple[torch.Tensor, ...]) -> list[str]:
    return [f"input_{i}" for i in range(len(inputs))]


def export_whole(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> bytes:
    """The model exported whole without trt_lower (TorchScript exporter, opset 17)."""
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = os.path.join(folder, "whole.onnx")
        torch.onnx.export(
            model, inputs, path, dynamo=False, opset_version=17, input_names=_names(inputs), do_constant_folding=True
        )
        with open(path, "rb") as f:
            return f.read()


def whole_graph(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> dict[str, Callable[[], object]]:
    """The whole-graph export, run by `session.run`: "whole" on numpy inputs made once (the
    anchor), "whole from torch" as a caller holding torch tensors runs it (`x.numpy()` in,
    `torch.from_numpy` out, as a lowered module does)."""
    session = create_session(export_whole(model, inputs))
    names = _names(inputs)
    feeds = {n: np.ascontiguousarray(t.numpy()) for n, t in zip(names, inputs)}
    return {
        "whole": lambda: session.run(None, feeds),
        "whole from torch": lambda: [
            torch.from_numpy(a) for a in session.run(None, {n: t.numpy() for n, t in zip(names, inputs)})
        ],
    }


def block(fn: Callable[[], object], calls: int) -> tuple[float, float]:
    """Median wall time and median CPU time of the process (all threads) per call. On a shared
    machine the CPU time is the steadier one: time spent preempted does not count."""
    wall, cpu = [], []
    for _ in range(calls):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def engine_sessions_with(**options: Any) -> None:
    """From now on, make every engine session trt_lower builds with these `create_session`
    options, over trt_lower's own choice (how the benches build their variants)."""

    def make(onnx_bytes: bytes, weights: Any = None, **chosen: Any) -> Any:
        return create_session(onnx_bytes, weights, **{**chosen, **options})

    # The engine modules make their sessions through ort_module's name.
    setattr(ort_module, "create_session", make)


def bare_engine(lowered: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> Callable[[], object] | None:
    """The lowered module's engine alone, its ONNX run by a bare `session.run` on the tensors it
    receives (none of trt_lower's per-call code); None unless there is exactly one engine."""
    engines = [m for m in lowered.modules() if isinstance(m, OrtEngineModule)]
    if len(engines) != 1:
        return None
    received: list[tuple[torch.Tensor, ...]] = []
    hook = engines[0].register_forward_pre_hook(lambda _, args: received.append(args))
    with torch.inference_mode():
        lowered(*inputs)
    hook.remove()
    session = create_session(engines[0].onnx_bytes)
    feeds = {i.name: np.ascontiguousarray(t.numpy()) for i, t in zip(session.get_inputs(), received[0])}
    return lambda: session.run(None, feeds)


def measure(name: str, blocks: int, calls: int) -> dict[str, Any]:
    torch.manual_seed(0)
    model, inputs = MODELS[name]()
    lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime")
    contenders = {"lowered": lambda: lowered(*inputs), **whole_graph(model, inputs)}
    engine = bare_engine(lowered, inputs)
    if engine is not None:
        contenders["engine"] = engine
    seconds: dict[str, list[tuple[float, float]]] = {n: [] for n in contenders}
    order = list(contenders)
    with torch.inference_mode():
        for fn in contenders.values():
            block(fn, 3)
        for b in range(blocks):
            for n in order if b % 2 == 0 else order[::-1]:
                seconds[n].append(block(contenders[n], calls))
    result: dict[str, Any] = {"engines": len(lowered.report.engines), "coverage": lowered.report.coverage}
    for i, clock in enumerate(("wall", "cpu")):
        times = {n: [s[i] for s in seconds[n]] for n in contenders}
        c = result[clock] = {f"{n}_ms": statistics.median(t) * 1e3 for n, t in times.items()}
        c["ratios"] = [w / max(x, 1e-9) for x, w in zip(times["lowered"], times["whole"])]
        c["ratio"] = statistics.median(c["ratios"])
        c["torch_ratio"] = statistics.median(
            w / max(x, 1e-9) for x, w in zip(times["lowered"], times["whole from torch"])
        )
        if engine is not None:  # the ONNX alone: what is left of the ratio without per-call overhead
            c["engine_ratio"] = statistics.median(w / max(x, 1e-9) for x, w in zip(times["engine"], times["whole"]))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    print(
        f"torch {torch.__version__}, load average {os.getloadavg()[0]:.2f}; {args.blocks} alternating blocks "
        f"x {args.calls} calls; ratio = whole-graph ORT time / lowered time (> 1: lowered faster); "
        "torch = the same ratio against the whole graph fed from torch tensors; "
        "engine = the lowered module's ONNX in a bare session.run, eng.ratio = whole / engine"
    )
    columns = (
        f" {'lowered ms':>10s} {'whole ms':>9s} {'ratio':>5s} {'spread':>10s} {'torch':>5s} {'engine ms':>9s}"
        f" {'eng.ratio':>9s}"
    )
    print(f"{'':28s}{'--- wall time ---':^64s}  {'--- process CPU time ---':^64s}")
    print(f"{'model':20s} {'engines':>7s}" + columns * 2)
    results = {}
    for name in args.models.split(","):
        r = results[name] = measure(name, args.blocks, args.calls)
        line = f"{name:20s} {r['engines']:7d}"
        for clock in ("wall", "cpu"):
            c = r[clock]
            line += (
                f" {c['lowered_ms']:10.3f} {c['whole_ms']:9.3f} {c['ratio']:5.2f} "
                f"{min(c['ratios']):4.2f}..{max(c['ratios']):4.2f} {c['torch_ratio']:5.2f} "
                + (f"{c['engine_ms']:9.3f} {c['engine_ratio']:9.2f}" if "engine_ms" in c else f"{'-':>9s} {'-':>9s}")
            )
        print(line, flush=True)
    summary = {}
    for clock in ("wall", "cpu"):
        ratios = {n: r[clock]["ratio"] for n, r in results.items()}
        geomean = math.exp(statistics.mean(math.log(x) for x in ratios.values()))
        low = min(ratios, key=ratios.__getitem__)
        summary[clock] = geomean
        torch_mean = math.exp(statistics.mean(math.log(r[clock]["torch_ratio"]) for r in results.values()))
        print(
            f"{clock}: geometric mean {geomean:.2f} (target >= 1.0); lowest {low} {ratios[low]:.2f} (target >= 0.95); "
            f"against the whole graph fed from torch {torch_mean:.2f}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"geomean": summary, "models": results}, f, indent=1)


if __name__ == "__main__":
    main()
