"""Where one call of a lowered module spends its time: each engine, each eager segment (a run of
eager nodes between engines), and the rest, trt_lower's own host overhead (input guard, graph
dispatch, getitems).

Each node is timed as torch.fx.Interpreter runs it (on CUDA with a synchronize after it, so a
node's GPU work is charged to it), an eager op through the binding the generated forward calls
(runtime/bindings.py). The overhead is a plain call of the module, made right before
each interpreted one, minus that call's engines and eager segments: the interpreter's own cost is
charged to no one, and pairing the two calls keeps drift of the machine out of the difference.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.utils._pytree as pytree

from splitter.partition import ENGINE_PREFIX, is_compute
from trt_lower.runtime.bindings import eager_ops_bound
from trt_lower.values.call import Inputs, model_call


@dataclass(frozen=True)
class Part:
    name: str  # engine_<k>, eager_<j> or "overhead"
    kind: str  # "engine", "eager" or "overhead"
    ms: float  # median over the timed calls
    nodes: int  # compute nodes in it (engines: as the report counts them)


def _segments(gm: torch.fx.GraphModule) -> dict[torch.fx.Node, str]:
    """Each engine call and eager compute node -> the part it belongs to; eager nodes between
    the same two engines form one segment."""
    owner: dict[torch.fx.Node, str] = {}
    segment = -1
    open_segment = False
    for node in gm.graph.nodes:
        if node.op == "call_module" and str(node.target).startswith(ENGINE_PREFIX):
            owner[node] = str(node.target)
            open_segment = False
        elif is_compute(node):
            if not open_segment:
                segment, open_segment = segment + 1, True
            owner[node] = f"eager_{segment}"
    return owner


class _TimingInterpreter(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule, owner: dict[torch.fx.Node, str], sync: Callable[[], None]):
        super().__init__(gm)
        self.owner = owner
        self.sync = sync
        self.ms: dict[str, float] = defaultdict(float)

    def run_node(self, n: torch.fx.Node) -> Any:
        part = self.owner.get(n)
        if part is None:
            return super().run_node(n)
        start = time.perf_counter()
        result = super().run_node(n)
        self.sync()
        self.ms[part] += (time.perf_counter() - start) * 1e3
        return result


def _no_sync() -> None:
    pass


def breakdown(
    gm: torch.fx.GraphModule, inputs: Inputs, calls: int = 5, *, kwargs: dict[str, Any] | None = None
) -> list[Part]:
    """The parts of one call `gm(*inputs, **kwargs)`, each the median over `calls` calls."""
    args, kwargs = model_call(inputs, kwargs)
    # The graph's placeholders take the leaves as the lowered module's forward flattens them.
    leaves = pytree.tree_leaves((args, kwargs))
    owner = _segments(gm)
    cuda = any(isinstance(t, torch.Tensor) and t.is_cuda for t in leaves)
    sync = torch.cuda.synchronize if cuda else _no_sync
    runs, overheads = [], []
    # The interpreter calls eager ops as the generated forward does (the forward itself is unchanged).
    with eager_ops_bound(gm.graph):
        for _ in range(calls):
            interp = _TimingInterpreter(gm, owner, sync)
            with torch.inference_mode():
                sync()
                start = time.perf_counter()
                gm(*args, **kwargs)
                sync()
                call_ms = (time.perf_counter() - start) * 1e3
                interp.run(*leaves)
            runs.append(interp.ms)
            overheads.append(call_ms - sum(interp.ms.values()))
    counts = Counter(owner.values())  # an eager segment's compute nodes (an engine: 1 call)
    report = getattr(gm, "report", None)
    counts.update({e.name: e.num_nodes - 1 for e in (report.engines if report is not None else [])})
    parts = [
        Part(
            name,
            "engine" if name.startswith(ENGINE_PREFIX) else "eager",
            statistics.median(r[name] for r in runs),
            counts[name],
        )
        for name in counts
    ]
    return [*parts, Part("overhead", "overhead", max(0.0, statistics.median(overheads)), 0)]
