"""The TensorRT double against TensorRT itself: its enums carry the values of NVIDIA's bindings
(from tensorrt-stubs), and its ONNX parser refuses what the real parser of its version refuses."""

from __future__ import annotations

import importlib
import re
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from onnx import TensorProto, helper
from trt_double import double

# `    TF32: typing.ClassVar[BuilderFlag]  # value = <BuilderFlag.TF32: 6>`
_MEMBER = re.compile(r"^\s+(\w+): typing\.ClassVar\[([\w.]+)\]  # value = <[\w.]+: (-?\d+)>", re.MULTILINE)
ENUMS = (
    double.DataType,
    double.TensorIOMode,
    double.MemoryPoolType,
    double.BuilderFlag,
    double.PreviewFeature,
    double.ProfilingVerbosity,
    double.LayerInformationFormat,
    double.ExecutionContextAllocationStrategy,
    double.NetworkDefinitionCreationFlag,
    double.ILogger.Severity,
    double.SerializationFlag,
)


def _stub_values() -> dict[str, dict[str, int]]:
    """Enum name -> member -> value, as the stubs record them from the real bindings."""
    try:
        files = distribution("tensorrt-stubs").files or []
    except PackageNotFoundError:
        pytest.skip("tensorrt-stubs is not installed (pip install --no-deps tensorrt-stubs==10.13.0.35.1)")
    (stub,) = [f for f in files if str(f).endswith("tensorrt_bindings/tensorrt.pyi")]
    values: dict[str, dict[str, int]] = {}
    for member, enum, value in _MEMBER.findall(Path(str(stub.locate())).read_text()):
        values.setdefault(enum.rsplit(".", 1)[-1], {})[member] = int(value)
    return values


@pytest.mark.parametrize("enum", ENUMS, ids=lambda e: e.__name__)
def test_enum_values_are_tensorrts(enum: type[double._Enum]) -> None:
    real = _stub_values()[enum.__name__]
    members = {name: int(m) for name, m in vars(enum).items() if isinstance(m, double._Enum)}
    assert members and {name: real.get(name) for name in members} == members


def _int_relu() -> bytes:
    """Relu on int32: ONNX Runtime runs it; TensorRT's parser takes integer Relu only lately."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu/Relu")],
        "engine_0",
        [helper.make_tensor_value_info("x", TensorProto.INT32, [4])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return bytes(model.SerializeToString())


@pytest.mark.parametrize(
    "trt_double, refused", [("8.6.1", True), ("10.4.0", True), ("10.13.0", False)], indirect=["trt_double"]
)
def test_the_parser_refuses_what_its_versions_table_refuses(trt_double: ModuleType, refused: bool) -> None:
    builder = trt_double.Builder(_logger())
    parser = trt_double.OnnxParser(builder.create_network(_flags(trt_double)), _logger())
    assert parser.parse(_int_relu()) is not refused
    if refused:
        (error,) = [parser.get_error(i) for i in range(parser.num_errors)]
        assert error.node() == 0 and "INT32" in error.desc()


def _logger() -> Any:
    return importlib.import_module("trt_lower.runtime.trt_logger").LOGGER


def _flags(trt: ModuleType) -> int:
    return 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH) if trt.__version__.startswith("8.") else 0
