"""Weight-stripped artifacts: `save(lowered, path, weights="separate")` writes the graph and each
engine's ONNX without its weights, and the weights as a safetensors file beside it
(`<path stem>.safetensors`); `load(path, weights=...)` takes that file, or another one saved for the
same architecture (a fine-tuned copy), or a state dict of the file's keys. One code artifact serves
any number of weight files.

The file's keys: `<engine>/<initializer>` for each weight of an engine's ONNX (every float or int8
initializer, large or small), `eager/<attribute>` for each tensor an eager node reads. Shapes,
integer constants (axes, indices) and the graph stay in the artifact. Both the artifact's manifest
and the file's metadata carry a fingerprint of the stripped graphs and of every key's dtype and
shape: a file saved for another architecture is refused, naming it. A weight file is untrusted
input like the artifact: safetensors only (nothing unpickled), every key, dtype and shape checked
before anything is built.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import ml_dtypes
import numpy as np
import onnx
import safetensors
import safetensors.torch
import torch
from numpy.typing import NDArray

from converters.core.dtypes import numpy_view
from converters.core.errors import TrtLowerError
from converters.core.segment import OnnxSegment
from trt_lower.deploy import onnx_members
from trt_lower.deploy.onnx_members import OnnxMemberError
from trt_lower.engine.cache import atomic_file

FORMAT = "trt_lower weights"
EAGER = "eager/"
# The ONNX types stripped: an engine's weights (what a refit replaces).
_WEIGHT_TYPES = frozenset(
    {
        onnx.TensorProto.FLOAT,
        onnx.TensorProto.FLOAT16,
        onnx.TensorProto.BFLOAT16,
        onnx.TensorProto.DOUBLE,
        onnx.TensorProto.INT8,
    }
)
# A stripped initializer's external location: the values are in the weight file, under its key.
_LOCATION = "trt_lower:separate"


class WeightFileError(TrtLowerError, ValueError):
    """A weight file (or state dict) that does not fit the artifact: names the file and the key."""


def weights_path(path: str | os.PathLike[str]) -> Path:
    """Where save(..., weights="separate") writes the weights: beside the artifact, `<stem>.safetensors`."""
    return Path(path).with_suffix(".safetensors")


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@dataclass
class Separated:
    """What saving with separate weights collects: every weight by key, and the manifest's record."""

    tensors: dict[str, torch.Tensor] = field(default_factory=dict)

    def strip(self, engine: str, segment: OnnxSegment) -> bytes:
        """`segment`'s graph with every weight declared but not held (its values go to the file)."""
        model = onnx.ModelProto()
        model.CopyFrom(segment.model)
        for tensor in model.graph.initializer:
            if tensor.data_type in _WEIGHT_TYPES:
                # A copy: weights of one parameter read twice (tied) must not share storage in the file.
                self.tensors[f"{engine}/{tensor.name}"] = _tensor(segment.values(tensor))
                stripped = onnx.TensorProto(
                    name=tensor.name,
                    data_type=tensor.data_type,
                    dims=tensor.dims,
                    data_location=onnx.TensorProto.EXTERNAL,
                )
                stripped.external_data.add(key="location", value=_LOCATION)
                tensor.CopyFrom(stripped)
        return bytes(model.SerializeToString())

    def eager(self, target: str, tensor: torch.Tensor) -> None:
        self.tensors[EAGER + target] = tensor.detach().cpu().contiguous().clone()

    def record(self, graphs: list[bytes]) -> dict[str, Any]:
        """The manifest's `separate_weights` entry: each key's dtype and shape, and the fingerprint."""
        shapes = {k: [_dtype_name(t.dtype), list(t.shape)] for k, t in self.tensors.items()}
        return {"tensors": shapes, "fingerprint": fingerprint(graphs, shapes)}

    def write(self, path: Path, record: dict[str, Any]) -> int:
        """The weights as a safetensors file at `path` (atomically); returns its size in bytes."""
        with atomic_file(path, private=False) as file:
            file.write(
                safetensors.torch.save(self.tensors, metadata={"format": FORMAT, "fingerprint": record["fingerprint"]})
            )
        return path.stat().st_size


