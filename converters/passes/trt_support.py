"""What TensorRT's ONNX parser accepts, per target version, and a checker for emitted models.

Sources: docs/tensorrt.md (what the project relies on), onnx-tensorrt's docs/operators.md (10.15) and its
Changelog for when each op arrived (8.5: Mod, NonZero (FP32/FP16 inputs), Trilu, GridSample; 8.6: LayerNormalization,
IsInf, INT32 ArgMax/TopK; 9.0: INT64 kept as INT64; 9.2: Hardmax; 10.0: ScatterElements
`reduction`; 10.4: window ops; 10.5: STFT; 10.12: Einsum ellipsis). Ops are listed by name, in
every form the opsets we emit give them (converters/core/opset_forms.py: axes operands are
initializers in each). Where a version's limits are not documented the table is conservative
(integer Relu/Pow only from "10.12", as operators.md lists them today).

`violations(model, version)` names every node that breaks a rule: an op missing from the table
or too new for the version, an element type the op (or TensorRT) does not take, an operand that
must be an initializer and is not, an attribute outside what TensorRT implements, a pattern
that releases of the version miscompile (MISCOMPILES: public bug reports, by version range). lower_to_trt
runs it on every segment before building an engine, and the test suite on every model it emits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import onnx
from onnx import TensorProto, helper, numpy_helper

from converters.core.builder import PLUGIN_DOMAIN
from converters.core.quantized import INT4_BLOCK_SIZES, INT4_OPSET
from converters.core.segment import is_external
from converters.core.target import TrtTarget
from converters.passes.onnx_types import elem_types

FLOATS = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16})
INTS = frozenset({TensorProto.INT32, TensorProto.INT64})
BOOLS = frozenset({TensorProto.BOOL})
ANY = FLOATS | INTS | BOOLS
# INT8, and FP8 (E4M3) on targets that have it (TrtTarget.fp8_reason), as quantized types:
# QuantizeLinear's output, DequantizeLinear's input (and their zero points).
QUANTIZED = frozenset({TensorProto.INT8, TensorProto.FLOAT8E4M3FN})
# INT4 only as DequantizeLinear's input and zero point: a weight quantized block-wise (_int4_dequantize).
INT4 = TensorProto.INT4
# TopK's K must stay below this (operators.md).
TOPK_MAX_K = 3840


@dataclass(frozen=True)
class Violation:
    node: str
    op: str
    rule: str

    def __str__(self) -> str:
        return f"node '{self.node}' ({self.op}): {self.rule}" if self.op else self.rule


@dataclass
class _Graph:
    types: dict[str, int]
    initializers: dict[str, onnx.TensorProto]
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]]


Check = Callable[[onnx.NodeProto, TrtTarget, _Graph], Optional[str]]


@dataclass(frozen=True)
class OpRule:
    types: frozenset[int] = ANY  # element types TensorRT runs the op on, for the `data` inputs
    data: tuple[int, ...] | None = (0,)  # the inputs `types` constrains; None: every input
    since: str = "8.6"  # first target version whose parser has it
    initializers: tuple[int, ...] = ()  # inputs that must be initializers (when present)
    int_since: str | None = None  # integer `data` accepted from this version on (types is FLOATS before)
    check: Check | None = None


def _name(elem_type: int) -> str:
    return str(TensorProto.DataType.Name(elem_type))


def _attr(node: onnx.NodeProto, name: str, default: object) -> Any:
    for a in node.attribute:
        if a.name == name:
            value = helper.get_attribute_value(a)
            return value.decode() if isinstance(value, bytes) else value
    return default


# -- attribute and operand rules ---------------------------------------------------------------
def _pool(node: onnx.NodeProto, trt_target: TrtTarget, g: _Graph) -> Optional[str]:
    kernel = list(_attr(node, "kernel_shape", []))
    if len(kernel) not in (2, 3):
        return f"TensorRT pools 2D/3D windows only, got a {len(kernel)}D kernel"
    if any(d != 1 for d in _attr(node, "dilations", [])):
        # TensorRT's pooling layer has no dilation; 10.x's parser says so, 8.6 has no way to run it.
        return "pooling dilations must be 1 (TensorRT's pooling layer has no dilation)"
    if node.op_type == "MaxPool" and len(node.output) > 1 and node.output[1]:
        return "MaxPool's Indices output is not supported"
    return None


_RESIZE_MODES = ("nearest", "linear", "cubic")
_RESIZE_COORDINATES = ("half_pixel", "pytorch_half_pixel", "tf_half_pixel_for_nn", "asymmetric", "align_corners")


def _resize(node: onnx.NodeProto, trt_target: TrtTarget, g: _Graph) -> Optional[str]:
    mode = _attr(node, "mode", "nearest")
    if mode not in _RESIZE_MODES:
        return f"Resize mode '{mode}' is not one of {_RESIZE_MODES}"
    coordinates = _attr(node, "coordinate_transformation_mode", "half_pixel")
    if coordinates not in _RESIZE_COORDINATES:
        return f"Resize coordinate_transformation_mode '{coordinates}' is not one of {_RESIZE_COORDINATES}"
    return None


def _topk(node: onnx.NodeProto, trt_target: TrtTarget, g: _Graph) -> Optional[str]:
    if _attr(node, "sorted", 1) != 1:
        return "TopK needs sorted=1"
    k = g.initializers.get(node.input[1])
    if k is not None and int(numpy_helper.to_array(k).reshape(-1)[0]) >= TOPK_MAX_K:
        return f"TopK's K must be below {TOPK_MAX_K}"
    return None


def _scatter_nd(node: onnx.NodeProto, trt_target: TrtTarget, g: _Graph) -> Optional[str]:
    reduction = _attr(node, "reduction", "none")
    return None if reduction == "none" else f"ScatterND reduction '{reduction}' (only 'none')"


def _scatter_elements(node: onnx.NodeProto, trt_target: TrtTarget, g: _Graph) -> Optional[str]:
    reduction = _attr(node, "reduction", "none")
    if reduction != "none" and not trt_target.at_least("10.4"):
        return f"ScatterElements reduction '{reduction}' needs TensorRT 10.0+"
    return None


def _einsum(node: onnx.NodeProto, trt_target: TrtTarget, g: _Graph) -> Optional[str]:
    if trt_target.at_least("10.12"):
        return None
    equation = str(_attr(node, "equation", "")).replace(" ", "")
    terms = equation.split("->")[0].split(",")
    if "..." in equation:
        return "Einsum ellipsis needs TensorRT 10.12+"
    if any(len(set(t)) != len(t) for t in terms):
        return "Einsum diagonal (a repeated subscript) needs TensorRT 10.12+"
    return None


def _only_first_output(node: onnx.NodeProto, trt_target: TrtTarget, g: _Graph) -> Optional[str]:
    if any(node.output[1:]):
        return f"{node.op_type}: only output Y is supported"
    if node.op_type == "BatchNormalization" and _attr(node, "training_mode", 0):
        return "BatchNormalization training_mode=1 is not supported"
    return None


def _instance_norm(node: onnx.NodeProto, trt_target: TrtTarget, g: _Graph) -> Optional[str]:
    # 8.6 imports it as a plugin taking its scale and bias as weights.
    if not trt_target.at_least("10.4") and not all(n in g.initializers for n in node.input[1:3]):
        return "InstanceNormalization's scale and B must be initializers on TensorRT 8.6"
    return None


def _quantize_linear(node: onnx.NodeProto, trt_target: TrtTarget, g: _Graph) -> Optional[str]:
    """Explicit quantization as TensorRT takes it: int8 or FP8 (E4M3, opset 19, where the target
    has it), symmetric (an explicit all-zero zero point, whose type is the quantized one),
    constant positive scales, per-channel only on weights (converters/ops/quantize.py, fp8.py)."""
    if len(node.input) < 3 or not node.input[2]:
        return f"{node.op_type} needs an explicit int8 zero point (its default is uint8, which TensorRT refuses)"
    zero = g.initializers.get(node.input[2])
    if zero is None or zero.data_type not in QUANTIZED:
        return f"{node.op_type}'s zero point must be an int8 or FP8 (E4M3) initializer"
    if zero.data_type == TensorProto.FLOAT8E4M3FN and (reason := trt_target.fp8_reason()):
        return f"{node.op_type} with FP8: {reason}"
    if numpy_helper.to_array(zero).astype("float32").any():
        return f"{node.op_type}'s zero point must be 0 (TensorRT quantizes symmetrically)"
    scale = numpy_helper.to_array(g.initializers[node.input[1]]) if node.input[1] in g.initializers else None
    if scale is None or not (scale > 0).all():
        return f"{node.op_type}'s scale must be a positive initializer"
    if scale.ndim == 1 and node.input[0] not in g.initializers and node.op_type == "QuantizeLinear":
        return "per-channel QuantizeLinear of an activation (TensorRT quantizes activations per tensor)"
    if node.op_type == "DequantizeLinear" and g.types.get(node.input[0]) != zero.data_type:
        return f"DequantizeLinear's input must be {_name(zero.data_type)}, its zero point's type"
    return None


def _int4_dequantize(node: onnx.NodeProto, trt_target: TrtTarget, g: _Graph) -> Optional[str]:
    """INT4 as TensorRT takes it: weight-only, a 2-D INT4 initializer dequantized in blocks of 64
    or 128 along its last axis by a positive 2-D initializer scale, zero point absent or 0."""
    if trt_target.opset < INT4_OPSET:
        return f"INT4 DequantizeLinear needs opset {INT4_OPSET}; {trt_target.label} reads opset {trt_target.opset}"
    weight, scale = (g.initializers.get(name) for name in node.input[:2])
    if weight is None or len(weight.dims) != 2:
        return "an INT4 DequantizeLinear's input must be a 2-D initializer (TensorRT: INT4 weights only)"
    block = _attr(node, "block_size", 0)
    if block not in INT4_BLOCK_SIZES or _attr(node, "axis", 1) not in (1, -1) or weight.dims[1] % block:
        return (
            f"INT4 blocks of {block} along axis {_attr(node, 'axis', 1)}: TensorRT takes blocks of "
            f"{' or '.join(map(str, INT4_BLOCK_SIZES))} along a weight's last axis, dividing it"
        )
    # A large scale is kept beside the model (its values not here): its shape is checked then.
    if (
        scale is None
        or tuple(scale.dims) != (weight.dims[0], weight.dims[1] // block)
        or (not is_external(scale) and not (numpy_helper.to_array(scale) > 0).all())
    ):
        return "an INT4 DequantizeLinear's scale must be a positive initializer, one per block"
    zero = g.initializers.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    if len(node.input) > 2 and node.input[2] and (zero is None or numpy_helper.to_array(zero).astype(int).any()):
        return "an INT4 DequantizeLinear's zero point must be 0 (TensorRT quantizes symmetrically)"
    return None


def _dequantize_linear(node: onnx.NodeProto, trt_target: TrtTarget, g: _Graph) -> Optional[str]:
    if g.types.get(node.input[0]) == INT4:
        return _int4_dequantize(node, trt_target, g)
    return _quantize_linear(node, trt_target, g)


def _table() -> dict[str, OpRule]:
    table: dict[str, OpRule] = {}
    for ops, rule in [
        # float math and activations
        (
            "Acos Acosh Asin Asinh Atan Atanh Ceil Cos Cosh Erf Exp Floor Log Reciprocal Round Sin Sinh "
            "Sqrt Tan Sigmoid Tanh HardSigmoid HardSwish Softplus Softsign Elu Selu Celu LeakyRelu "
            "ThresholdedRelu IsInf Softmax LogSoftmax LRN LpNormalization MeanVarianceNormalization Dropout "
            "GlobalAveragePool GlobalMaxPool GlobalLpPool",
            OpRule(FLOATS),
        ),
        ("Relu", OpRule(FLOATS, int_since="10.12")),
        ("Pow", OpRule(FLOATS, data=(0, 1), int_since="10.12")),
        ("Hardmax", OpRule(FLOATS, since="10.4")),
        # no integer MatMul / Gemm / convolution / Clip in TensorRT
        ("MatMul Gemm Conv ConvTranspose Clip PRelu", OpRule(FLOATS, data=None)),
        ("Einsum", OpRule(FLOATS, data=None, check=_einsum)),
        ("MaxPool AveragePool LpPool", OpRule(FLOATS, check=_pool)),
        ("LayerNormalization", OpRule(FLOATS, data=None, check=_only_first_output)),
        # opset 23's fused ops, which TensorRT maps to its own layers: Attention from 10.14,
        # RMSNormalization and RotaryEmbedding from 10.15; only "latest" is written at opset 23.
        ("RMSNormalization", OpRule(FLOATS, data=None, since="latest")),
        ("Attention", OpRule(FLOATS, data=(0, 1, 2), since="latest")),
        ("RotaryEmbedding", OpRule(FLOATS, data=(0, 1, 2), since="latest")),
        # TensorRT 11's DistCollective layer (NCCL): "latest" also stands for 10.15-10.x, which lack
        # it; lower_to_trt's collectives="engine" asks for an 11.x release (values/collectives.py).
        ("DistCollective", OpRule(FLOATS, since="latest")),
        # scale, B, mean and var as weights (normalization.py writes the formula otherwise)
        ("BatchNormalization", OpRule(FLOATS, data=None, initializers=(1, 2, 3, 4), check=_only_first_output)),
        ("InstanceNormalization", OpRule(FLOATS, data=None, check=_instance_norm)),
        ("Resize", OpRule(FLOATS, check=_resize)),
        ("GridSample RoiAlign NonMaxSuppression", OpRule(FLOATS, data=(0, 1))),
        ("CumSum", OpRule(FLOATS, initializers=(1,))),
        ("BlackmanWindow HammingWindow HannWindow", OpRule(INTS, since="10.4")),
        ("STFT", OpRule(FLOATS, since="10.12", initializers=(1, 2))),
        # arithmetic and comparisons: float and int, no bool
        ("Add Sub Mul Div Max Min Sum Mean Mod", OpRule(FLOATS | INTS, data=None)),
        ("Equal Greater GreaterOrEqual Less LessOrEqual", OpRule(FLOATS | INTS, data=(0, 1))),
        ("Abs Neg Sign IsNaN Shrink ArgMax ArgMin Pad DepthToSpace SpaceToDepth", OpRule(FLOATS | INTS)),
        ("Range", OpRule(FLOATS | INTS, data=None)),
        ("TopK", OpRule(FLOATS | INTS, initializers=(1,), check=_topk)),
        # axes: an input from opset 13 (ReduceSum) or 18 (the rest), an initializer for TensorRT
        (
            "ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp "
            "ReduceSumSquare ReduceSum",
            OpRule(FLOATS | INTS, initializers=(1,)),
        ),
        ("ScatterND", OpRule(FLOATS | INTS, data=(0, 2), check=_scatter_nd)),
        ("ScatterElements", OpRule(FLOATS | INTS, data=(0, 2), check=_scatter_elements)),
        ("OneHot", OpRule(FLOATS | INTS, initializers=(1,))),
        # logic
        ("And Or Xor Not", OpRule(BOOLS, data=None)),
        # layout, indexing, casts: any engine type
        (
            "Cast Expand EyeLike Flatten Gather GatherElements GatherND Identity Reshape Shape Size Split "
            "Tile Transpose Trilu ReverseSequence",
            OpRule(ANY),
        ),
        ("Where", OpRule(ANY, data=(1, 2))),
        ("Concat", OpRule(ANY, data=None)),
        ("Constant", OpRule(ANY, data=())),
        ("ConstantOfShape", OpRule(INTS)),
        # axes operands: initializers (Slice until 10.3, Squeeze/Unsqueeze until 10.7; always ours)
        ("Slice", OpRule(ANY, initializers=(3,))),
        ("Squeeze Unsqueeze", OpRule(ANY, initializers=(1,))),
        # Its output size depends on the data: the engine module serves such engine outputs
        # with an IOutputAllocator (8.5+, so every target).
        ("NonZero", OpRule(FLOATS)),
        # explicit quantization: int8, and FP8 from opset 19 (_quantize_linear); the quantized
        # types may be read and written only here (QUANTIZED)
        ("QuantizeLinear", OpRule(frozenset({TensorProto.FLOAT}), initializers=(1, 2), check=_quantize_linear)),
        ("DequantizeLinear", OpRule(QUANTIZED, initializers=(1, 2), check=_dequantize_linear)),
        # the condition a boolean scalar; the branches' nodes are checked like the graph's
        ("If", OpRule(BOOLS)),
    ]:
        for op in ops.split():
            table[op] = rule
    return table


TABLE = _table()

# Element types an engine tensor may have. UINT8 only crosses the engine boundary (TensorRT takes
# it as engine I/O and casts it); INT8 is a quantized type in TensorRT; DOUBLE, BFLOAT16 and the
# rest it has not (float64 is narrowed to float32 before this check: converters/passes/float64.py).
ENGINE_TYPES = ANY
BOUNDARY_TYPES = frozenset({TensorProto.UINT8})
_QDQ = frozenset({"QuantizeLinear", "DequantizeLinear"})
# BFLOAT16 runs wherever FLOAT does on targets with bf16 (TrtTarget.bf16_reason), except on these
# ops, which operators.md (10.15) lists for FP32/FP16 only.
_NO_BF16 = frozenset({"NonZero", "GridSample", "RoiAlign", "NonMaxSuppression", "STFT"})


# -- known miscompiles -------------------------------------------------------------------------
@dataclass(frozen=True)
class KnownMiscompile:
    """A public TensorRT bug that builds an engine computing wrong results, reproducible from its
    report: the pattern that triggers it and the releases affected, [since, fixed)."""

    op: str
    pattern: str
    since: tuple[int, int]
    fixed: tuple[int, int] | None
    references: tuple[str, ...]

    def reason(self, trt_target: TrtTarget) -> str | None:
        """Why an engine for `trt_target` must not contain the pattern, or None when no release the
        target stands for is affected."""
        if not trt_target.may_run(self.since, self.fixed):
            return None
        until = f" before {self.fixed[0]}.{self.fixed[1]}" if self.fixed else ""
        return (
            f"TensorRT {self.since[0]}.{self.since[1]}+{until} computes {self.pattern} wrongly "
            f"({', '.join(self.references)}); {trt_target.label} may be such a release"
        )


# Several CumSum layers in one network over different axes (or reversed) come out wrong or all
# equal to one of them, from 10.8 on: reported with ONNX models that reproduce it.
SEVERAL_CUMSUMS = KnownMiscompile(
    "CumSum",
    "several CumSum layers over different axes (or reversed) in one engine",
    (10, 8),
    None,
    ("NVIDIA/TensorRT#4551", "NVIDIA/TensorRT#4513", "onnx/onnx-tensorrt#1034"),
)
MISCOMPILES = (SEVERAL_CUMSUMS,)


def _cumsum_kind(node: onnx.NodeProto, g: _Graph) -> tuple[object, ...]:
    axis = g.initializers.get(node.input[1]) if len(node.input) > 1 else None
    return (
        None if axis is None else int(numpy_helper.to_array(axis)),
        _attr(node, "reverse", 0),
        _attr(node, "exclusive", 0),
    )


def _several_cumsums(trt_target: TrtTarget, g: _Graph, nodes: list[onnx.NodeProto]) -> list[Violation]:
    """Every CumSum but those of the first one's kind (axis, reverse, exclusive), and a reversed
    one beside any other, where SEVERAL_CUMSUMS may apply."""
    cumsums = [n for n in nodes if n.op_type == "CumSum"]
    reason = SEVERAL_CUMSUMS.reason(trt_target) if len(cumsums) > 1 else None
    if reason is None:
        return []
    first = _cumsum_kind(cumsums[0], g)
    return [
        Violation(n.name, n.op_type, reason)
        for n in cumsums[1:]
        if _cumsum_kind(n, g) != first or first[1] or _cumsum_kind(n, g)[1]
    ]


# -- the checker -------------------------------------------------------------------------------
def _node_violations(node: onnx.NodeProto, trt_target: TrtTarget, g: _Graph) -> list[str]:
    rule = TABLE.get(node.op_type)
    if node.domain == PLUGIN_DOMAIN:  # a user's plugin: the parser looks it up by name at build time
        return []
    if node.domain not in ("", "ai.onnx"):
        return [f"custom domain '{node.domain}' (TensorRT parses the default ONNX domain only)"]
    if rule is None:
        return [f"{node.op_type} is not in the TensorRT support table (converters/passes/trt_support.py)"]
    if not trt_target.at_least(rule.since):
        return [f"{node.op_type} needs TensorRT {rule.since}+ (target {trt_target.label})"]
    found = []
    bf16 = trt_target.bf16_reason() is None and node.op_type not in _NO_BF16
    engine_types = ENGINE_TYPES | {TensorProto.BFLOAT16} if bf16 else ENGINE_TYPES
    for i, name in enumerate([*node.input, *node.output]):
        t = g.types.get(name)
        if not name or t is None or t in engine_types:
            continue
        where = f"input {i}" if i < len(node.input) else f"output {i - len(node.input)}"
        if t in BOUNDARY_TYPES and node.op_type in ("Cast", "Identity"):
            continue
        if t in QUANTIZED and node.op_type in _QDQ or t == INT4 and node.op_type == "DequantizeLinear" and i in (0, 2):
            continue
        if t in BOUNDARY_TYPES:
            found.append(f"{where} '{name}' is {_name(t)}: TensorRT takes it only as engine I/O (Cast it there)")
        else:
            found.append(f"{where} '{name}' is {_name(t)}, which TensorRT engines do not compute in")
    types = rule.types | (INTS if rule.int_since and trt_target.at_least(rule.int_since) else frozenset())
    if bf16 and TensorProto.FLOAT in types:
        types |= {TensorProto.BFLOAT16}
    data = range(len(node.input)) if rule.data is None else rule.data
    for i in data:
        t = g.types.get(node.input[i]) if i < len(node.input) and node.input[i] else None
        if t is not None and t in engine_types and t not in types:
            allowed = "/".join(sorted((_name(x) for x in types), key=lambda n: (n == "BFLOAT16", n)))
            found.append(f"input {i} is {_name(t)}: {trt_target.label} runs {node.op_type} on {allowed} only")
    for i in rule.initializers:
        if i < len(node.input) and node.input[i] and node.input[i] not in g.initializers:
            found.append(f"input {i} ('{node.input[i]}') must be an initializer")
    if rule.check is not None:
        reason = rule.check(node, trt_target, g)
        if reason:
            found.append(reason)
    return found


def _int64_overflow(trt_target: TrtTarget, g: _Graph, nodes: list[onnx.NodeProto]) -> list[Violation]:
    """8.6 casts INT64 to INT32, clamping: constants outside int32 would change value. Slice
    bounds are exempt: clamping them is what Slice does anyway (e.g. end=INT64_MAX)."""
    if trt_target.int64_native:
        return []
    found = []
    tensors = [(i, g.consumers.get(i.name, [])) for i in g.initializers.values()]
    for node in nodes:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                tensors.append((a.t, [(node, -1)]))
    for tensor, uses in tensors:
        if tensor.data_type != TensorProto.INT64 or not uses:
            continue
        values = numpy_helper.to_array(tensor)
        reason = values.size and trt_target.int32_reason(
            f"int64 constant '{tensor.name}'", int(values.min()), int(values.max())
        )
        if not reason:
            continue
        for node, index in uses:
            if not (node.op_type == "Slice" and index in (1, 2)):
                found.append(Violation(node.name, node.op_type, reason))
                break
    return found


def violations(model: onnx.ModelProto, version: str) -> list[Violation]:
    """Every way `model` breaks what TensorRT `version` (a trt_version setting) parses."""
    trt_target = TrtTarget(version)
    found: list[Violation] = []
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if opset > trt_target.max_opset:
        found.append(
            Violation("", "", f"opset {opset} is above {trt_target.max_opset}, the most {trt_target.label} parses")
        )
    if not trt_target.at_least("10.4") and model.ir_version > 8:
        found.append(Violation("", "", f"IR version {model.ir_version} is above 8, the most TensorRT 8.6 reads"))
    try:
        types = elem_types(model)
    except onnx.shape_inference.InferenceError as e:
        return found + [Violation("", "", f"ONNX type inference fails: {e}")]
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    nodes = _nodes(model.graph)
    for node in nodes:
        for i, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, i))
    g = _Graph(types, {i.name: i for i in model.graph.initializer}, consumers)
    for node in nodes:
        found += [Violation(node.name, node.op_type, rule) for rule in _node_violations(node, trt_target, g)]
    return found + _int64_overflow(trt_target, g, nodes) + _several_cumsums(trt_target, g, nodes)


def _nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """The graph's nodes and, after each, those of its subgraphs (If branches)."""
    found = []
    for node in graph.node:
        found.append(node)
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                found += _nodes(a.g)
    return found
