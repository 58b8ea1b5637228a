"""Weights kept beside a segment's ONNX instead of inside it.

A float initializer of at least EXTERNAL_MIN_BYTES is declared in the ModelProto as external data
(name, type and dims only); its values stay a numpy array, for a weight a view of the torch
tensor, in `OnnxSegment.weights`. ONNX Runtime receives the arrays through
SessionOptions.add_external_initializers; TensorRT's parser, the engine cache and anyone reading
`onnx_bytes` get the self-contained model from `OnnxSegment.to_bytes()`.

Why: serializing a model's weights into protobuf only for ONNX Runtime to parse them out again
is a full copy of every weight, twice, for nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from numpy.typing import NDArray
import onnx
from onnx import TensorProto, numpy_helper

from converters.core.dtypes import FLOAT_WEIGHTS

EXTERNAL_MIN_BYTES = 4096
# add_external_initializers only checks that a location is given; nothing is read from it.
_LOCATION = "trt_lower:weights"


def _kept_apart(array: NDArray[Any]) -> bool:
    return array.dtype in FLOAT_WEIGHTS and array.nbytes >= EXTERNAL_MIN_BYTES


def _declare(name: str, array: NDArray[Any]) -> TensorProto:
    """An initializer that only names its type and dims; the values are `array`, kept apart."""
    tensor = TensorProto(name=name, data_type=FLOAT_WEIGHTS[array.dtype], dims=array.shape,
                         data_location=TensorProto.EXTERNAL)
    tensor.external_data.add(key="location", value=_LOCATION)
    return tensor


def is_external(tensor: TensorProto) -> bool:
    return tensor.data_location == TensorProto.EXTERNAL


def initializer(name: str, array: NDArray[Any], weights: dict[str, NDArray[Any]]) -> TensorProto:
    """`array` as an initializer: declared external, its values put in `weights`, when large."""
    if not _kept_apart(array):
        return numpy_helper.from_array(array, name)
    weights[name] = array
    return _declare(name, array)


@dataclass
class OnnxSegment:
    """An engine segment's ONNX model and the values of the initializers it declares external."""

    model: onnx.ModelProto
    weights: dict[str, NDArray[Any]] = field(default_factory=dict)

    def values(self, tensor: TensorProto) -> NDArray[Any]:
        """The values of an initializer or constant tensor of the model."""
        return self.weights[tensor.name] if is_external(tensor) else numpy_helper.to_array(tensor)

    def initializer(self, name: str, array: NDArray[Any]) -> TensorProto:
        return initializer(name, array, self.weights)

    def assign(self, tensor: TensorProto, array: NDArray[Any]) -> None:
        """Make `tensor` (an initializer or a node attribute's) hold `array`, in a new dtype say;
        it stays external if it was."""
        if is_external(tensor):
            self.weights[tensor.name] = array
            tensor.CopyFrom(_declare(tensor.name, array))
        else:
            tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))

    def to_bytes(self) -> bytes:
        """The self-contained model: every external initializer embedded as raw data."""
        if not self.weights:
            return bytes(self.model.SerializeToString())
        full = onnx.ModelProto()
        full.CopyFrom(self.model)
        for tensor in full.graph.initializer:
            if is_external(tensor):
                del tensor.external_data[:]
                tensor.data_location = TensorProto.DEFAULT
                tensor.raw_data = self.weights[tensor.name].tobytes()  # little-endian, as ONNX's
        return bytes(full.SerializeToString())