def fingerprint(graphs: list[bytes], shapes: Mapping[str, Any]) -> str:
    digest = hashlib.sha256()
    for graph in graphs:
        digest.update(hashlib.sha256(graph).digest())
    digest.update(json.dumps(shapes, sort_keys=True).encode())
    return digest.hexdigest()


def read(
    source: str | os.PathLike[str] | Mapping[str, torch.Tensor], record: Mapping[str, Any], artifact: Path
) -> dict[str, torch.Tensor]:
    """The tensors of a weight file (or a state dict of its keys), checked against the artifact's
    record: exactly its keys, each of its dtype and shape, a file saved for this architecture."""
    if isinstance(source, Mapping):
        where, tensors = "the state dict", dict(source)
    elif isinstance(source, (str, os.PathLike)):
        where, tensors = str(source), _load_file(Path(source), str(record["fingerprint"]), artifact)
    else:
        raise WeightFileError(
            f"weights must be a path to a safetensors file or a state dict, got {type(source).__name__}"
        )
    expected: Mapping[str, Any] = record["tensors"]
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise WeightFileError(
            f"{where} does not fit {artifact}: "
            + "; ".join(
                (
                    [f"missing '{missing[0]}'" + (f" and {len(missing) - 1} more" if len(missing) > 1 else "")]
                    if missing
                    else []
                )
                + ([f"unexpected '{unexpected[0]}'"] if unexpected else [])
            )
        )
    for key, (dtype, shape) in expected.items():
        t = tensors[key]
        if not isinstance(t, torch.Tensor) or _dtype_name(t.dtype) != dtype or list(t.shape) != list(shape):
            got = f"{_dtype_name(t.dtype)} {list(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
            raise WeightFileError(f"{where}: '{key}' is {got}; {artifact} takes {dtype} {list(shape)}")
    return tensors


def _load_file(path: Path, expected: str, artifact: Path) -> dict[str, torch.Tensor]:
    if not path.is_file():
        raise FileNotFoundError(f"trt_lower.load: no such weight file: {path}")
    try:
        with safetensors.safe_open(str(path), framework="pt") as file:
            metadata = file.metadata() or {}
            if metadata.get("format") != FORMAT:
                raise WeightFileError(
                    f"{path} is not a trt_lower weight file (save(..., weights='separate') writes them)"
                )
            if metadata.get("fingerprint") != expected:
                raise WeightFileError(
                    f"{path} holds weights for another graph than {artifact}'s (saved from another "
                    "architecture or lowering settings)"
                )
            return {key: file.get_tensor(key) for key in file.keys()}
    except WeightFileError:
        raise
    except Exception as e:  # safetensors' own errors on a foreign or damaged file
        raise WeightFileError(f"{path} is not a safetensors file ({e})") from None


def filled(engine: str, graph: bytes, tensors: Mapping[str, torch.Tensor]) -> OnnxSegment:
    """An engine's stripped graph with its weights from `tensors` (checked by `read`), held as
    lowering holds them (large ones beside the graph). The graph is read as onnx_members reads
    every engine's ONNX: its initializers may name the weight file only, nothing else external."""

    def weight(tensor: onnx.TensorProto) -> NDArray[Any]:
        where = {e.key: e.value for e in tensor.external_data}
        key = f"{engine}/{tensor.name}"
        if where != {"location": _LOCATION} or key not in tensors:
            raise OnnxMemberError(
                f"initializer '{tensor.name[:80]}' declares external data {where!r}; a stripped "
                "graph's weights come from its weight file, by their names"
            )
        return numpy_view(tensors[key].contiguous())

    return onnx_members.stripped(graph, weight)


def eager_weights(tensors: Mapping[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {k.removeprefix(EAGER): v.to(device) for k, v in tensors.items() if k.startswith(EAGER)}


def _tensor(array: NDArray[Any]) -> torch.Tensor:
    """A copy of `array` as a torch tensor (bfloat16 through its bits: torch reads no ml_dtypes array)."""
    if array.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(array.view(np.uint16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.array(array))
