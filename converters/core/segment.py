"""An engine segment's ONNX, its weights kept beside it instead of inside it.

A float initializer of at least EXTERNAL_MIN_BYTES is declared in the ModelProto as external data
(name, type and dims only); its values stay a numpy array, for a weight a view of the torch
tensor, in `OnnxSegment.weights`. ONNX Runtime receives the arrays through
SessionOptions.add_external_initializers. Where the graph and its weights must be bytes or files:
`to_bytes()` is the self-contained model (one protobuf message, so at most 2 GB); `graph_bytes()`
with `write_weights()` are the graph and its weights as ONNX external data (any size), and
`save()` writes both files, as TensorRT's parser, ONNX Runtime and onnx.load read them.

Why: serializing a model's weights into protobuf only for ONNX Runtime to parse them out again
is a full copy of every weight, twice, for nothing; and one protobuf message cannot exceed 2 GB.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Callable, ContextManager, Protocol

import numpy as np
import onnx
from numpy.typing import NDArray
from onnx import TensorProto, numpy_helper

from converters.core.dtypes import FLOAT_WEIGHTS
from converters.core.errors import TrtLowerError

EXTERNAL_MIN_BYTES = 4096
# protobuf's limit on one serialized message (an ONNX model with its weights embedded), with room
# for the graph itself.
PROTOBUF_LIMIT = (2 << 30) - (64 << 20)
# Where external weights start in their file: a multiple of this, so that arrays read in place
# (memory-mapped) are aligned for any dtype and SIMD load.
ALIGNMENT = 64
# add_external_initializers only checks that a location is given; nothing is read from it.
_LOCATION = "trt_lower:weights"


def _kept_apart(array: NDArray[Any]) -> bool:
    return array.dtype in FLOAT_WEIGHTS and array.nbytes >= EXTERNAL_MIN_BYTES


def _declare(name: str, array: NDArray[Any]) -> TensorProto:
    """An initializer that only names its type and dims; the values are `array`, kept apart."""
    tensor = TensorProto(
        name=name, data_type=FLOAT_WEIGHTS[array.dtype], dims=array.shape, data_location=TensorProto.EXTERNAL
    )
    tensor.external_data.add(key="location", value=_LOCATION)
    return tensor


def protobuf_limit() -> int:
    """PROTOBUF_LIMIT, or $TRT_LOWER_PROTOBUF_LIMIT (bytes) where set: the tests lower it to take the
    paths of models past 2 GB with small ones."""
    return int(os.environ.get("TRT_LOWER_PROTOBUF_LIMIT", PROTOBUF_LIMIT))


# Opens a file to write, as a context manager (save() and write()).
Opener = Callable[[Path], ContextManager[BinaryIO]]


def _open_to_write(path: Path) -> BinaryIO:
    return open(path, "wb")


class Writable(Protocol):
    """Where write_weights writes: a binary file, or anything with its write."""

    def write(self, data: bytes | memoryview, /) -> int: ...


class ProtobufLimitError(TrtLowerError, ValueError):
    """A model asked for as one protobuf message that would exceed protobuf's 2 GB limit."""


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

    @property
    def weight_bytes(self) -> int:
        return sum(a.nbytes for a in self.weights.values())

    def fits_one_protobuf(self) -> bool:
        """Whether the self-contained model stays within protobuf's limit (protobuf_limit())."""
        graph: int = self.model.ByteSize()
        return graph + self.weight_bytes <= protobuf_limit()

    def layout(self) -> dict[str, tuple[int, int]]:
        """Each external initializer's (offset, length) in the weights file, in `weights` order,
        each offset a multiple of ALIGNMENT."""
        spans, offset = {}, 0
        for name, array in self.weights.items():
            offset = -(-offset // ALIGNMENT) * ALIGNMENT
            spans[name] = (offset, array.nbytes)
            offset += array.nbytes
        return spans

    def graph_bytes(self, location: str, start: int = 0) -> bytes:
        """The model with each external initializer pointing into the weights file `location`
        (a path relative to the model's, as ONNX external data), the weights `start` bytes
        further in than layout() places them: the graph alone, small."""
        graph = onnx.ModelProto()
        graph.CopyFrom(self.model)
        spans = self.layout()
        for tensor in graph.graph.initializer:
            if is_external(tensor):
                offset, length = spans[tensor.name]
                del tensor.external_data[:]
                for key, value in (("location", location), ("offset", str(start + offset)), ("length", str(length))):
                    tensor.external_data.add(key=key, value=value)
        return bytes(graph.SerializeToString())

    def write_weights(self, file: Writable) -> int:
        """Write the external initializers' values as `layout()` places them (no copy beyond what
        a non-contiguous array needs); returns the bytes written."""
        written = 0
        for (offset, _), array in zip(self.layout().values(), self.weights.values()):
            file.write(bytes(offset - written))
            data = np.ascontiguousarray(array).data.cast("B")  # little-endian, as ONNX's
            file.write(data)
            written = offset + data.nbytes
        return written

    def save(self, path: str | os.PathLike[str], opener: Opener = _open_to_write) -> Path:
        """Write the model to `path` and its weights beside it (`<name>.data`), as ONNX external data
        that TensorRT's parser, ONNX Runtime and onnx.load read; returns the model's path. `opener`
        opens each file to write (an atomic writer, say, where a reader must never see half a file)."""
        model = Path(path)
        with opener(model.with_name(model.name + ".data")) as file:
            self.write_weights(file)
        with opener(model) as file:
            file.write(self.graph_bytes(model.name + ".data"))
        return model

    def write(self, path: str | os.PathLike[str], opener: Opener = _open_to_write) -> Path:
        """The model at `path`: self-contained where it fits one protobuf message, else with its
        weights beside it (save()); returns `path`. `opener`: as save()'s."""
        if not self.fits_one_protobuf():
            return self.save(path, opener)
        model = Path(path)
        with opener(model) as file:
            file.write(self.to_bytes())
        return model

    def to_bytes(self) -> bytes:
        """The self-contained model: every external initializer embedded as raw data.
        ProtobufLimitError where that would exceed protobuf's limit (use save() instead)."""
        if not self.fits_one_protobuf():
            raise ProtobufLimitError(
                f"the model with its weights ({self.weight_bytes / 2**30:.2f} GiB of them) exceeds the limit of one "
                f"protobuf message ({protobuf_limit() / 2**30:.2f} GiB): write it with its weights beside it "
                "(OnnxSegment.save) instead"
            )
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
