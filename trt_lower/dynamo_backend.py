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
from trt_lower.capture import CaptureError

log = logging.getLogger("trt_lower")


def _is_weight(node: torch.fx.Node, example: Any) -> bool:
    if isinstance(example, torch.nn.Parameter):
        return True
    grapharg = node.meta.get("grapharg")
    source = getattr(grapharg, "source", None)
    return source is not None and "._buffers[" in source.name


def _is_dynamic(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> bool:
    """Whether Dynamo made some size symbolic (sizes as inputs, or symbolic placeholder shapes)."""
    if not all(isinstance(x, torch.Tensor) for x in example_inputs):
        return True
    for node in gm.graph.nodes:
        val = node.meta.get("example_value", node.meta.get("val"))
        if node.op == "placeholder" and isinstance(val, torch.Tensor):
            if not all(isinstance(d, int) for d in val.shape):
                return True
    return False


def _freeze_weights(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> tuple[torch.fx.GraphModule, list[int]]:
    """A copy of `gm` with weight placeholders turned into get_attr constants, and the positions
    of the inputs that remain."""
    frozen = torch.fx.GraphModule(gm, gm.graph)
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    runtime: list[int] = []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, (node, example) in enumerate(zip(placeholders, example_inputs)):
        if _is_weight(node, example):
            name = f"_weight_{i}"
            frozen.register_buffer(name, example.detach())
            env[node] = graph.get_attr(name)
        else:
            env[node] = graph.placeholder(node.name)
            env[node].meta = dict(node.meta)
            runtime.append(i)
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            env[node] = graph.node_copy(node, env.__getitem__)
    return torch.fx.GraphModule(frozen, graph), runtime


def trt_lower_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                      options: dict[str, Any] | None = None) -> Callable[..., Any]:
    """Options are lower_to_trt's keyword arguments: `options={"backend": "onnxruntime"}`."""
    if _is_dynamic(gm, example_inputs):
        log.warning("trt_lower: Dynamo handed over a graph with dynamic shapes; it stays eager. Compile "
                    "with torch.compile(..., dynamic=False), or use lower_to_trt with trt_lower.TensorSpec")
        return gm.forward
    frozen, runtime = _freeze_weights(gm, example_inputs)
    inputs = [example_inputs[i] for i in runtime]
    try:
        lowered = lower_to_trt(frozen, inputs, **(options or {}))
    except CaptureError as e:
        log.warning("trt_lower: a Dynamo graph stays eager: %s", e)
        return gm.forward
    log.info("trt_lower: compiled a Dynamo graph\n%s", lowered.report)

    def run(*args: Any) -> Any:
        return lowered(*[args[i] for i in runtime])

    run.lowered = lowered  # type: ignore[attr-defined]
    return run


def register() -> None:
    """Make `backend="trt_lower"` known to torch.compile.

    An installed trt_lower declares the `torch_dynamo_backends` entry point, which torch loads
    (and registers) on first use; registering here too would be a duplicate. From a source
    tree without that metadata, register directly.
    """
    from importlib.metadata import entry_points

    if "trt_lower" not in entry_points(group="torch_dynamo_backends").names:
        register_backend(trt_lower_backend, name="trt_lower")
