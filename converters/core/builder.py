"""The one object converters write ONNX through: names, constants, initializers, opset."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence, TypeGuard, Union, overload

import numpy as np
import onnx
import torch
from numpy.typing import NDArray
from onnx import helper, numpy_helper

# Converters use these from here.
from converters.core.dtypes import numpy_type as numpy_type
from converters.core.dtypes import numpy_view as numpy_view
from converters.core.dtypes import onnx_type as onnx_type
from converters.core.opset_forms import rewrite
from converters.core.segment import OnnxSegment, initializer

# TensorRT 8.6's parser stops at opset 17 and was built against ONNX 1.13 (IR 8); ONNX Runtime
# rejects the IR the `onnx` package stamps by default. See docs/tensorrt.md. Other opsets
# (TrtTarget.opset) get the lowest IR version that holds them.
OPSET = 17
IR_VERSION = 8
# The ONNX domain of TensorRT plugin nodes (GraphBuilder.plugin): TensorRT's parser hands an op it
# does not know to the plugin registered under the op's name; no other executor runs them.
PLUGIN_DOMAIN = "trt.plugins"


ShapeDim = Union[int, torch.SymInt]


def ir_version(opset: int) -> int:
    """The IR version a model of `opset` is stamped with: 8 for 17 (what 8.6 reads), else the
    lowest that holds the opset (ONNX Runtime refuses the newest the `onnx` package stamps)."""
    return IR_VERSION if opset == OPSET else int(helper.find_min_ir_version_for([helper.make_opsetid("", opset)]))


def dim_param(d: ShapeDim) -> int | str:
    """A dim for an ONNX value info: the int, or the symbol's expression (e.g. "s0", "2*s0")."""
    return d if isinstance(d, int) else str(d)


def is_static_shape(shape: Sequence[object]) -> TypeGuard[Sequence[int]]:
    return all(isinstance(d, int) for d in shape)


@dataclass(frozen=True)
class Ref:
    """A named ONNX value, as a converter emits it: dtype/shape are there where it said them
    (GraphBuilder.op's `dtype`/`shape`); a later converter sees it as a `Value` again, typed from
    the FX node it stands for (core/interpreter.py)."""

    name: str
    dtype: torch.dtype | None = None
    shape: tuple[ShapeDim, ...] | None = None


@dataclass(frozen=True)
class Value(Ref):
    """A tensor whose dtype and shape are known: what converters receive for their tensor
    arguments (FX nodes, weights, constants). A dim that varies at run time is a torch.SymInt:
    compare dims only after isinstance(d, int)."""

    dtype: torch.dtype
    shape: tuple[ShapeDim, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)


class Names:
    """Unique names within one graph: `fresh(hint)` is `hint`, else `hint_<i>` for the first free i."""

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self.used = set(taken)

    def fresh(self, hint: str) -> str:
        name, i = hint, 0
        while name in self.used:
            i += 1
            name = f"{hint}_{i}"
        self.used.add(name)
        return name


