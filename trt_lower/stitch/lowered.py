"""LoweredModule: what lower_to_trt returns (stitch/swap.py makes it)."""

from __future__ import annotations

import contextlib
import importlib
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.utils._pytree as pytree
from torch.fx.graph import PythonCode, _PyTreeCodeGen

from trt_lower.report.describe import describe
from trt_lower.report.report import LoweringReport
from trt_lower.runtime.bindings import eager_ops_bound
from trt_lower.runtime.collectives import collectives_named
from trt_lower.runtime.engine_module import EngineModule
from trt_lower.runtime.guard import InputGuard
from trt_lower.runtime.inputs import flatten_inputs
from trt_lower.runtime.module_call import direct_call
from trt_lower.runtime.output import OutputBuilder, mirrors_items
from trt_lower.runtime.retarget import retargeted
from trt_lower.runtime.streaming_budget import Budget, engine_budgets, none_streams
from trt_lower.values.probe import Probe
from trt_lower.values.segment import ConvertedSegment


def _plain_outputs(spec: pytree.TreeSpec, names: list[str]) -> str | None:
    """A return of `spec` built from the outputs `names`, as code: `x` for a single tensor, a
    tuple or dict display for a tuple or a dict of tensors, the OutputBuilder for a dict
    subclass of tensors (a ModelOutput); None for anything else (left to tree_unflatten)."""
    if spec.is_leaf():
        return names[0] if len(names) == 1 else None
    if spec.num_children != len(names) or not all(c.is_leaf() for c in spec.children()):
        return None
    if spec.type is tuple:
        return "(" + "".join(f"{n}, " for n in names) + ")"
    if spec.type is dict and all(isinstance(key, (str, int)) for key in spec.context):
        return "{" + ", ".join(f"{key!r}: {n}" for key, n in zip(spec.context, names)) + "}"
    if mirrors_items(spec):
        return f"self._output.build({', '.join(names)})"
    return None


class _DirectCodeGen(_PyTreeCodeGen):
    """torch.export's codegen, without the per-call pytree work: the inputs' flatten when they are
    plain positional arguments, the outputs' unflatten when the model returns a tensor, a tuple or
    dict of tensors, or a ModelOutput-like dict subclass of tensors (each a few microseconds a
    call; tens for a ModelOutput)."""

    def gen_var_bindings(self, fn_args: list[str], free_vars: list[str], expanded_def: bool) -> str:
        spec = self.pytree_info.in_spec
        if spec != pytree.tree_structure((tuple(range(len(fn_args))), {})):
            # Pytree inputs: flattened with an error naming where a call's structure differs (torch's
            # flatten reads the leaves where the spec says: a wrong structure fails obscurely, or not at all).
            bindings = super().gen_var_bindings(fn_args, free_vars, expanded_def)
            return bindings.replace("fx_pytree.tree_flatten_spec(", "self._flatten_inputs(")
        names = [v.split(":")[0].split("#")[0].strip() for v in free_vars]
        return f"\n    {', '.join(names)}, = {', '.join(fn_args)},"

    def generate_output(
        self, output_args: Any, *, descs: Sequence[str] | None = None, repr_fn: Callable[[object], str] | None = None
    ) -> str:
        spec = self.pytree_info.out_spec
        if spec is not None and isinstance(output_args, (list, tuple)):
            code = _plain_outputs(spec, [(repr_fn or repr)(a) for a in output_args])
            if code is not None:
                return "return " + code
        return super().generate_output(output_args, descs=descs, repr_fn=repr_fn)


def _checked(
    graph: torch.fx.Graph, checks: Mapping[str, Callable[[Callable[..., Any]], Callable[..., Any]]]
) -> contextlib.AbstractContextManager[None]:
    """Inside: every node `checks` names targets its check of what it targets now; after: the graph as it was."""

    def checked(node: torch.fx.Node) -> Callable[..., Any] | None:
        check = checks.get(node.name)
        return check(node.target) if check is not None and callable(node.target) else None

    return retargeted(graph, checked)


