"""The stitched graph of a LoweredModule as JSON data, and back, without running code from it.

Nodes are written with their op, target and arguments. On load a call_function target is looked
up, never imported: an ATen-style name ("aten.add.Tensor") must resolve to an OpOverload already
registered in this process (torch.ops) that operators.py allows; the only other targets are the
few Python operators FX emits for getitem and shape arithmetic, and the index checks capture
inserts (splitter/index_check.py). Arguments are nodes, numbers, strings, and torch dtypes,
devices, layouts and memory formats by name. The input/output pytree specs are written as plain
data too (see `spec_to_json`).

FX turns a graph into Python source: node names, placeholder and attribute targets, keyword
names and the forward's argument names become code there. On load each of them must be an
identifier (a keyword argument also one its operator's schema has), so that no text from a file
becomes anything but a name; strings in arguments and dict keys are written as literals (repr).
"""

from __future__ import annotations

import collections
import keyword
import logging
import math
import operator
import re
import unicodedata
from typing import Any, Callable

import torch
import torch.utils._pytree as pytree
from torch.fx.graph import _PyTreeCodeGen, _PyTreeInfo

from converters.core.errors import TrtLowerError
from splitter.index_check import check_indices
from trt_lower.deploy import operators, output_classes

log = logging.getLogger("trt_lower")


class GraphFormatError(TrtLowerError, ValueError):
    """A graph (or a value in it) that the artifact format cannot hold, or a stored one that does
    not describe a valid graph."""


# Python-level call targets FX emits around engines: tuple indexing and symbolic-size arithmetic.
_PYTHON_TARGETS: dict[str, Callable[..., Any]] = {
    f"operator.{name}": getattr(operator, name)
    for name in (
        "getitem",
        "add",
        "sub",
        "mul",
        "floordiv",
        "truediv",
        "mod",
        "pow",
        "neg",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "and_",
        "or_",
        "not_",
    )
}
_PYTHON_TARGETS.update(
    {
        f"torch.{name}": getattr(torch, name)
        for name in ("sym_float", "sym_int", "sym_max", "sym_min", "sym_not", "sym_sqrt")
    }
)
# Rounding a float size back to an int (mobilevit's patch counts at a dynamic resolution).
_PYTHON_TARGETS.update({f"math.{name}": getattr(math, name) for name in ("ceil", "floor", "trunc")})
# The index checks capture inserts (splitter/index_check.py).
_PYTHON_TARGETS["trt_lower.check_indices"] = check_indices
_PYTHON_NAMES = {fn: name for name, fn in _PYTHON_TARGETS.items()}
_OP_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ENUMS: dict[str, type] = {"dtype": torch.dtype, "layout": torch.layout, "memory_format": torch.memory_format}


# -- call targets ----------------------------------------------------------------------------
def target_name(node: torch.fx.Node) -> str:
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return str(target)  # "aten.add.Tensor"
    if callable(target) and target in _PYTHON_NAMES:
        return _PYTHON_NAMES[target]
    raise GraphFormatError(
        f"node '{node.name}' calls {target!r}, which an artifact cannot hold "
        "(only registered ATen-style operators and getitem/size arithmetic)"
    )


def resolve_target(name: str, node: str) -> Callable[..., Any]:
    """The callable `name` names: a Python operator of the allowlist, or a registered OpOverload."""
    if name in _PYTHON_TARGETS:
        return _PYTHON_TARGETS[name]
    parts = name.split(".")
    if len(parts) != 3 or not all(_OP_NAME.match(p) for p in parts):
        raise GraphFormatError(f"node '{node}': {name!r} is not an operator name (namespace.op.overload)")
    namespace, op, overload = parts
    try:
        found = getattr(getattr(getattr(torch.ops, namespace), op), overload)
    except (AttributeError, RuntimeError):
        found = None
    if not isinstance(found, torch._ops.OpOverload):
        raise GraphFormatError(
            f"node '{node}' calls operator {namespace}::{op}.{overload}, which is not registered in this "
            f"process; import the library that defines the '{namespace}' operators before loading"
        )
    refused = operators.refusal(found)
    if refused is not None:
        raise GraphFormatError(f"node '{node}' calls {name}, which a loaded graph may not call: it {refused}")
    return found