class GraphBuilder:
    """Accumulates the nodes, initializers and I/O of one ONNX graph.

    `node` is the FX node being converted; its name prefixes every ONNX node the converter
    emits so TensorRT layer names and parser errors lead back to the FX graph.
    """

    def __init__(self, graph_name: str, opset: int = OPSET) -> None:
        self.graph_name = graph_name
        # The ONNX opset the graph is written at (TrtTarget.opset): converters choose forms by it.
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.weights: dict[str, NDArray[Any]] = {}  # of the initializers kept apart (segment.py)
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.node: torch.fx.Node | None = None
        self.scope = ""  # prefixes node names in a subgraph: '<FX node>/<branch>/'
        self._names = Names()
        self._constants: dict[tuple[Any, ...], Value] = {}
        # converters/core/fold.py's answers by value name: every attention layer asks about one mask.
        self.folded: dict[str, NDArray[Any] | None] = {}

    def subgraph(self, scope: str) -> "GraphBuilder":
        """A builder for a subgraph (an If branch): its own nodes and outputs; names, constants
        and initializers shared with this graph, whose values it may read (ONNX's outer scope)."""
        child = GraphBuilder(self.graph_name, self.opset)
        child.scope = f"{self.scope}{scope}/"
        child.initializers, child.weights = self.initializers, self.weights
        child._names, child._constants = self._names, self._constants
        return child

    # -- names -------------------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        return self._names.fresh(hint)

    # -- the FX node being converted -----------------------------------------------------------
    @property
    def converting(self) -> torch.fx.Node:
        """The FX node being converted (set only while its converter runs)."""
        if self.node is None:
            raise RuntimeError("no FX node is being converted")
        return self.node

    @property
    def out(self) -> Any:
        """The FakeTensor (or tuple of them) the current FX node produces."""
        return self.converting.meta["val"]

    # -- graph I/O ---------------------------------------------------------------------------
    def add_input(self, name: str, dtype: torch.dtype, shape: Sequence[ShapeDim]) -> Value:
        name = self.fresh(name)
        self.inputs.append(helper.make_tensor_value_info(name, onnx_type(dtype), [dim_param(d) for d in shape]))
        return Value(name, dtype, tuple(shape))

    def add_output(self, value: Value, name: str, dtype: torch.dtype, shape: Sequence[ShapeDim]) -> str:
        """Declare `value` an output and return its name: an Identity of it under a fresh name
        (TensorRT wants each output made by a layer under its own name, not an input's, a
        weight's or another output's), except for a value that a node makes and other nodes
        read, which is the output itself. ONNX Runtime 1.31's optimizers (its Gemm/Transpose
        fusion, then identity elimination) break a graph whose output Identity reads a value a
        Gemm over a transposed weight reads too."""
        made = {o for node in self.nodes for o in node.output}
        read = {i for node in _all_nodes(self.nodes) for i in node.input}
        if value.name in made and value.name in read and all(o.name != value.name for o in self.outputs):
            name = value.name
        else:
            name = self.fresh(name)
            self.nodes.append(helper.make_node("Identity", [value.name], [name], name=f"{name}/output"))
        self.outputs.append(helper.make_tensor_value_info(name, onnx_type(dtype), [dim_param(d) for d in shape]))
        return name

    # -- constants ---------------------------------------------------------------------------
    def initializer(self, name: str, tensor: torch.Tensor) -> Value:
        """A weight: stored as an initializer under (a unique form of) its module path."""
        name = self.fresh(name)
        array = numpy_view(tensor.detach().cpu().contiguous())  # a view: weights are not copied
        self.initializers.append(initializer(name, array, self.weights))
        return Value(name, tensor.dtype, tuple(tensor.shape))

    def packed_initializer(self, name: str, array: NDArray[Any], dtype: torch.dtype) -> Value:
        """A 4-bit weight (`array` of ml_dtypes.int4 values, say; `dtype` the torch dtype naming
        it): ONNX stores it packed, two values a byte, inside the model."""
        name = self.fresh(name)
        self.initializers.append(numpy_helper.from_array(array, name))
        return Value(name, dtype, tuple(array.shape))

    def const(self, value: Any, dtype: torch.dtype) -> Value:
        """A small constant (scalar or list) as an initializer, shared when repeated.

        Initializers rather than Constant nodes: TensorRT wants several operands (Slice axes,
        reduction axes, Pad pads) as initializers on older versions.
        """
        array: NDArray[Any] = np.asarray(value, dtype=numpy_type(dtype))
        key = (dtype, array.shape, array.tobytes())
        if key not in self._constants:
            name = self.fresh("const")
            self.initializers.append(numpy_helper.from_array(array, name))
            self._constants[key] = Value(name, dtype, tuple(array.shape))
        return self._constants[key]

    def is_initializer(self, value: Ref | None) -> bool:
        """Whether `value` is a weight or constant (TensorRT wants some operands as initializers)."""
        return value is not None and any(i.name == value.name for i in self.initializers)

    def ints(self, values: Sequence[int] | int) -> Value:
        """An int64 1-D constant (shapes, axes, starts/ends)."""
        return self.const(list(values) if isinstance(values, Sequence) else [values], torch.int64)

    def shape_tensor(self, dims: Sequence[int | Ref]) -> Value:
        """A 1-D int64 shape from ints and 0-d int64 values (sizes known only at run time)."""
        static = [d for d in dims if isinstance(d, int)]
        if len(static) == len(dims):
            return self.ints(static)
        parts = [
            self.ints([d]) if isinstance(d, int) else self.op("Unsqueeze", d, self.ints([0]), dtype=torch.int64)
            for d in dims
        ]
        return self.op("Concat", *parts, axis=0, dtype=torch.int64, shape=(len(dims),))

    # -- nodes -------------------------------------------------------------------------------
    @overload
    def op(
        self, op_type: str, *inputs: Ref | None, dtype: torch.dtype, shape: tuple[ShapeDim, ...], **attrs: Any
    ) -> Value: ...

    @overload
    def op(
        self, op_type: str, *inputs: Ref | None, dtype: torch.dtype | None = None, shape: None = None, **attrs: Any
    ) -> Ref: ...

    def op(
        self,
        op_type: str,
        *inputs: Ref | None,
        dtype: torch.dtype | None = None,
        shape: tuple[ShapeDim, ...] | None = None,
        **attrs: Any,
    ) -> Ref:
        """Emit one ONNX node of one output; `dtype`/`shape` annotate it for later converters
        that need them (both given: a `Value`)."""
        (name,) = self._emit(op_type, inputs, 1, attrs)
        return Value(name, dtype, shape) if dtype is not None and shape is not None else Ref(name, dtype, shape)

    def op_outputs(
        self, op_type: str, *inputs: Ref | None, outputs: int, dtype: torch.dtype | None = None, **attrs: Any
    ) -> tuple[Ref, ...]:
        """Emit one ONNX node of `outputs` outputs."""
        return tuple(Ref(name, dtype) for name in self._emit(op_type, inputs, outputs, attrs))

    def plugin(
        self, name: str, *inputs: Ref, outputs: int = 1, version: str = "1", namespace: str = "", **attrs: Any
    ) -> tuple[Ref, ...]:
        """Emit a node of the TensorRT plugin registered as `name` (`version`, `namespace`), its
        other attributes the plugin's fields. Only TensorRT runs it (see `PLUGIN_DOMAIN`)."""
        return tuple(
            Ref(n)
            for n in self._emit(
                name,
                inputs,
                outputs,
                {"plugin_version": version, "plugin_namespace": namespace, **attrs},
                domain=PLUGIN_DOMAIN,
            )
        )

    def _emit(
        self, op_type: str, inputs: Sequence[Ref | None], outputs: int, attrs: dict[str, Any], domain: str = ""
    ) -> list[str]:
        prefix = self.scope + (self.node.name if self.node is not None else self.graph_name)
        # Absent trailing optional inputs are left out rather than named "": ONNX Runtime's
        # fusions (Conv+BatchNormalization+Relu) only match the short form.
        inputs_list = list(inputs)
        if domain == "":
            inputs_list, attrs = rewrite(op_type, inputs_list, attrs, self.opset, self.ints)
        while inputs_list and inputs_list[-1] is None:
            inputs_list.pop()
        out_names = [self.fresh(f"{prefix}_{op_type.lower()}") for _ in range(outputs)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(
            helper.make_node(
                op_type,
                ["" if v is None else v.name for v in inputs_list],
                out_names,
                name=self.fresh(f"{prefix}/{op_type}"),
                domain=domain or None,
                **attrs,
            )
        )
        return out_names

    @overload
    def cast(self, value: Value, dtype: torch.dtype) -> Value: ...

    @overload
    def cast(self, value: Ref, dtype: torch.dtype) -> Ref: ...

    def cast(self, value: Ref, dtype: torch.dtype) -> Ref:
        if value.dtype == dtype:
            return value
        return self.op("Cast", value, to=onnx_type(dtype), dtype=dtype, shape=value.shape)

    # -- result ------------------------------------------------------------------------------
    def segment(self) -> OnnxSegment:
        # A weight a converter replaced (a quantized one folded to int8) is read by no node.
        read = {name for node in _all_nodes(self.nodes) for name in node.input}
        initializers = [i for i in self.initializers if i.name in read]
        graph = helper.make_graph(self.nodes, self.graph_name, self.inputs, self.outputs, initializers)
        plugins = any(node.domain == PLUGIN_DOMAIN for node in _all_nodes(self.nodes))
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", self.opset)]
            + ([helper.make_opsetid(PLUGIN_DOMAIN, 1)] if plugins else []),
            ir_version=ir_version(self.opset),
            producer_name="trt_lower",
        )
        return OnnxSegment(model, {k: v for k, v in self.weights.items() if k in read})


def _all_nodes(nodes: Iterable[onnx.NodeProto]) -> Iterable[onnx.NodeProto]:
    """`nodes` and those of their subgraphs (If branches)."""
    for node in nodes:
        yield node
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(a.g.node)
