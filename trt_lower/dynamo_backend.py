"""`torch.compile(model, backend="trt_lower")`: each graph Dynamo captures is lowered.

Dynamo hands the backend an FX graph whose parameters and buffers are graph inputs (it inlines
nn.Modules). Engines want weights as constants, so those inputs are frozen into the graph: the
compiled function drops them from each call. The same graph serves every module instance that
shares its code, each with its own weights, so the engines are built per set of weight tensors
and rebuilt when a weight changes in place (_EnginesPerWeights).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
from torch._dynamo import register_backend

from trt_lower.api import lower_to_trt
from trt_lower.capture.aten_graph import CaptureError
from trt_lower.stitch.lowered import LoweredModule
from trt_lower.values.ranges import int_bound
from trt_lower.values.spec import TensorSpec

log = logging.getLogger("trt_lower")


def _is_weight(node: torch.fx.Node, example: Any) -> bool:
    if isinstance(example, torch.nn.Parameter):
        return True
    grapharg = node.meta.get("grapharg")
    source = getattr(grapharg, "source", None)
    return source is not None and "._buffers[" in source.name


# The largest size a dynamic dim's engines accept when Dynamo's symbol has no upper bound (no
# `torch._dynamo.mark_dynamic(x, dim, max=...)`): calls beyond it run that graph eagerly.
DEFAULT_DYNAMIC_MAX = 256


def _example(node: torch.fx.Node) -> Any:
    return node.meta.get("example_value", node.meta.get("val"))


def _dim_range(d: torch.SymInt, seen: int) -> tuple[int, int, int] | str:
    """(min, opt, max) of a symbolic dim from its Dynamo symbol's value range."""
    expr = d.node.expr
    if expr.is_number:  # a dim Dynamo specialized (dynamic=True on a dim that never varies)
        return int(expr), int(expr), int(expr)
    if not expr.is_Symbol:
        return f"a dim computed from sizes ({expr})"
    shape_env = d.node.shape_env
    bounds = shape_env.var_to_range.get(expr) if shape_env is not None else None
    unbounded = max(DEFAULT_DYNAMIC_MAX, seen)
    if bounds is None:
        return 0, seen, unbounded
    return int_bound(bounds.lower, 0), seen, int_bound(bounds.upper, unbounded)


def _spec(node: torch.fx.Node, example: torch.Tensor) -> TensorSpec | str:
    """The TensorSpec of a runtime tensor input (static dims fixed, symbolic dims ranged)."""
    ranges: list[tuple[int, int, int]] = []
    for d, seen in zip(_example(node).shape, example.shape):
        r = (d, d, d) if isinstance(d, int) else _dim_range(d, int(seen))
        if isinstance(r, str):
            return f"input {node.name}: {r}"
        ranges.append(r)
    lo, opt, hi = ([r[k] for r in ranges] for k in range(3))
    return TensorSpec(lo, opt, hi, dtype=example.dtype)


@dataclass
class _Prepared:
    """A Dynamo graph made ready for lower_to_trt: its weight placeholders become get_attr
    constants, its size placeholders (Dynamo's SymInt inputs) sym_size reads of a tensor input."""

    gm: torch.fx.GraphModule  # Dynamo's graph: its own constants (get_attr) stay its attributes
    graph: torch.fx.Graph
    weights: list[int]  # the positions of the weight inputs, frozen as `_weight_<i>`
    runtime: list[int]  # the positions of the tensor inputs that remain
    inputs: list[torch.Tensor | TensorSpec]  # their examples, or specs where a size varies

    def freeze(self, args: Sequence[Any]) -> torch.fx.GraphModule:
        """The graph with the weights of this call (`args`, as Dynamo passes them) as constants."""
        holder = torch.fx.GraphModule(self.gm, self.gm.graph)
        for i in self.weights:
            holder.register_buffer(f"_weight_{i}", args[i].detach())
        return torch.fx.GraphModule(holder, self.graph)


