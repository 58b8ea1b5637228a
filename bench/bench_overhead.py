"""Per-call host overhead of a lowered module above its engine (ONNX Runtime backend, CPU).

    python bench/bench_overhead.py [--blocks 7] [--calls 50] [--models mlp,bert,resnet18] [--clock wall|cpu]
                                   [--threads N] [--loaded] [--json out.json]

For each model, side by side in one process: eager PyTorch, the lowered module, its engine
module alone (called with the arguments the lowered module hands it), a bare `session.run` on
the engine's own `onnx_bytes` in a session with trt_lower's options (numpy feeds made once), the
same bare run fed from the torch tensors each call (`x.numpy()` in, `torch.from_numpy` out: what
a hand-written ONNX Runtime call from PyTorch pays), and the host cost alone: the lowered module
with every engine's session call swapped for a stub that returns its outputs at once, so the
engines' own time and its noise drop out. All run in alternating blocks of `--calls`
calls (the order rotates per block, so load drifts reach all of them); per-call time is a block's
median, and the figures are the median over blocks with their spread (min..max). Overhead =
lowered - bare, against the target of 10 µs plus 5 µs per further engine. "mlp-relu-eager" is
the MLP lowered with its ReLU eager: two engines, run in turn by the bare contenders; its lowered
figures also hold the eager ReLU. --threads N gives every session (the engines' and the bare
ones) N intra-op threads: with 1, the engines' run-to-run noise, which hides lowered - bare on
the larger models with ONNX Runtime's default of a thread per core, mostly drops out. --loaded
adds the module saved and loaded again, engines stubbed, with and without the run-time checks of
its eager nodes (trt_lower/deploy/allocations.py): their difference per checked node is what the
allocation budget costs; "eager-sizes" is a model whose eager nodes it checks. See
bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.utils._pytree as pytree
import torchvision
import transformers

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_models import engine_sessions_with  # noqa: E402

import trt_lower  # noqa: E402
from converters.core.dtypes import NUMPY_TYPES  # noqa: E402
from trt_lower.engine.engines import engine_is_whole_call  # noqa: E402
from trt_lower.engine.ort_session import create_session  # noqa: E402
from trt_lower.runtime.ort_module import OrtEngineModule  # noqa: E402

Example = tuple[torch.nn.Module, tuple[torch.Tensor, ...]]


def mlp() -> Example:
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16))
    return model.eval(), (torch.randn(1, 16),)


def bert() -> Example:
    config = transformers.BertConfig(
        hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512, vocab_size=1000
    )
    model: torch.nn.Module = transformers.BertModel(config)
    return model.eval(), (torch.randint(0, 1000, (1, 32)),)


def resnet18() -> Example:
    return torchvision.models.resnet18(weights=None).eval(), (torch.randn(1, 3, 64, 64),)


class EagerSizes(torch.nn.Module):
    """Two engines around eager nodes that size what they make from their arguments: a repeat,
    expands and a one_hot (each checked against the allocation budget when loaded from a file)."""

    def __init__(self) -> None:
        super().__init__()
        self.inner, self.outer = torch.nn.Linear(16, 16), torch.nn.Linear(32, 16)

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        h = self.inner(x).repeat(1, 2) + torch.nn.functional.one_hot(ids, 32).expand(4, 32)
        out: torch.Tensor = self.outer(h.expand(2, 4, 32))
        return out.sum(0)


def eager_sizes() -> Example:
    return EagerSizes().eval(), (torch.randn(4, 16), torch.tensor(3))


MODELS: dict[str, Callable[[], Example]] = {
    "mlp": mlp,
    "bert": bert,
    "resnet18": resnet18,
    "mlp-relu-eager": mlp,
    "eager-sizes": eager_sizes,
}
# Lowering settings other than the backend, by model: the MLP's ReLU eager makes two engines.
LOWERING: dict[str, dict[str, Any]] = {
    "mlp-relu-eager": {"fallback_ops": ["aten.relu.default"], "min_block_size": 1},
    "eager-sizes": {
        "fallback_ops": ["aten.repeat.default", "aten.expand.default", "aten.one_hot.default"],
        "min_block_size": 1,
    },
}


def engine_calls(
    lowered: trt_lower.LoweredModule, inputs: tuple[torch.Tensor, ...]
) -> list[tuple[OrtEngineModule, tuple[Any, ...]]]:
    """Each engine, in call order, with the arguments the lowered module hands it for `inputs`."""
    seen: list[tuple[OrtEngineModule, tuple[Any, ...]]] = []
    engines = [m for m in lowered.modules() if isinstance(m, OrtEngineModule)]
    handles = [e.register_forward_pre_hook(lambda module, args: seen.append((module, args))) for e in engines]
    with torch.no_grad():
        lowered(*inputs)
    for handle in handles:
        handle.remove()
    return seen


def _stub(lowered: trt_lower.LoweredModule, inputs: tuple[torch.Tensor, ...]) -> None:
    """Swap each engine's session run for one that hands back, at once, what it computed for
    `inputs` (their buffers by address, as the session's own outputs come; numpy arrays where
    the engine takes ONNX Runtime's public path): the lowered module's time is then its host
    cost alone (the stub's own ~1 µs per engine included)."""
    for engine, args in engine_calls(lowered, inputs):
        outputs = engine.run(args)
        recorded = [t.clone() for t in (outputs if isinstance(outputs, tuple) else (outputs,))]
        pointers = [t.data_ptr() for t in recorded]
        types = [NUMPY_TYPES[t.dtype] for t in recorded]
        shapes = [t.shape for t in recorded]

        def fill(
            options: Any,
            names: Any,
            feeds: Any,
            outs: Any,
            fetched: Any,
            devices: Any,
            recorded: list[torch.Tensor] = recorded,
            pointers: list[int] = pointers,
            types: list[Any] = types,
            shapes: list[Any] = shapes,
        ) -> None:
            fetched.push_back_batch(recorded, pointers, types, shapes, devices)

        if engine._fast:
            engine._run_vector = fill
        else:
            engine._run = lambda names, feeds, options, arrays=[t.numpy() for t in recorded]: arrays


def _in_turn(calls: Sequence[Callable[..., object]]) -> Callable[[], object]:
    """One call running `calls` in turn (the call itself where there is one)."""
    return calls[0] if len(calls) == 1 else lambda: [call() for call in calls]


def loaded_contenders(
    lowered: trt_lower.LoweredModule, inputs: tuple[torch.Tensor, ...]
) -> tuple[dict[str, Callable[[], object]], int]:
    """The module saved and loaded twice, engines stubbed: once as load makes it, once with its
    eager nodes' run-time checks taken out; and how many nodes are checked."""
    with tempfile.TemporaryDirectory() as tmp:
        trt_lower.save(lowered, os.path.join(tmp, "m.trtl"))
        checked, unchecked = (trt_lower.load(os.path.join(tmp, "m.trtl"), backend="onnxruntime") for _ in range(2))
    unchecked.call_checks = {}
    unchecked.recompile()
    for module in (checked, unchecked):
        _stub(module, inputs)
    calls = {"loaded, stubbed": lambda: checked(*inputs), "loaded unchecked, stubbed": lambda: unchecked(*inputs)}
    return calls, len(checked.call_checks)


def contenders(name: str, threads: int | None, loaded: bool = False) -> tuple[dict[str, Callable[[], object]], int]:
    """With k engines, "engine" calls each engine module in turn and the bare runs run each
    engine's session in turn (on the arguments the lowered call hands them): the eager ops
    between them are in the lowered figures only."""
    engine_sessions_with(threads=threads)
    torch.manual_seed(0)
    model, inputs = MODELS[name]()
    lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", **LOWERING.get(name, {}))
    called = engine_calls(lowered, inputs)
    # The session options trt_lower picks.
    alone = engine_is_whole_call(len(called), len(lowered.report.fallbacks))
    engine_runs, bare_runs, from_torch_runs = [], [], []
    for engine, args in called:
        session = create_session(engine.onnx_bytes, spin_between_runs=alone, threads=threads)
        names = [i.name for i in session.get_inputs()]
        feeds = {n: np.ascontiguousarray(a.numpy()) for n, a in zip(names, args)}
        outputs = [o.name for o in session.get_outputs()]
        engine_runs.append(lambda engine=engine, args=args: engine(*args))
        bare_runs.append(lambda session=session, outputs=outputs, feeds=feeds: session.run(outputs, feeds))
        from_torch_runs.append(
            lambda session=session, outputs=outputs, names=names, args=args: [
                torch.from_numpy(a) for a in session.run(outputs, {n: a.numpy() for n, a in zip(names, args)})
            ]
        )
    flat = pytree.tree_leaves(lowered(*inputs))
    spec = lowered._out_spec
    assert spec is not None  # torch.export's module, which lowering keeps, records it
    stubbed = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", **LOWERING.get(name, {}))
    _stub(stubbed, inputs)
    calls: dict[str, Callable[[], object]] = {
        "eager": lambda: model(*inputs),
        "lowered": lambda: lowered(*inputs),
        "engine": _in_turn(engine_runs),
        "bare session.run": _in_turn(bare_runs),
        "bare from torch": _in_turn(from_torch_runs),
        "lowered, engines stubbed": lambda: stubbed(*inputs),
        # What eager pays too: the model's own output object (a transformers ModelOutput, say).
        "output object": lambda: pytree.tree_unflatten(flat, spec),
    }
    if loaded:
        extra, checks[name] = loaded_contenders(lowered, inputs)
        calls.update(extra)
    return calls, len(called)


# The number of checked eager nodes of each model's loaded module (--loaded).
checks: dict[str, int] = {}


def measure(
    calls: dict[str, Callable[[], object]], blocks: int, per_block: int, clock: Callable[[], float]
) -> dict[str, list[float]]:
    """Per-call medians (µs), one per block and contender."""
    names = list(calls)
    seconds: dict[str, list[float]] = {n: [] for n in names}
    with torch.inference_mode():
        for fn in calls.values():  # warm-up
            for _ in range(5):
                fn()
        for block in range(blocks):
            for n in names[block % len(names) :] + names[: block % len(names)]:
                fn, times = calls[n], []
                for _ in range(per_block):
                    start = clock()
                    fn()
                    times.append(clock() - start)
                seconds[n].append(statistics.median(times) * 1e6)
    return seconds


# perf_counter: wall time. process_time: CPU time of all the process's threads, steadier on a
# shared machine (time spent preempted does not count).
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=7)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--loaded", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    print(
        f"torch {torch.__version__}, load average {os.getloadavg()[0]:.2f}; "
        f"intra-op threads {args.threads or 'ONNX Runtime default'}; "
        f"{args.clock} clock, median of {args.blocks} blocks x {args.calls} calls "
        "(spread: min..max of block medians)"
    )
    report: dict[str, Any] = {}
    for name in args.models.split(","):
        calls, engines = contenders(name, args.threads, args.loaded)
        times = measure(calls, args.blocks, args.calls, CLOCKS[args.clock])
        med = {n: statistics.median(ts) for n, ts in times.items()}
        overhead = [lo - bare for lo, bare in zip(times["lowered"], times["bare session.run"])]
        target = 10 + 5 * (engines - 1)
        print(f"\n{name} ({engines} engine{'s' if engines > 1 else ''})")
        for n, ts in times.items():
            print(f"  {n:18s} {med[n]:9.1f} µs   ({min(ts):.1f}..{max(ts):.1f})")
        print(
            f"  lowered - bare     {statistics.median(overhead):9.1f} µs   "
            f"({min(overhead):.1f}..{max(overhead):.1f}; target <= {target} µs)"
        )
        print(f"  engine - bare      {med['engine'] - med['bare session.run']:9.1f} µs")
        print(f"  lowered - bare from torch {med['lowered'] - med['bare from torch']:7.1f} µs")
        host = times["lowered, engines stubbed"]
        print(
            f"  host overhead      {statistics.median(host):9.1f} µs   ({min(host):.1f}..{max(host):.1f}; "
            "everything a lowered call runs but the engines' session.run)"
        )
        print(f"  of which the model's output object {med['output object']:5.1f} µs")
        if args.loaded:
            cost = [a - b for a, b in zip(times["loaded, stubbed"], times["loaded unchecked, stubbed"])]
            per_node = f", {statistics.median(cost) / checks[name]:.2f} µs per node" if checks[name] else ""
            print(
                f"  eager checks       {statistics.median(cost):9.1f} µs   ({min(cost):.1f}..{max(cost):.1f}; "
                f"{checks[name]} checked node{'s' if checks[name] != 1 else ''}{per_node})"
            )
        report[name] = {
            "engines": engines,
            "per_block_us": times,
            "overhead_us": overhead,
            "host_overhead_us": host,
            "target_us": target,
        }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
