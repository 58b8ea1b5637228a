"""trt_version: the setting, the per-version ONNX support table and its checker, and what the same
model lowers to for each version."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any, Sequence

import numpy as np
import onnx
import pytest
import torch
from harness import Fn, check_onnx, engine_ops
from onnx import TensorProto, helper, numpy_helper
from support_audit import SupportAudit

import converters
import trt_lower
from converters.core.builder import OPSET, ir_version
from converters.core.target import VERSIONS, TrtTarget
from converters.passes import trt_support
from trt_lower.engine.tensorrt import installed_version
from trt_lower.lowering_options import default_trt_version

aten = torch.ops.aten


# -- the setting -------------------------------------------------------------------------------
@pytest.mark.parametrize("version", ["10.x", "10", 8.6, "11", "7.2", "10.13.0.1.2"])
def test_trt_version_spellings_are_validated(version: Any) -> None:
    with pytest.raises(ValueError, match=r"trt_version must be one of \('8.6', '10.4', '10.12', 'latest'\)"):
        trt_lower.lower_to_trt(torch.nn.ReLU(), (torch.ones(1),), trt_version=version)


def test_default_without_tensorrt_is_10_4() -> None:
    if installed_version() is not None:
        pytest.skip("a tensorrt module is installed here")
    assert default_trt_version() == "10.4"
    lowered = trt_lower.lower_to_trt(Fn(lambda x: x * 2), (torch.ones(2),), backend="onnxruntime", min_block_size=1)
    assert lowered.report.trt_version == "10.4"
    assert "trt_version=10.4" in str(lowered.report)


def test_stubs_alone_are_no_tensorrt_and_stay_unimported(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """tensorrt-stubs alone make `tensorrt` a namespace package: no TensorRT, and not imported (a
    module without a file under TensorRT's name made inspect.getmodule raise in later code, e.g.
    torch.library's register_fake, once the double had been `tensorrt` before it)."""
    (tmp_path / "tensorrt").mkdir()
    (tmp_path / "tensorrt" / "__init__.pyi").write_text("__version__: str\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tensorrt", raising=False)
    assert installed_version() is None
    assert "tensorrt" not in sys.modules


@pytest.mark.parametrize(
    "trt_double, expected",
    [
        ("8.6.1", "8.6"),
        ("10.0.1", "10.4"),
        ("10.4.0", "10.4"),
        ("10.11.0", "10.4"),
        ("10.13.0", "10.12"),
        ("10.14.1", "10.12"),
        ("10.15.0", "latest"),
        ("11.0.0", "latest"),
    ],
    indirect=["trt_double"],
)
def test_default_follows_the_installed_tensorrt(trt_double: ModuleType, expected: str) -> None:
    assert default_trt_version() == expected


@pytest.mark.parametrize("trt_double", ["8.6.1"], indirect=True)
def test_target_newer_than_the_installed_tensorrt_is_refused(trt_double: ModuleType) -> None:
    with pytest.raises(ValueError, match=r"trt_version='10.4' is newer than the installed TensorRT 8.6.1.*'8.6'"):
        trt_lower.lower_to_trt(Fn(lambda x: x * 2), (torch.ones(2),), backend="tensorrt", trt_version="10.4")


def test_capability_checks_are_given_the_target() -> None:
    seen: list[str] = []
    entry = converters.lookup(aten.mul.Tensor)
    assert entry is not None

    def spy(node: torch.fx.Node, goal: TrtTarget) -> None:
        seen.append(goal.version)

    with pytest.MonkeyPatch.context() as patch:
        spied = converters.core.registry.Converter(entry.target, entry.fn, spy)
        patch.setitem(converters.core.registry._REGISTRY, entry.target, spied)
        trt_lower.lower_to_trt(Fn(lambda x: x * 2), (torch.ones(2),), backend="onnxruntime", trt_version="8.6")
    assert seen and set(seen) == {"8.6"}


# -- the checker on models built by hand -------------------------------------------------------
Tensor = tuple[str, int, Sequence[int] | None]


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[Tensor],
    outputs: list[Tensor],
    initializers: Sequence[onnx.TensorProto] = (),
    opset: int = OPSET,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "bad",
        [helper.make_tensor_value_info(*i) for i in inputs],
        [helper.make_tensor_value_info(*o) for o in outputs],
        list(initializers),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version(opset))