class LoweredModule(torch.fx.GraphModule):
    """The lowered model: a GraphModule whose `engine_<k>` submodules run engines and whose
    remaining nodes run in eager PyTorch. `report` says which is which."""

    report: LoweringReport
    # What each engine was made from, by engine name: trt_lower.save stores them.
    segments: dict[str, ConvertedSegment]
    # JSON that a use built on the module keeps beside it (trt_lower.llm's generation settings):
    # trt_lower.save writes it, load gives it back.
    extra: dict[str, Any] | None = None
    # What lower_to_trt made the module from (trt_lower.api.Lowering), for update_weights; None
    # on a module trt_lower.load made (its file holds no model).
    lowering: Any = None
    # Example inputs and eager outputs from build-time verification (None when it did not run):
    # trt_lower.save stores them so that a load elsewhere can check the module again.
    probe: Probe | None = None
    # Where each FX node came from (trt_lower.profile.sources.NodeSource, by node name), as a saved
    # file stores it; None on a module lower_to_trt made (its captured graph says) or an older file.
    sources: dict[str, Any] | None = None
    # Checks a loaded graph's eager nodes make at run time (deploy/allocations.py), by node name:
    # each makes the callable the generated forward calls for its node from the one it would
    # call. The graph keeps its targets.
    call_checks: Mapping[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {}

    def __init__(self, root: torch.nn.Module, graph: torch.fx.Graph, report: LoweringReport) -> None:
        if isinstance(graph._codegen, _PyTreeCodeGen):
            graph._codegen = _DirectCodeGen(graph._codegen.pytree_info)
        super().__init__(root, graph, class_name="LoweredModule")
        spec = graph._codegen.pytree_info.out_spec if isinstance(graph._codegen, _DirectCodeGen) else None
        if spec is not None and mirrors_items(spec):
            self._output = OutputBuilder(spec)  # the generated forward returns through it
        self.report = report
        report.graph = describe(self.graph)
        # torch.export's pytree codegen reads the input/output specs from the module.
        for attr in ("_in_spec", "_out_spec"):
            if hasattr(root, attr):
                setattr(self, attr, getattr(root, attr))
        self._check_inputs_once()
        # The generated forward reads each submodule as `self.<name>` on every call, which
        # nn.Module resolves through its slow __getattr__; an instance attribute holding the same
        # module is found first (nn.Module's __setattr__ drops it when the submodule is replaced).
        for name, module in self.named_children():
            self.__dict__[name] = module

    def recompile(self) -> PythonCode:
        # see trt_lower/runtime/bindings.py and collectives.py
        with eager_ops_bound(self.graph), collectives_named(self.graph), _checked(self.graph, self.call_checks):
            code = super().recompile()
        # GraphModule calls its forward through a wrapper that only rewrites tracebacks (a
        # microsecond or two a call); the generated code is in linecache either way.
        setattr(type(self), "__call__", direct_call)
        return code

    def update_weights(self, source: torch.nn.Module | Mapping[str, torch.Tensor]) -> None:
        """New weights for the same architecture, without building engines again: `source` is
        a model like the one lowered (fine-tuned, another adapter merged) or its state_dict.
        Every engine's weights are derived again as lowering derived them and refitted, the eager
        nodes' tensors replaced, and the module checked against `source` (or the state dict in
        the lowered architecture) on the example inputs; any refusal or mismatch raises and leaves
        the module as it was (docs/refit.md)."""
        # trt_lower/refit ranks above this module (it converts, builds and compares): imported by
        # name, as deploy/ imports the uses above it.
        importlib.import_module("trt_lower.refit.update").update_weights(self, source)

    def profile(
        self, inputs: Any, *, kwargs: dict[str, Any] | None = None, iterations: int = 20, warmup: int = 3
    ) -> Any:
        """Where a call's time goes: a trt_lower.profile.profile.Profile of `self(*inputs, **kwargs)`
        per engine layer and per eager node, each mapped to its FX nodes and the model's source
        lines, the median of `iterations` calls after `warmup` (docs/performance.md). Engines run
        in profiled copies of their sessions: the module's own calls are untouched."""
        # A use of the module, ranked above it (as update_weights' refit): imported by name.
        measure = importlib.import_module("trt_lower.profile.measure")
        return measure.profile(self, inputs, kwargs, iterations=iterations, warmup=warmup)

    @property
    def weight_streaming_budget(self) -> int | None:
        """Bytes of streamable weights the engines keep on the GPU, all engines together (None
        where TensorRT 10.0 chooses its own); set it to bytes for the whole module (shared in
        proportion to each engine's streamable weights), a fraction of each engine's (0.0 to 1.0)
        or "auto" (TensorRT's automatic budget, the one engines start with). Engines built with
        weight_streaming=True only (docs/weight-streaming.md); WeightStreamingError otherwise."""
        budgets = [e.weight_streaming_budget for e in self._streaming_engines()]
        return None if None in budgets else sum(b for b in budgets if b is not None)

    @weight_streaming_budget.setter
    def weight_streaming_budget(self, budget: Budget) -> None:
        engines = self._streaming_engines()
        for engine, each in zip(engines, engine_budgets(budget, [e.streamable_bytes for e in engines])):
            engine.set_weight_streaming_budget(each)

    def _streaming_engines(self) -> list[EngineModule]:
        engines = [m for m in self.modules() if isinstance(m, EngineModule) and m.streamable_bytes]
        if not engines:
            raise none_streams()
        return engines

    def replace_engines(self, modules: Mapping[str, torch.nn.Module]) -> None:
        """Put `modules` in place of the engine modules of the same names, at once."""
        for name, module in modules.items():
            setattr(self, name, module)
            self.__dict__[name] = module  # see __init__
        self._check_inputs_once()

    def _flatten_inputs(self, tree: Any, spec: pytree.TreeSpec) -> list[Any]:
        return flatten_inputs(tree, spec)

    def _check_inputs_once(self) -> None:
        """The input guard checks the model's inputs, shapes, dtypes and the engines' device,
        and they fix every engine's input shapes and dtypes: the engines need not check again."""
        guard = getattr(self, "_input_guard", None)
        engines = [m for m in self.modules() if isinstance(m, EngineModule)]
        devices = {e.device for e in engines}
        if isinstance(guard, InputGuard) and len(devices) == 1:
            guard.cover(engines, devices.pop())