def _prepare(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> _Prepared | str:
    """`gm` prepared for lower_to_trt, or why it cannot be."""
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    prepared = _Prepared(gm, graph, [], [], [])
    sizes: list[torch.fx.Node] = []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, (node, example) in enumerate(zip(placeholders, example_inputs)):
        if _is_weight(node, example):
            env[node] = graph.get_attr(f"_weight_{i}")
            prepared.weights.append(i)
        elif isinstance(example, torch.Tensor):
            env[node] = graph.placeholder(node.name)
            prepared.runtime.append(i)
            static = all(isinstance(d, int) for d in _example(node).shape)
            spec = example if static else _spec(node, example)
            if isinstance(spec, str):
                return spec
            prepared.inputs.append(spec)
        elif isinstance(example, torch.SymInt):
            sizes.append(node)
        else:
            return f"input {node.name} is a {type(example).__name__}, not a tensor or a size"
    for node in sizes:  # a size input is the size of some tensor input's dim
        symbol = _example(node).node.expr
        source = next(
            (
                (p, k)
                for p in placeholders
                if p in env and env[p].op == "placeholder"
                for k, d in enumerate(_example(p).shape)
                if isinstance(d, torch.SymInt) and d.node.expr == symbol
            ),
            None,
        )
        if source is None:
            return f"size input {node.name} ({symbol}) is no tensor input's dim"
        env[node] = graph.call_function(torch.ops.aten.sym_size.int, (env[source[0]], source[1]))
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            env[node] = graph.node_copy(node, env.__getitem__)
    return prepared


def _fits(spec: torch.Tensor | TensorSpec, x: Any) -> bool:
    if not isinstance(spec, TensorSpec):
        return True
    return all(lo <= d <= hi for lo, d, hi in zip(spec.min_shape, x.shape, spec.max_shape))


def _state(t: torch.Tensor) -> tuple[int, int]:
    """What changes when a tensor's values are changed in place (its version counter) or its
    memory replaced (`p.data = ...`). An inference-mode tensor keeps no version counter: an
    in-place change to it (possible only inside inference mode) goes unseen."""
    return (-1 if t.is_inference() else t._version), t.data_ptr()


class _EnginesPerWeights:
    """The lowered graph for each set of weights a Dynamo graph runs with.

    With `inline_inbuilt_nn_modules` (Dynamo's default) one graph serves every module instance
    that shares its code, each call passing that instance's parameters and buffers, while an
    engine holds the weights it was built with: so each set of weight tensors (by identity) gets
    its own lowering, built on its first call. A weight changed in place since its engines were
    built (an optimizer step, `.copy_`, `p.data = ...`; Dynamo's own constants too, where it
    keeps weights as attributes) rebuilds them, with a warning. The weight tensors of every
    lowering stay referenced, so that an identity cannot be reused by another tensor.
    """

    def __init__(self, prepared: _Prepared, options: dict[str, Any]) -> None:
        self.prepared = prepared
        self.options = options
        gm = prepared.gm
        self.constants = [
            t
            for node in gm.graph.find_nodes(op="get_attr")
            if isinstance(t := functools.reduce(getattr, str(node.target).split("."), gm), torch.Tensor)
        ]
        # by the ids of the weight tensors: (those tensors, the weights' states, the lowering or None: eager)
        self.entries: dict[
            tuple[int, ...], tuple[list[torch.Tensor], tuple[tuple[int, int], ...], LoweredModule | None]
        ] = {}

    def lowering(self, args: Sequence[Any]) -> LoweredModule | None:
        """The lowering for the weights in `args` (Dynamo's arguments); None: run eagerly."""
        weights = [args[i] for i in self.prepared.weights]
        key = tuple(map(id, weights))
        state = tuple(_state(t) for t in (*weights, *self.constants))
        entry = self.entries.get(key)
        if entry is not None and entry[1] == state:
            return entry[2]
        if entry is not None:
            log.warning(
                "trt_lower: weights of a compiled graph changed in place since its engines were built; "
                "rebuilding its engines"
            )
        lowered = self._lower(args)
        self.entries[key] = (weights, state, lowered)
        return lowered

    def _lower(self, args: Sequence[Any]) -> LoweredModule | None:
        inputs = self.prepared.inputs
        try:
            # torch.export inside Dynamo's tracing context would add its guards to Dynamo's frame.
            with torch._guards.tracing(None):
                lowered = lower_to_trt(self.prepared.freeze(args), inputs, **self.options)
        except CaptureError as e:
            log.warning("trt_lower: a Dynamo graph stays eager: %s", e)
            return None
        ranges = [f"{i.describe()}" for i in inputs if isinstance(i, TensorSpec)]
        log.info(
            "trt_lower: compiled a Dynamo graph%s\n%s", f" for input ranges {ranges}" if ranges else "", lowered.report
        )
        return lowered


def trt_lower_backend(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], options: dict[str, Any] | None = None
) -> Callable[..., Any]:
    """Options are lower_to_trt's keyword arguments: `options={"backend": "onnxruntime"}`.

    A graph with symbolic sizes (torch.compile's default `dynamic=None` after a shape changed)
    is lowered with each symbolic dim ranged as Dynamo's symbol is (`mark_dynamic`'s min/max),
    up to DEFAULT_DYNAMIC_MAX where the symbol has no upper bound. Each set of weights the graph
    is called with has engines of its own (_EnginesPerWeights).
    """
    prepared = _prepare(gm, example_inputs)
    if isinstance(prepared, str):
        log.warning("trt_lower: a Dynamo graph stays eager: %s", prepared)
        return gm.forward
    engines = _EnginesPerWeights(prepared, options or {})
    if engines.lowering(example_inputs) is None:  # lowered now: Dynamo's compile is where errors belong
        return gm.forward
    runtime, inputs = prepared.runtime, prepared.inputs

    def run(*args: Any) -> Any:
        tensors = [args[i] for i in runtime]
        if not all(_fits(spec, x) for spec, x in zip(inputs, tensors)):
            log.warning(
                "trt_lower: input shapes %s are outside the engines' ranges %s; this call runs eagerly",
                [tuple(x.shape) for x in tensors],
                [i.describe() for i in inputs if isinstance(i, TensorSpec)],
            )
            return gm.forward(*args)
        lowered = engines.lowering(args)
        return gm.forward(*args) if lowered is None else lowered(*tensors)

    return run


def register() -> None:
    """Make `backend="trt_lower"` known to torch.compile (trt_lower/__init__.py calls this where
    the `torch_dynamo_backends` entry point is not installed)."""
    register_backend(trt_lower_backend, name="trt_lower")