def _ints(name: str, values: Sequence[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


FX, I64, I32, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL
X = ("x", FX, [1, 2, 8, 8])


def _quantize_linear(
    scale: np.ndarray[Any, Any] | np.generic,
    zero_point: np.ndarray[Any, Any] | np.generic | None,
    out_type: int = TensorProto.INT8,
    **attrs: Any,
) -> onnx.ModelProto:
    operands = [numpy_helper.from_array(np.asarray(scale), "s")]
    if zero_point is not None:
        operands.append(numpy_helper.from_array(np.asarray(zero_point), "z"))
    node = helper.make_node(
        "QuantizeLinear",
        ["x", "s", "z" if zero_point is not None else ""][: len(operands) + 1],
        ["y"],
        name="q/QuantizeLinear",
        **attrs,
    )
    return _model([node], [("x", FX, [2, 2])], [("y", out_type, [2, 2])], operands)


def _unary(
    op: str, in_type: int = FX, out_type: int | None = None, shape: Sequence[int] = (2, 3), **attrs: Any
) -> onnx.ModelProto:
    return _model(
        [helper.make_node(op, ["x"], ["y"], name=f"n/{op}", **attrs)],
        [("x", in_type, shape)],
        [("y", out_type or in_type, shape)],
    )


def _pool(**attrs: Any) -> onnx.ModelProto:
    outputs = attrs.pop("outputs", ["y"])
    kernel = attrs.pop("kernel_shape", [2, 2])
    shape = [1, 2] + [8] * len(kernel)
    return _model(
        [helper.make_node("MaxPool", ["x"], outputs, name="pool/MaxPool", kernel_shape=kernel, **attrs)],
        [("x", FX, shape)],
        [(o, FX if o == "y" else I64, None) for o in outputs],
    )


def _topk(k: int, k_input: bool = False, **attrs: Any) -> onnx.ModelProto:
    inputs: list[Tensor] = [("x", FX, [5000])] + ([("k", I64, [1])] if k_input else [])
    return _model(
        [helper.make_node("TopK", ["x", "k"], ["v", "i"], name="topk/TopK", **attrs)],
        inputs,
        [("v", FX, None), ("i", I64, None)],
        [] if k_input else [_ints("k", [k])],
    )


def _scatter(op: str, **attrs: Any) -> onnx.ModelProto:
    index_shape = [2, 1] if op == "ScatterND" else [2, 3]
    update_shape = [2, 3] if op == "ScatterND" else [2, 3]
    return _model(
        [helper.make_node(op, ["x", "i", "u"], ["y"], name=f"s/{op}", **attrs)],
        [("x", FX, [4, 3]), ("i", I64, index_shape), ("u", FX, update_shape)],
        [("y", FX, [4, 3])],
    )


def _axes_input(op: str) -> onnx.ModelProto:
    inputs: list[Tensor] = [("x", FX, [2, 1, 3]), ("axes", I64, [1])]
    if op == "Slice":
        node = helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["y"], name="s/Slice")
        return _model([node], inputs, [("y", FX, None)], [_ints("starts", [0]), _ints("ends", [1])])
    return _model([helper.make_node(op, ["x", "axes"], ["y"], name=f"r/{op}")], inputs, [("y", FX, None)])


def _int64_constant(consumer: str) -> onnx.ModelProto:
    if consumer == "Slice":
        node = helper.make_node("Slice", ["x", "starts", "big", "axes"], ["y"], name="s/Slice")
        inits = [_ints("starts", [1]), _ints("big", [2**63 - 1]), _ints("axes", [0])]
        return _model([node], [("x", I64, [4])], [("y", I64, [3])], inits)
    node = helper.make_node("Add", ["x", "big"], ["y"], name="add/Add")
    return _model([node], [("x", I64, [4])], [("y", I64, [4])], [_ints("big", [2**40])])


def _resize(mode: str, coordinates: str) -> onnx.ModelProto:
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], dtype=np.float32), "scales")
    node = helper.make_node(
        "Resize", ["x", "", "scales"], ["y"], name="up/Resize", mode=mode, coordinate_transformation_mode=coordinates
    )
    return _model([node], [X], [("y", FX, [1, 2, 16, 16])], [scales])


