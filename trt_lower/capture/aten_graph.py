"""Stage 1, capture: model + example inputs -> an ATen graph (weights as get_attr constants)."""

from __future__ import annotations

import inspect
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import sympy
import torch
import torch.utils._pytree as pytree
from torch.export import _unlift
from torch.export.graph_signature import InputKind, OutputKind
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, free_unbacked_symbols

from converters.core.errors import TrtLowerError
from converters.core.target import TrtTarget
from splitter.support import DATA_READS, RUNTIME_CHECKS
from trt_lower.capture.conditions import input_dims, size_conditions
from trt_lower.capture.decompositions import decomposition_table
from trt_lower.capture.dtensor import allow_dtensor_export, capture_table, shard_layouts, tensor_parallel_hint
from trt_lower.capture.fused_ops import fuse
from trt_lower.capture.index_checks import guard_indices
from trt_lower.capture.quotients import integer_quotients
from trt_lower.runtime.conditions import renamed
from trt_lower.values.call import model_call
from trt_lower.values.ranges import INFERRED, SymbolRanges, int_bound, profile_within
from trt_lower.values.spec import TensorSpec


class CaptureError(TrtLowerError, RuntimeError):
    """torch.export could not capture the model."""


def check_inputs(model: torch.nn.Module, inputs: Any, kwargs: dict[str, Any] | None = None) -> tuple[TensorSpec, ...]:
    """The inputs' leaves as specs (a tensor is a static spec), in the order torch.export flattens
    `(inputs, kwargs)`; ValueError naming a bad one by its path (`inputs[1][0]`, `kwargs['mask']`).

    inputs and kwargs are any pytrees torch.export takes (tuples, lists, dicts, registered classes
    such as transformers' caches) whose leaves are tensors or TensorSpecs."""
    args, kwargs = model_call(inputs, kwargs)
    _register_cache_types(model)  # before flattening: a cache is a leaf until registered
    leaves, _ = pytree.tree_flatten_with_path((args, kwargs))
    for path, x in leaves:
        if not isinstance(x, (torch.Tensor, TensorSpec)):
            # A Python value would be baked into the graph, and a call with another would be wrong.
            raise ValueError(
                f"{leaf_name(path)} must be a torch.Tensor or trt_lower.TensorSpec, got "
                f"{type(x).__name__}"
                + (" (leave it out)" if x is None else " (fix a Python value in a wrapper module's forward)")
            )
    try:
        inspect.signature(model.forward).bind(*args, **kwargs)
    except TypeError as e:
        raise ValueError(
            f"inputs has {len(args)} tensor(s)"
            + (f" and kwargs {sorted(kwargs)}" if kwargs else "")
            + f", which {type(model).__name__}.forward does not accept: {e}"
        ) from None
    except ValueError:  # builtin or C++ forward without a signature: let export decide
        pass
    return tuple(x if isinstance(x, TensorSpec) else TensorSpec.of(x) for _, x in leaves)


def leaf_name(path: pytree.KeyPath) -> str:
    """A leaf of `(inputs, kwargs)` named as the user wrote it: `inputs[1][0]`, `kwargs['mask']`."""
    top, *rest = path
    where = "inputs" if isinstance(top, pytree.SequenceKey) and top.idx == 0 else "kwargs"
    return where + pytree.keystr(tuple(rest))


def example_inputs(specs: Sequence[TensorSpec], given: Sequence[Any]) -> tuple[torch.Tensor, ...]:
    """Tensors to trace with: the user's own where given, else one made from the spec."""
    return tuple(g if isinstance(g, torch.Tensor) else s.example() for s, g in zip(specs, given))