def _checked_call(
    target: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], node: str
) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The call a node makes, its arguments checked before anything runs (operators.py); an
    operator returning uninitialised memory replaced by its zero-filled form."""
    called = str(target) if isinstance(target, torch._ops.OpOverload) else _PYTHON_NAMES[target]
    if isinstance(target, torch._ops.OpOverload):
        refused = operators.argument_refusal(target, args, kwargs)
        filled = operators.zero_filled(target)
        takes = {a.name for a in filled._schema.arguments}
        target, kwargs = filled, {k: v for k, v in kwargs.items() if k in takes}
    else:
        refused = None if target is check_indices else operators.python_refusal(target, args)
    if refused is not None:
        raise GraphFormatError(f"node '{node}' calls {called} with arguments a loaded graph may not pass: it {refused}")
    return target, kwargs


def identifier(text: Any, what: str) -> str:
    """`text` if it is a Python identifier and no keyword, as Python reads it (NFKC-normalized):
    what may become a name in FX's code. Letters, digits and underscores only: it can name,
    never quote, call or assign."""
    if not isinstance(text, str) or not text.isidentifier() or keyword.iskeyword(unicodedata.normalize("NFKC", text)):
        raise GraphFormatError(f"{what} {str(text)[:80]!r} is not an identifier")
    return text


def _kwargs(target: Any, kwargs: Any, node: str) -> list[str]:
    """The keyword names of a call, checked: identifiers its operator's schema has (Python
    operators take none)."""
    if not isinstance(kwargs, dict):
        raise GraphFormatError(f"node '{node}': malformed kwargs")
    names = [identifier(k, f"node '{node}': keyword") for k in kwargs]
    if names and target is not None:
        known = {a.name for a in target._schema.arguments} if isinstance(target, torch._ops.OpOverload) else set()
        for name in names:
            if name not in known:
                raise GraphFormatError(f"node '{node}': {target} has no argument '{name}'")
    return names


# -- arguments -------------------------------------------------------------------------------
def _arg_to_json(value: Any, node: str) -> Any:
    if isinstance(value, torch.fx.Node):
        return {"node": value.name}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": str(value)}
    if isinstance(value, (list, tuple)):
        items = [_arg_to_json(v, node) for v in value]
        return items if isinstance(value, list) else {"tuple": items}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    for kind, cls in _ENUMS.items():
        if isinstance(value, cls):
            return {kind: str(value).removeprefix("torch.")}
    raise GraphFormatError(
        f"node '{node}' has an argument of type {type(value).__name__} ({value!r}), which an artifact cannot hold"
    )


def _arg_from_json(value: Any, nodes: dict[str, torch.fx.Node], node: str, gpu: torch.device) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [_arg_from_json(v, nodes, node, gpu) for v in value]
    if not isinstance(value, dict) or len(value) != 1:
        raise GraphFormatError(f"node '{node}': malformed argument {str(value)[:80]}")
    ((kind, data),) = value.items()
    if kind == "node":
        if data not in nodes:
            raise GraphFormatError(f"node '{node}' uses '{data}', which is not defined before it")
        return nodes[data]
    if kind == "tuple" and isinstance(data, list):
        return tuple(_arg_from_json(v, nodes, node, gpu) for v in data)
    if kind == "float" and data in ("inf", "-inf", "nan"):
        return float(data)
    if kind == "device" and isinstance(data, str):
        try:
            device = torch.device(data)
        except RuntimeError:
            raise GraphFormatError(f"node '{node}': malformed device {data[:80]!r}") from None
        return gpu if device.type == "cuda" else device
    if kind in _ENUMS and isinstance(data, str) and _OP_NAME.match(data):
        found = getattr(torch, data, None)
        if kind == "layout" and found is not torch.strided:
            # Lowering leaves dense tensors eager; a sparse or mkldnn layout makes constructors
            # whose contents torch does not check.
            raise GraphFormatError(f"node '{node}': layout {data!r}; a loaded graph makes strided tensors only")
        if isinstance(found, _ENUMS[kind]):
            return found
    raise GraphFormatError(f"node '{node}': malformed argument {str(value)[:80]}")


# -- pytree specs ------------------------------------------------------------------------------
# The tags of a transformers cache's context (its exporter's `_flatten_to_context`) a stored one
# may use. "type" and "obj" name a class (an instance is made with __new__, its attributes set
# from the checked context): each must be a cache's (output_classes.py). "map" and "seq" are
# refused: transformers calls their class with the file's data on every call.
_CACHE_TAGS = frozenset({"tensor", "sym", "size", "device", "dtype", "layout", "items", "type", "obj"})


def _check_cache_context(value: Any) -> None:
    """Raise GraphFormatError unless a stored cache context holds only plain data and classes of
    transformers (it is rebuilt on every call; a planted path must never be imported or called)."""
    if isinstance(value, list):
        for item in value:
            _check_cache_context(item)
    elif isinstance(value, dict):
        tag = value.get("_t")
        if tag is not None and tag not in _CACHE_TAGS:
            raise GraphFormatError(f"malformed cache context tag {tag!r}")
        if tag in ("type", "obj"):
            path = value.get("p")
            if (
                not isinstance(path, str)
                or output_classes.transformers_class(path, output_classes.is_cache_part) is None
            ):
                raise GraphFormatError(f"cache context names {str(path)[:80]!r}, not a class of transformers' caches")
        if tag in ("dtype", "layout") and not (isinstance(value.get("n"), str) and _OP_NAME.match(value["n"])):
            raise GraphFormatError(f"malformed cache context {value!r}")
        for item in value.values():
            _check_cache_context(item)
    elif value is not None and not isinstance(value, (bool, int, float, str)):
        raise GraphFormatError(f"malformed cache context {value!r}")


def spec_to_json(spec: pytree.TreeSpec) -> Any:
    """A TreeSpec as data: leaves ("*"), tuples, lists, dicts, namedtuples, Hugging Face ModelOutputs
    and transformers' caches (their context as transformers' exporter writes it). (torch's
    treespec_dumps refuses unregistered namedtuples and cannot fall back on load.)"""
    if spec.is_leaf():
        return "*"
    children = [spec_to_json(c) for c in spec.children()]
    cls = spec.type
    if cls in (tuple, list):
        return {"type": cls.__name__, "children": children}
    if cls in (dict, collections.OrderedDict):
        return {"type": "dict", "keys": list(spec.context), "children": children}
    if cls is collections.namedtuple:  # pytree's node type of every namedtuple; the class is the context
        named = spec.context
        return {"type": "namedtuple", "name": named.__name__, "fields": list(named._fields), "children": children}
    if isinstance(cls, type) and output_classes.is_model_output(cls):
        return {
            "type": "ModelOutput",
            "class": f"{cls.__module__}.{cls.__qualname__}",
            "keys": list(spec.context),
            "children": children,
        }
    if isinstance(cls, type) and output_classes.is_cache(cls):
        try:
            _check_cache_context(spec.context)
        except GraphFormatError as e:
            raise GraphFormatError(f"the model's {cls.__qualname__} cannot be stored: {e}") from e
        return {
            "type": "cache",
            "class": f"{cls.__module__}.{cls.__qualname__}",
            "context": spec.context,
            "children": children,
        }
    raise GraphFormatError(
        f"the model's inputs or outputs contain a {cls.__qualname__}, which an artifact "
        "cannot hold (tuples, lists, dicts, namedtuples, ModelOutputs and transformers' "
        "caches can)"
    )


def _moved(context: Any, gpu: torch.device) -> Any:
    """A cache context with each CUDA device it records replaced by `gpu`, as graph arguments are
    (a layer's `device` names where the module was saved)."""
    if isinstance(context, list):
        return [_moved(item, gpu) for item in context]
    if not isinstance(context, dict):
        return context
    if context.get("_t") == "device" and isinstance(context.get("s"), str) and context["s"].startswith("cuda"):
        return dict(context, s=str(gpu))
    return {key: _moved(item, gpu) for key, item in context.items()}


def _cache_spec(data: dict[str, Any], children: list[pytree.TreeSpec], gpu: torch.device) -> pytree.TreeSpec:
    """A transformers cache's spec, its type registered as transformers' exporter registers it;
    without transformers, a list of its tensors (the context, never used then, is not read)."""
    cls = output_classes.transformers_class(str(data["class"]), output_classes.is_cache)
    try:
        from transformers.exporters.exporter_dynamo import register_pytree_node
    except ImportError:
        cls = None
    if cls is None:
        log.warning(
            "trt_lower: %s is not importable here (transformers not installed?); "
            "the model returns a list of its tensors instead",
            data["class"],
        )
        return pytree.TreeSpec(list, None, children)
    _check_cache_context(data.get("context"))
    register_pytree_node(cls)
    return pytree.TreeSpec(cls, _moved(data["context"], gpu), children)


def _keys(data: dict[str, Any], children: list[pytree.TreeSpec]) -> list[str | int]:
    """A dict spec's keys: distinct strings or ints, one per child."""
    keys = data.get("keys")
    if (
        not isinstance(keys, list)
        or len(keys) != len(children)
        or len(set(map(repr, keys))) != len(keys)
        or not all(isinstance(k, (str, int)) and not isinstance(k, bool) for k in keys)
    ):
        raise GraphFormatError(f"malformed dict keys in a pytree spec: {str(keys)[:80]}")
    return keys


def spec_from_json(data: Any, gpu: torch.device = torch.device("cpu")) -> pytree.TreeSpec:
    """The TreeSpec `data` describes; CUDA devices a cache records become `gpu`."""
    if data == "*":
        return pytree.treespec_leaf()
    if not isinstance(data, dict) or not isinstance(data.get("children"), list):
        raise GraphFormatError(f"malformed pytree spec {data!r}")
    children = [spec_from_json(c, gpu) for c in data["children"]]
    kind = data.get("type")
    if kind in ("tuple", "list"):
        return pytree.TreeSpec(tuple if kind == "tuple" else list, None, children)
    if kind == "dict":
        return pytree.TreeSpec(dict, _keys(data, children), children)
    if kind == "namedtuple":
        # The model's own class may not be importable here: a namedtuple of the same name and fields.
        fields = data.get("fields")
        if not isinstance(fields, list) or len(fields) != len(children):
            raise GraphFormatError(f"malformed namedtuple spec {str(data)[:80]}")
        cls = collections.namedtuple(  # type: ignore[misc]
            identifier(data.get("name"), "namedtuple name"), [identifier(f, "namedtuple field") for f in fields]
        )
        return pytree.TreeSpec(collections.namedtuple, cls, children)
    if kind == "ModelOutput":
        keys = _keys(data, children)
        output_class = output_classes.transformers_class(str(data["class"]), output_classes.is_model_output)
        if output_class is None:
            log.warning(
                "trt_lower: %s is not importable here (transformers not installed, or the module of the "
                "model's own output class not imported before loading?); the model returns a dict with its keys instead",
                data["class"],
            )
            return pytree.TreeSpec(dict, keys, children)
        return pytree.TreeSpec(output_class, keys, children)
    if kind == "cache":
        return _cache_spec(data, children, gpu)
    raise GraphFormatError(f"malformed pytree spec {data!r}")


# -- the graph ---------------------------------------------------------------------------------
def graph_to_json(graph: torch.fx.Graph) -> dict[str, Any]:
    nodes = []
    for node in graph.nodes:
        target = target_name(node) if node.op == "call_function" else node.target
        if node.op not in ("placeholder", "get_attr", "call_module", "call_function", "output"):
            raise GraphFormatError(f"node '{node.name}' is a {node.op} node, which an artifact cannot hold")
        nodes.append(
            {
                "name": node.name,
                "op": node.op,
                "target": target,
                "args": _arg_to_json(list(node.args), node.name),
                "kwargs": {k: _arg_to_json(v, node.name) for k, v in node.kwargs.items()},
            }
        )
    codegen = graph._codegen
    pytree_codegen = None
    if isinstance(codegen, _PyTreeCodeGen):
        info = codegen.pytree_info
        pytree_codegen = {
            "args": list(info.orig_args),
            "in_spec": spec_to_json(info.in_spec),
            "out_spec": None if info.out_spec is None else spec_to_json(info.out_spec),
        }
    return {"nodes": nodes, "pytree": pytree_codegen}


def graph_from_json(data: dict[str, Any], modules: set[str], attrs: set[str], gpu: torch.device) -> torch.fx.Graph:
    """The graph `data` describes. call_module targets must be in `modules`, get_attr targets in
    `attrs` (the engines and weights the artifact holds); every name FX writes into its code is an
    identifier. CUDA devices in arguments (and in the caches the model takes or returns) become
    `gpu`, where the engines run (the CPU on ONNX Runtime)."""
    graph = torch.fx.Graph()
    nodes: dict[str, torch.fx.Node] = {}
    entries = data.get("nodes") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise GraphFormatError("malformed graph: no list of nodes")
    for entry in entries:
        if not isinstance(entry, dict):
            raise GraphFormatError(f"malformed graph node {str(entry)[:80]}")
        name = identifier(entry.get("name"), "node name")
        op, target = entry.get("op"), entry.get("target")
        if op == "call_function":
            target = resolve_target(str(target), name)
        elif op == "placeholder":
            identifier(target, f"node '{name}': input name")
        elif op == "output":
            target = "output"
        elif op == "call_module" and target not in modules or op == "get_attr" and target not in attrs:
            raise GraphFormatError(f"node '{name}' refers to '{str(target)[:80]}', which the artifact does not hold")
        elif op not in ("call_module", "get_attr"):
            raise GraphFormatError(f"node '{name}' has unknown op {str(op)[:80]!r}")
        args = entry.get("args")
        if not isinstance(args, list):
            raise GraphFormatError(f"node '{name}': malformed args")
        kwargs = entry.get("kwargs")
        keys = _kwargs(target if op == "call_function" else None, kwargs, name)
        assert isinstance(kwargs, dict) and (callable(target) or isinstance(target, str))  # checked above
        call_args = tuple(_arg_from_json(args, nodes, name, gpu))
        call_kwargs = {k: _arg_from_json(kwargs[k], nodes, name, gpu) for k in keys}
        if op == "call_function" and callable(target):
            target, call_kwargs = _checked_call(target, call_args, call_kwargs, name)
        node = graph.create_node(op, target, call_args, call_kwargs, name=name)
        if node.name != name:
            raise GraphFormatError(f"node name '{name}' is used twice")
        nodes[name] = node
    info = data.get("pytree")
    if info is not None:
        if not isinstance(info, dict) or not isinstance(info.get("args"), list):
            raise GraphFormatError("malformed pytree info")
        in_spec = spec_from_json(info.get("in_spec"), gpu)
        if in_spec.type is tuple and in_spec.num_children == 2 and in_spec.child(1).type is dict:
            for key in in_spec.child(1).context:  # FX writes the keyword arguments' names into forward
                identifier(key, "keyword input")
        out_spec = None if info.get("out_spec") is None else spec_from_json(info["out_spec"], gpu)
        graph._codegen = _PyTreeCodeGen(
            _PyTreeInfo([identifier(a, "forward's argument") for a in info["args"]], in_spec, out_spec)
        )
    return graph