def _binary(op: str, in_type: int, out_type: int) -> onnx.ModelProto:
    node = helper.make_node(op, ["a", "b"], ["y"], name=f"n/{op}")
    return _model([node], [("a", in_type, [2, 2]), ("b", in_type, [2, 2])], [("y", out_type, [2, 2])])


def _einsum(equation: str, shapes: list[list[int]]) -> onnx.ModelProto:
    names = [f"x{i}" for i in range(len(shapes))]
    node = helper.make_node("Einsum", names, ["y"], name="e/Einsum", equation=equation)
    return _model([node], [(n, FX, s) for n, s in zip(names, shapes)], [("y", FX, None)])


def _layer_norm_with_mean() -> onnx.ModelProto:
    scale = numpy_helper.from_array(np.ones(3, dtype=np.float32), "scale")
    node = helper.make_node("LayerNormalization", ["x", "scale"], ["y", "mean"], name="ln/LayerNormalization")
    return _model([node], [("x", FX, [2, 3])], [("y", FX, [2, 3]), ("mean", FX, None)], [scale])


BAD = {
    # op / dtype limits
    "integer MatMul": (_binary("MatMul", I64, I64), VERSIONS, "runs MatMul on FLOAT/FLOAT16"),
    "integer Clip": (_unary("Clip", I32), VERSIONS, "runs Clip on FLOAT/FLOAT16"),
    "Pad on bools": (
        _model(
            [helper.make_node("Pad", ["x", "pads"], ["y"], name="p/Pad")],
            [("x", B, [2])],
            [("y", B, [4])],
            [_ints("pads", [1, 1])],
        ),
        VERSIONS,
        "runs Pad on FLOAT/FLOAT16/INT32/INT64",
    ),
    "Equal on bools": (_binary("Equal", B, B), VERSIONS, "runs Equal on FLOAT/FLOAT16/INT32/INT64"),
    "integer Relu before 10.12": (_unary("Relu", I32), ("8.6", "10.4"), "runs Relu on FLOAT/FLOAT16 only"),
    "float64": (_unary("Abs", TensorProto.DOUBLE), VERSIONS, "is DOUBLE, which TensorRT engines do not compute in"),
    "bf16 before 10.12": (
        _unary("Cast", FX, TensorProto.BFLOAT16, to=TensorProto.BFLOAT16),
        ("8.6", "10.4"),
        "is BFLOAT16",
    ),
    "bf16 NonZero": (_unary("NonZero", TensorProto.BFLOAT16, out_type=I64), VERSIONS, "is BFLOAT16"),
    "int8": (_unary("Cast", FX, TensorProto.INT8, to=TensorProto.INT8), VERSIONS, "is INT8"),
    "uint8 arithmetic": (
        _binary("Add", TensorProto.UINT8, TensorProto.UINT8),
        VERSIONS,
        "is UINT8: TensorRT takes it only as engine I/O",
    ),
    "no importer": (
        _model([helper.make_node("Det", ["x"], ["y"], name="n/Det")], [("x", FX, [3, 3])], [("y", FX, [])]),
        VERSIONS,
        "Det is not in the TensorRT support table",
    ),
    "Hardmax on 8.6": (_unary("Hardmax"), ("8.6",), "Hardmax needs TensorRT 10.4+"),
    "NonZero on ints": (_unary("NonZero", I64, out_type=I64), VERSIONS, "runs NonZero on FLOAT/FLOAT16 only"),
    # operands that must be initializers
    "Slice axes": (_axes_input("Slice"), VERSIONS, "input 3 ('axes') must be an initializer"),
    "Squeeze axes": (_axes_input("Squeeze"), VERSIONS, "input 1 ('axes') must be an initializer"),
    "ReduceSum axes": (_axes_input("ReduceSum"), VERSIONS, "input 1 ('axes') must be an initializer"),
    "TopK K": (_topk(5, k_input=True), VERSIONS, "input 1 ('k') must be an initializer"),
    # attributes
    "dilated MaxPool": (_pool(dilations=[2, 2]), VERSIONS, "pooling dilations must be 1"),
    "1D MaxPool": (_pool(kernel_shape=[2]), VERSIONS, "TensorRT pools 2D/3D windows only"),
    "MaxPool Indices": (_pool(outputs=["y", "idx"]), VERSIONS, "MaxPool's Indices output is not supported"),
    "TopK unsorted": (_topk(5, sorted=0), VERSIONS, "TopK needs sorted=1"),
    "TopK large K": (_topk(4000), VERSIONS, "TopK's K must be below 3840"),
    "ScatterND add": (_scatter("ScatterND", reduction="add"), VERSIONS, "ScatterND reduction 'add'"),
    "ScatterElements add on 8.6": (
        _scatter("ScatterElements", axis=0, reduction="add"),
        ("8.6",),
        "ScatterElements reduction 'add' needs TensorRT 10.0+",
    ),
    "Resize crop": (_resize("linear", "tf_crop_and_resize"), VERSIONS, "coordinate_transformation_mode"),
    "Einsum ellipsis before 10.12": (
        _einsum("...ij,...jk->...ik", [[2, 3, 4], [2, 4, 5]]),
        ("8.6", "10.4"),
        "Einsum ellipsis",
    ),
    "Einsum diagonal before 10.12": (_einsum("ii->i", [[3, 3]]), ("8.6", "10.4"), "Einsum diagonal"),
    "LayerNormalization Mean": (_layer_norm_with_mean(), VERSIONS, "only output Y is supported"),
    "InstanceNormalization scale on 8.6": (
        _model(
            [helper.make_node("InstanceNormalization", ["x", "scale", "b"], ["y"], name="in/InstanceNormalization")],
            [X, ("scale", FX, [2])],
            [("y", FX, [1, 2, 8, 8])],
            [numpy_helper.from_array(np.zeros(2, dtype=np.float32), "b")],
        ),
        ("8.6",),
        "scale and B must be initializers",
    ),
    # int64 on 8.6, the model itself
    "int64 beyond int32 on 8.6": (_int64_constant("Add"), ("8.6",), "does not fit int32"),
    "opset 18 on 8.6": (
        _model([helper.make_node("Abs", ["x"], ["y"], name="n/Abs")], [("x", FX, [2])], [("y", FX, [2])], opset=18),
        ("8.6",),
        "opset 18 is above 17",
    ),
    # opset 18's Reduce* take their axes as an input, which TensorRT wants as an initializer
    "runtime reduction axes": (
        _model(
            [helper.make_node("ReduceMax", ["x", "axes"], ["y"], name="r/ReduceMax")],
            [("x", FX, [2, 3]), ("axes", I64, [1])],
            [("y", FX, None)],
            opset=23,
        ),
        VERSIONS,
        "input 1 ('axes') must be an initializer",
    ),
    # explicit quantization: symmetric int8, per channel on weights only
    "asymmetric QuantizeLinear": (
        _quantize_linear(np.float32(0.1), np.int8(3)),
        VERSIONS,
        "zero point must be 0 (TensorRT quantizes symmetrically)",
    ),
    "uint8 QuantizeLinear": (
        _quantize_linear(np.float32(0.1), np.uint8(0), out_type=TensorProto.UINT8),
        VERSIONS,
        "zero point must be an int8 or FP8 (E4M3) initializer",
    ),
    "QuantizeLinear without zero point": (
        _quantize_linear(np.float32(0.1), None, out_type=TensorProto.UINT8),
        VERSIONS,
        "needs an explicit int8 zero point",
    ),
    "negative scale": (_quantize_linear(np.float32(-0.1), np.int8(0)), VERSIONS, "scale must be a positive"),
    "asymmetric DequantizeLinear": (
        _model(
            [helper.make_node("DequantizeLinear", ["w", "s", "z"], ["y"], name="dq/DequantizeLinear")],
            [],
            [("y", FX, [2])],
            [
                numpy_helper.from_array(np.array([3, -5], np.int8), "w"),
                numpy_helper.from_array(np.float32(0.1), "s"),
                numpy_helper.from_array(np.int8(3), "z"),
            ],
        ),
        VERSIONS,
        "zero point must be 0 (TensorRT quantizes symmetrically)",
    ),
    "per-channel activation": (
        _quantize_linear(np.full(2, 0.1, np.float32), np.zeros(2, np.int8), axis=1),
        VERSIONS,
        "per-channel QuantizeLinear of an activation",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_checker_names_node_op_and_rule(case: str) -> None:
    model, versions, rule = BAD[case]
    for version in VERSIONS:
        found = [str(v) for v in trt_support.violations(model, version)]
        if version in versions:
            assert any(rule in f for f in found), f"{version}: {found}"
            assert all(f.startswith("node '") for f in found if "opset" not in f and "IR version" not in f), found
        else:
            assert not found, f"{version} should accept {case}: {found}"


@pytest.mark.parametrize(
    "model",
    [
        _scatter("ScatterElements", axis=0, reduction="add"),
        _unary("Hardmax"),
        _int64_constant("Slice"),  # Slice bounds clamp anyway: exempt from the int32 rule on 8.6
        _resize("cubic", "align_corners"),
        _einsum("ij,jk->ik", [[2, 3], [3, 4]]),
        _topk(3839),
        _unary("Relu", I32),
    ],
    ids=["scatter-add", "hardmax", "slice-int64-max", "resize-cubic", "einsum", "topk-3839", "int-relu"],
)
def test_checker_accepts_on_the_newest_version(model: onnx.ModelProto) -> None:
    assert trt_support.violations(model, "latest") == []


def test_every_attribute_rule_has_a_bad_case() -> None:
    """Each attribute/operand check of the table is broken by a model in BAD (no untested rule)."""
    checks = {rule.check for rule in trt_support.TABLE.values() if rule.check is not None}
    broken = {
        rule.check
        for model, _, _ in BAD.values()
        for n in model.graph.node
        if (rule := trt_support.TABLE.get(n.op_type)) is not None
    }
    assert checks <= broken


# -- the audit of every emitted model ----------------------------------------------------------
def test_audit_flags_a_converter_that_emits_what_tensorrt_rejects(support_audit: SupportAudit) -> None:
    """A converter bug (integer MatMul, capability check removed) is caught twice: lowering keeps
    the node eager with the reason (or raises under require_full), and the session audit sees it."""
    entry = converters.lookup(aten.mm.default)
    assert entry is not None
    model = Fn(lambda a, b: torch.mm(a + 1, b) * 2)
    inputs = (torch.arange(6).reshape(2, 3), torch.arange(6).reshape(3, 2))
    models_before = support_audit.models
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(
            converters.core.registry._REGISTRY,
            entry.target,
            converters.core.registry.Converter(entry.target, entry.fn, None),
        )
        with pytest.raises(trt_lower.UnsupportedOpsError, match=r"would reject node 'mm/MatMul' \(MatMul\)"):
            trt_lower.lower_to_trt(
                model, inputs, backend="onnxruntime", min_block_size=1, require_full=True, trt_version="10.4"
            )
        lowered = trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", min_block_size=1, trt_version="10.4")
    taken = support_audit.take()
    assert support_audit.models > models_before
    assert taken and all("mm/MatMul" in t and "runs MatMul on FLOAT/FLOAT16 only" in t for t in taken), taken
    fallback = {f.op: f.reason for f in lowered.report.fallbacks}
    assert "runs MatMul on FLOAT/FLOAT16 only" in fallback["aten.mm.default"]
    torch.testing.assert_close(lowered(*inputs), model(*inputs))


# -- the same model for each version -----------------------------------------------------------
def _lower(fn: Any, inputs: tuple[torch.Tensor, ...], version: str, **kwargs: Any) -> trt_lower.LoweredModule:
    lowered = trt_lower.lower_to_trt(
        Fn(fn), inputs, backend="onnxruntime", min_block_size=1, trt_version=version, **kwargs
    )
    check_onnx(lowered)
    torch.testing.assert_close(lowered(*inputs), Fn(fn)(*inputs))
    return lowered


def _reasons(lowered: trt_lower.LoweredModule) -> dict[str, str]:
    return {f.op: f.reason for f in lowered.report.fallbacks}


@pytest.mark.parametrize("version", VERSIONS)
def test_integer_matmul_is_refused_with_a_reason_on_every_version(version: str) -> None:
    a = torch.arange(6).reshape(2, 3)
    lowered = _lower(lambda a: torch.mm(a, a.T) + 1, (a,), version)
    assert "floating-point tensors only" in _reasons(lowered)["aten.mm.default"]


@pytest.mark.parametrize("version", VERSIONS)
def test_dilated_max_pool_is_refused(version: str) -> None:
    """TensorRT's pooling layer has no dilation: 10.x's parser refuses it, 8.6 could not run it."""
    x = torch.randn(1, 2, 9, 9)
    pool = lambda x: torch.nn.functional.max_pool2d(x + 1, 2, dilation=2)  # noqa: E731
    lowered = _lower(pool, (x,), version)
    assert "dilation" in _reasons(lowered)["aten.max_pool2d_with_indices.default"]
    plain = _lower(lambda x: torch.nn.functional.max_pool2d(x + 1, 2), (x,), version, require_full=True)
    assert "aten.max_pool2d_with_indices.default" in engine_ops(plain)


def test_int64_beyond_int32_is_refused_on_8_6_only() -> None:
    x = torch.arange(4) * 3
    add_big = lambda x: (x + 2**40) * 2  # noqa: E731
    on_86 = _lower(add_big, (x,), "8.6")
    assert "does not fit int32, which TensorRT 8.6 computes int64 in" in _reasons(on_86)["aten.add.Tensor"]
    for version in ("10.4", "latest"):
        assert "aten.add.Tensor" in engine_ops(_lower(add_big, (x,), version, require_full=True))
    # Slicing to the end (end = INT64_MAX) is exempt: Slice clamps its bounds anyway.
    sliced = _lower(lambda x: x[1:] * 2, (x,), "8.6", require_full=True)
    assert "Slice" in {n.op_type for n in onnx.load_from_string(sliced.engine_0.onnx_bytes).graph.node}

    # So is a slice_scatter to the end (swin_t's shifted-window mask, `mask[-3:] = 1`, exports as
    # one with end = INT64_MAX).
    def fill_tail(x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        y[-2:] = 7
        return y

    scattered = _lower(fill_tail, (x,), "8.6", require_full=True)
    assert "aten.slice_scatter.default" in engine_ops(scattered)


def test_int64_on_8_6_is_noted_in_the_report() -> None:
    x = torch.arange(4)
    on_86 = _lower(lambda x: x * 3 + 1, (x,), "8.6", require_full=True)
    assert any("computes int64 as int32 on TensorRT 8.6" in n and "mul" in n for n in on_86.report.notes)
    assert not _lower(lambda x: x * 3 + 1, (x,), "10.4").report.notes


@pytest.mark.parametrize("trt_double", ["8.6.1"], indirect=True)
def test_int64_input_beyond_int32_is_refused_by_a_tensorrt_8_6_engine(trt_double: ModuleType) -> None:
    model, x = Fn(lambda x: x * 2 + 1), torch.arange(4)
    lowered = trt_lower.lower_to_trt(model, (x,), backend="tensorrt", min_block_size=1)
    assert lowered.report.trt_version == "8.6"
    torch.testing.assert_close(lowered(x), model(x))
    with pytest.raises(trt_lower.EngineInputError, match="holds values outside int32"):
        lowered(torch.tensor([0, 1, 2, 2**40]))


# -- the opset each target emits ----------------------------------------------------------------
def _reduce_and_sample(x: torch.Tensor, grid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.amax(dim=1) + x.mean(dim=(1, 2)).unsqueeze(-1), torch.nn.functional.grid_sample(
        x[:, None], grid, align_corners=False
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_each_target_emits_its_opset_in_that_opsets_forms(version: str) -> None:
    """Opset 18 moved Reduce*'s axes to an input and opset 20 renamed GridSample's modes: a
    target's engines are written at its opset, each node in that opset's form."""
    inputs = (torch.randn(2, 3, 4), torch.rand(2, 3, 4, 2) * 2 - 1)
    model = onnx.load_from_string(_lower(_reduce_and_sample, inputs, version, require_full=True).engine_0.onnx_bytes)
    opset = TrtTarget(version).opset
    assert [(o.domain, o.version) for o in model.opset_import] == [("", opset)]
    assert model.ir_version == ir_version(opset) and (opset == 17) == (model.ir_version == 8)
    initializers = {i.name for i in model.graph.initializer}
    for node in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type in ("ReduceMax", "ReduceMean"):
            assert ("axes" in attrs) == (opset < 18)
            assert (len(node.input) == 2 and node.input[1] in initializers) == (opset >= 18)
        if node.op_type == "GridSample":
            assert attrs["mode"] == (b"linear" if opset >= 20 else b"bilinear")


def test_no_target_emits_an_opset_its_parser_cannot_read() -> None:
    assert all(TrtTarget(v).opset <= TrtTarget(v).max_opset for v in VERSIONS)
