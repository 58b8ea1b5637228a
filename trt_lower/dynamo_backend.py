"""`torch.compile(model, backend="trt_lower")`: each graph Dynamo captures is lowered.

Dynamo hands the backend an FX graph whose parameters and buffers are graph inputs (it inlines
nn.Modules). Engines want weights as constants, so those inputs are frozen into the graph: the
compiled function drops them from each call. Like any TensorRT deployment, in-place updates of
the weights after compilation are not seen; recompile after training.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

import torch
from torch._dynamo import register_backend

from trt_lower.api import lower_to_trt
from trt_lower.capture.graph import CaptureError
from trt_lower.values.spec import TensorSpec
from trt_lower.values.ranges import int_bound

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


def _prepare(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
             ) -> tuple[torch.fx.GraphModule, list[int], list[torch.Tensor | TensorSpec]] | str:
    """A copy of `gm` for lower_to_trt: weight placeholders become get_attr constants, size
    placeholders (Dynamo's SymInt inputs) become sym_size reads of a tensor input; with the
    positions of the tensor inputs that remain and their examples/specs. Or why it cannot be."""
    frozen = torch.fx.GraphModule(gm, gm.graph)
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    runtime: list[int] = []
    inputs: list[torch.Tensor | TensorSpec] = []
    sizes: list[torch.fx.Node] = []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, (node, example) in enumerate(zip(placeholders, example_inputs)):
        if _is_weight(node, example):
            name = f"_weight_{i}"
            frozen.register_buffer(name, example.detach())
            env[node] = graph.get_attr(name)
        elif isinstance(example, torch.Tensor):
            env[node] = graph.placeholder(node.name)
            runtime.append(i)
            static = all(isinstance(d, int) for d in _example(node).shape)
            spec = example if static else _spec(node, example)
            if isinstance(spec, str):
                return spec
            inputs.append(spec)
        elif isinstance(example, torch.SymInt):
            sizes.append(node)
        else:
            return f"input {node.name} is a {type(example).__name__}, not a tensor or a size"
    for node in sizes:  # a size input is the size of some tensor input's dim
        symbol = _example(node).node.expr
        source = next(((p, k) for p in placeholders if p in env and env[p].op == "placeholder"
                       for k, d in enumerate(_example(p).shape)
                       if isinstance(d, torch.SymInt) and d.node.expr == symbol), None)
        if source is None:
            return f"size input {node.name} ({symbol}) is no tensor input's dim"
        env[node] = graph.call_function(torch.ops.aten.sym_size.int, (env[source[0]], source[1]))
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            env[node] = graph.node_copy(node, env.__getitem__)
    return torch.fx.GraphModule(frozen, graph), runtime, inputs


def _fits(spec: torch.Tensor | TensorSpec, x: Any) -> bool:
    if not isinstance(spec, TensorSpec):
        return True
    return all(lo <= d <= hi for lo, d, hi in zip(spec.min_shape, x.shape, spec.max_shape))


def trt_lower_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                      options: dict[str, Any] | None = None) -> Callable[..., Any]:
    """Options are lower_to_trt's keyword arguments: `options={"backend": "onnxruntime"}`.

    A graph with symbolic sizes (torch.compile's default `dynamic=None` after a shape changed)
    is lowered with each symbolic dim ranged as Dynamo's symbol is (`mark_dynamic`'s min/max),
    up to DEFAULT_DYNAMIC_MAX where the symbol has no upper bound.
    """
    prepared = _prepare(gm, example_inputs)
    if isinstance(prepared, str):
        log.warning("trt_lower: a Dynamo graph stays eager: %s", prepared)
        return gm.forward
    frozen, runtime, inputs = prepared
    try:
        # torch.export inside Dynamo's tracing context would add its guards to Dynamo's frame.
        with torch._guards.tracing(None):
            lowered = lower_to_trt(frozen, inputs, **(options or {}))
    except CaptureError as e:
        log.warning("trt_lower: a Dynamo graph stays eager: %s", e)
        return gm.forward
    ranges = [f"{i.describe()}" for i in inputs if isinstance(i, TensorSpec)]
    log.info("trt_lower: compiled a Dynamo graph%s\n%s", f" for input ranges {ranges}" if ranges else "",
             lowered.report)

    def run(*args: Any) -> Any:
        tensors = [args[i] for i in runtime]
        if not all(_fits(spec, x) for spec, x in zip(inputs, tensors)):
            log.warning("trt_lower: input shapes %s are outside the engines' ranges %s; this call runs eagerly",
                        [tuple(x.shape) for x in tensors], ranges)
            return gm.forward(*args)
        return lowered(*tensors)

    run.lowered = lowered  # type: ignore[attr-defined]
    return run


def register() -> None:
    """Make `backend="trt_lower"` known to torch.compile (trt_lower/__init__.py calls this where
    the `torch_dynamo_backends` entry point is not installed)."""
    register_backend(trt_lower_backend, name="trt_lower")