def example_call(
    specs: Sequence[TensorSpec], inputs: Sequence[Any], kwargs: dict[str, Any] | None
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`(inputs, kwargs)` with `example_inputs` for leaves."""
    leaves, tree = pytree.tree_flatten((tuple(inputs), kwargs or {}))
    args, keywords = pytree.tree_unflatten(example_inputs(specs, leaves), tree)
    return args, keywords


def _dynamic_shapes(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    specs: Sequence[TensorSpec],
    infer: bool = False,
) -> Any:
    """torch.export's dynamic_shapes for the example `(args, kwargs)`, in their structure (keyed
    by forward's parameter names, which also covers a `*args` forward). DYNAMIC dims make export
    refuse a range it cannot keep whole; AUTO (`infer`) lets it narrow or specialise the range
    instead."""
    if not any(s.dynamic_dims for s in specs):
        return None
    kind = torch.export.Dim.AUTO if infer else torch.export.Dim.DYNAMIC
    dims = [{i: kind(min=s.min_shape[i], max=s.max_shape[i]) for i in s.dynamic_dims} or None for s in specs]
    try:
        inspect.signature(model.forward)
    except (TypeError, ValueError):  # no Python signature: export matches positionally
        return tuple(dims)
    # Maps each example tensor to its dims, in any structure (torch leaves the class unannotated).
    shapes = torch.export.ShapesCollection()  # type: ignore[no-untyped-call]
    for tensor, dim in zip(pytree.tree_leaves((args, kwargs)), dims):
        if dim is not None:
            shapes[tensor] = dim
    return shapes.dynamic_shapes(model, args, kwargs)  # type: ignore[no-untyped-call]


def _from_torchscript(model: torch.jit.ScriptModule, inputs: tuple[torch.Tensor, ...]) -> torch.nn.Module:
    """An ATen GraphModule for the ScriptModule, via PyTorch's TorchScript converter."""
    from torch._export.converter import TS2EPConverter

    try:
        with warnings.catch_warnings():
            # The converter warns once per unused buffer (e.g. num_batches_tracked).
            warnings.simplefilter("ignore")
            return TS2EPConverter(model, inputs).convert().module()
    except Exception as e:
        raise CaptureError(
            f"could not convert TorchScript module {model.original_name} to an ExportedProgram: "
            f"{type(e).__name__}: {e}. Pass the eager nn.Module instead if you have it."
        ) from e


def _register_cache_types(model: torch.nn.Module) -> None:
    """A transformers model returns its key/value cache as an object (`DynamicCache`) that
    torch.export cannot flatten until it is registered as a pytree node; transformers' own
    exporter registers every cache type, and so does this, through the same function. Nothing
    for other models, or a transformers without that exporter."""
    transformers = sys.modules.get("transformers")  # a model of it means it is imported
    if transformers is None or not isinstance(model, transformers.PreTrainedModel):
        return
    try:
        from transformers.exporters.exporter_dynamo import register_cache_pytrees_for_model
    except ImportError:
        return
    register_cache_pytrees_for_model(model)


def _data_dependent_route(error: BaseException) -> str:
    """The way around torch.export's refusal of Python code that depends on tensor data (a branch
    on a value, `.tolist()`, a size a nonzero decides), or ''. Said before torch's message, which
    is long."""
    cause: BaseException | None = error
    while cause is not None and not isinstance(cause, GuardOnDataDependentSymNode):
        cause = cause.__cause__ or cause.__context__
    if cause is None:
        return ""
    return (
        " (its Python code depends on values in tensor data, which torch.export cannot trace: lower it with "
        'torch.compile(model, backend="trt_lower"), which lowers the graphs on either side of each such '
        "place and runs the place itself in Python; README, 'Capture paths')"
    )


def _capture_hint(error: Exception) -> str:
    """What to do about a capture error users hit often, or ''."""
    if "'TensorSpec' object has no attribute" in str(error):
        return (
            " (a TensorSpec inside an object whose pytree flattening keeps only tensors, such as a transformers "
            "cache: give a tensor there, a fixed-size buffer like StaticCache's)"
        )
    if "which is not a known type" in str(error):
        return (
            " (the model takes or returns an object that is not tensors, tuples, lists or dicts: "
            "register it with torch.utils._pytree.register_pytree_node, or wrap the model to return tensors)"
        )
    return ""


class _SelfRenamed(torch.nn.Module):
    """`model`, whose forward takes an argument named `self` (`def forward(this, self)`), with
    that argument named `self_`: the code torch generates for an exported program names the
    module `self` too, and cannot bind the call."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.training = model.training
        signature = inspect.signature(model.forward)
        name = "self_"
        while name in signature.parameters:
            name += "_"

        def forward(*args: Any, **kwargs: Any) -> Any:
            return model(*args, **kwargs)

        # torch.export names the inputs after forward's signature: this one's.
        forward.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[p.replace(name=name) if p.name == "self" else p for p in signature.parameters.values()]
        )
        self.forward = forward


def _self_renamed(model: torch.nn.Module) -> torch.nn.Module:
    try:
        named_self = "self" in inspect.signature(model.forward).parameters
    except ValueError:  # builtin or C++ forward without a signature
        return model
    return _SelfRenamed(model) if named_self else model


def export(
    model: torch.nn.Module,
    inputs: Sequence[Any],
    specs: Sequence[TensorSpec] = (),
    infer: bool = False,
    kwargs: dict[str, Any] | None = None,
) -> torch.export.ExportedProgram:
    """The model as core ATen, fusable ops kept whole.

    nn.Modules and fx GraphModules go through torch.export (non-strict, eval mode);
    TorchScript modules through PyTorch's TorchScript-to-ExportedProgram converter.
    """
    # Each module's own mode, restored after: train(flag) on the model would set all of them alike,
    # and put an eval-mode model inside a train-mode wrapper into training (dropout on).
    modes = {m: m.training for m in model.modules()}
    model.eval()
    try:
        source = model
        if isinstance(model, torch.jit.ScriptModule):
            # The converter's dims are its own guesses (Dim.AUTO); export again with ours.
            source = _from_torchscript(model, tuple(inputs))
        _register_cache_types(source)
        allow_dtensor_export(source)
        source = _self_renamed(source)
        args, kwargs = tuple(inputs), kwargs or {}
        program = torch.export.export(
            source, args, kwargs, dynamic_shapes=_dynamic_shapes(source, args, kwargs, specs, infer), strict=False
        )
        decomposed: torch.export.ExportedProgram = program.run_decompositions(
            capture_table(source, decomposition_table())
        )
        return decomposed
    except CaptureError:
        raise
    except Exception as e:
        raise CaptureError(
            f"torch.export could not capture {type(model).__name__}{_data_dependent_route(e)}: "
            f"{type(e).__name__}: {e}{_capture_hint(e)}{tensor_parallel_hint(model, e)}"
        ) from e
    finally:
        for module, training in modes.items():
            module.training = training


# Runtime checks export leaves in the graph. The InputGuard checks every input's dtype and
# shape range before anything runs, and the size conditions the ranges do not imply
# (capture/conditions.py): what these re-check piecemeal. Checks on numbers read from data stay
# (_on_data_reads).
_ASSERTS = RUNTIME_CHECKS | {torch.ops.aten._assert_tensor_metadata.default}


def _on_data_reads(gm: torch.fx.GraphModule) -> set[torch.fx.Node]:
    """The runtime checks on numbers read from tensors' data (`torch._check(n.item() <= 4)`):
    no input check can settle them, and the numbers are on the host anyway. Checks on sizes an
    op's output decides (a nonzero count) are not among them: torch derives most of them from
    the op itself, and checking one would make its engine hand the size out. Of checks on one
    condition, the first."""
    numbers = (torch.SymInt, torch.SymFloat, torch.SymBool)
    read = {
        v.node.expr
        for target in DATA_READS
        for n in gm.graph.find_nodes(op="call_function", target=target)
        if isinstance(v := n.meta.get("val"), numbers)
    }
    kept: dict[tuple[object, ...], torch.fx.Node] = {}  # one per condition: export repeats some
    for target in RUNTIME_CHECKS:
        for node in gm.graph.find_nodes(op="call_function", target=target):
            values = [a.meta.get("val") for a in node.all_input_nodes]
            symbols = free_unbacked_symbols(values)
            if symbols and symbols <= read:
                exprs = (v.node.expr if isinstance(v, numbers) else v for v in values)
                kept.setdefault((target, *exprs, *node.kwargs.items()), node)
    return set(kept.values())


def _unlifted(program: torch.export.ExportedProgram) -> torch.fx.GraphModule:
    """program.module(), less what lowering does not use: that deep-copies the graph, FakeTensor
    metadata included, and records every node's provenance. A shallow copy of the nodes does here (their metadata is only read). Programs that
    mutate state or carry effect tokens or script objects take the full way."""
    sig = program.graph_signature
    if (
        sig.input_tokens
        or sig.output_tokens
        or sig.lifted_custom_objs
        or any(s.kind != OutputKind.USER_OUTPUT for s in sig.output_specs)
    ):
        return program.module(check_guards=False)
    copies: dict[torch.fx.Node, torch.fx.Node] = {}
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(program.graph, copies))
    lifted = {
        s.arg.name: s.target
        for s in sig.input_specs
        if s.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
    }
    for old in program.graph.find_nodes(op="placeholder"):
        if old.name in lifted:
            node = copies[old]
            with graph.inserting_after(node):
                attr = graph.get_attr(lifted[old.name])
            attr.meta = node.meta
            node.replace_all_uses_with(attr)
            graph.erase_node(node)
    call = program.module_call_graph[0].signature
    graph._codegen = _unlift._get_codegen(
        program.call_spec.in_spec, program.call_spec.out_spec, call.forward_arg_names if call else None
    )
    root = torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())
    for name, child in program.graph_module.named_children():  # torch.cond's branches...
        root.add_module(name, child)
    _unlift._register_attrs_to_new_gm(root, sig, program.state_dict, program.constants)
    return torch.fx.GraphModule(root, graph)


def graph_module(program: torch.export.ExportedProgram) -> torch.fx.GraphModule:
    """A fresh GraphModule of `program` (weights as get_attr), without export's runtime checks
    (`_guards_fn` and assertion nodes, but those on numbers read from data): stitch installs an
    InputGuard instead. Rounded quotients of sizes become integer division (capture/quotients.py);
    indices read from data are checked and clamped (capture/index_checks.py)."""
    gm = _unlifted(program)
    kept = _on_data_reads(gm)
    for node in reversed(gm.graph.nodes):
        if node.target in _ASSERTS and node not in kept:
            gm.graph.erase_node(node)
    integer_quotients(gm)
    guard_indices(gm)
    gm.graph.eliminate_dead_code()  # the asserts' now unused inputs (shape arithmetic)
    gm.recompile()
    return gm


def _symbol_ranges(program: torch.export.ExportedProgram, specs: Sequence[TensorSpec]) -> SymbolRanges:
    """Each shape symbol of the graph -> (min, opt, max), read off the specs of the inputs whose
    dims introduced it (a profile's spec may fix a dim the graph has dynamic: its one size)."""
    user_inputs = set(program.graph_signature.user_inputs)
    inputs = [
        n
        for n in program.graph.find_nodes(op="placeholder")
        if n.name in user_inputs and isinstance(n.meta.get("val"), torch.Tensor)
    ]
    ranges: dict[sympy.Symbol, tuple[int, int, int]] = {}
    for node, spec in zip(inputs, specs):
        for i, dim in enumerate(node.meta["val"].shape):
            if isinstance(dim, torch.SymInt) and isinstance(dim.node.expr, sympy.Symbol):
                ranges.setdefault(dim.node.expr, (spec.min_shape[i], spec.opt_shape[i], spec.max_shape[i]))
    return ranges


@dataclass(frozen=True)
class CapturedGraph:
    """The captured program, and the range of each shape symbol its dynamic input dims introduced."""

    program: torch.export.ExportedProgram
    symbols: SymbolRanges
    notes: tuple[str, ...] = ()  # where the captured ranges differ from the specs
    # Size tests the graph was captured under that the ranges do not imply (capture/conditions.py).
    conditions: tuple[str, ...] = ()
    # The target whose fused ops graph_module's graphs are rewritten to (capture/fused_ops.py).
    trt_target: TrtTarget | None = None
    # Per optimization profile (lower_to_trt's `profiles`), the symbols' ranges there; () for one.
    profiles: tuple[SymbolRanges, ...] = ()
    # Of a tensor-parallel model, each DTensor weight's layout by state dict name (capture/dtensor.py).
    shards: Mapping[str, str] = field(default_factory=dict)

    def graph_module(self) -> torch.fx.GraphModule:
        """A fresh GraphModule to split (splitting rewrites it in place), with the target's fused ops."""
        gm = graph_module(self.program)
        if self.trt_target is not None:
            fuse(gm, self.trt_target)
        return gm

    def conditions_over(self, gm: torch.fx.GraphModule) -> tuple[str, ...]:
        """The size conditions over the inputs of `gm` (one of graph_module's), as FX named them:
        it renames an input named like a builtin (`input` is `input_1` there)."""
        names = [name for name, _ in input_dims(self.program)]
        new_names = [
            n.name for n in gm.graph.find_nodes(op="placeholder") if isinstance(n.meta.get("val"), torch.Tensor)
        ]
        if names == new_names:
            return self.conditions
        return tuple(renamed(t, names, new_names) for t in self.conditions)


def capture(
    model: torch.nn.Module,
    inputs: Sequence[Any],
    specs: Sequence[TensorSpec],
    kwargs: dict[str, Any] | None = None,
    trt_target: TrtTarget | None = None,
    profiles: Sequence[Sequence[TensorSpec]] = (),
) -> CapturedGraph:
    """Stage 1. In: the model, the user's positional and keyword inputs (pytrees of tensors and/or
    TensorSpecs) and their leaves' specs (`check_inputs`), the target whose fused ops the graphs
    handed on use. Out: the model as a core-ATen program, traced with the user's tensors where
    given (else an example made from the spec), dynamic where the specs say, with each profile's
    ranges of its shape symbols (`profiles`: specs per profile, inside `specs`' ranges); CaptureError if
    torch cannot capture it."""
    examples, keywords = example_call(specs, inputs, kwargs)
    refused: CaptureError | None = None
    try:
        program = export(model, examples, specs, kwargs=keywords)
    except CaptureError as e:
        if not any(s.dynamic_dims for s in specs):
            raise
        # torch may infer a narrower range than asked (a min of 1 it specialises, dims the model
        # forces equal): retry letting it infer, then keep the inferred ranges where they are ranges.
        refused = e
        program = export(model, examples, specs, infer=True, kwargs=keywords)
    # Export may also accept a range and narrow it by a guard on a size (`if x.shape[0] > 2`):
    # engines and the input guard take the range the graph is valid for.
    specs, notes = _inferred_specs(program, specs, refused)
    specs, conditions, more = size_conditions(program, specs)
    symbols = _symbol_ranges(program, specs)
    ranges = tuple(
        profile_within(f"profiles[{k}]", _symbol_ranges(program, p), symbols) for k, p in enumerate(profiles)
    )
    return CapturedGraph(program, symbols, notes + more, conditions, trt_target, ranges, shard_layouts(model))


def _inferred_specs(
    program: torch.export.ExportedProgram, specs: Sequence[TensorSpec], refused: CaptureError | None
) -> tuple[list[TensorSpec], tuple[str, ...]]:
    """The specs narrowed to the ranges torch inferred, and a note per narrowed dim; CaptureError
    naming the input and dim where torch made a declared-dynamic dim static."""
    user_inputs = set(program.graph_signature.user_inputs)
    nodes = [
        n
        for n in program.graph.find_nodes(op="placeholder")
        if n.name in user_inputs and isinstance(n.meta.get("val"), torch.Tensor)
    ]
    narrowed: list[TensorSpec] = []
    notes: list[str] = []
    for node, spec in zip(nodes, specs):
        for i in spec.dynamic_dims:
            dim = node.meta["val"].shape[i]
            asked = f"{spec.min_shape[i]}..{spec.max_shape[i]}"
            if not isinstance(dim, torch.SymInt) or dim.node.expr.is_number:
                raise CaptureError(
                    f"input '{node.name}' dim {i}: asked for the range {asked}, but torch.export "
                    f"inferred the static size {int(dim)}; no range works" + (f" ({refused})" if refused else "")
                ) from refused
            bounds = program.range_constraints[dim.node.expr]
            # Export's symbols start at 2 (it traces sizes 0 and 1 as general sizes), so a
            # lower bound of 2 is no narrowing.
            lo = max(spec.min_shape[i], int(bounds.lower)) if int(bounds.lower) > 2 else spec.min_shape[i]
            hi = min(spec.max_shape[i], int_bound(bounds.upper, spec.max_shape[i]))
            if (lo, hi) != (spec.min_shape[i], spec.max_shape[i]):
                notes.append(
                    f"input '{node.name}' dim {i}: asked for {asked}, {INFERRED} {lo}..{hi}; engines take that range"
                )
                spec = spec.narrowed(i, lo, hi)
        narrowed.append(spec)
    return narrowed, tuple(notes)
