"""Weight-stripped artifacts: `save(lowered, path, weights="separate")` writes the graph and each
engine's ONNX without its weights, and the weights as a safetensors file beside it
(`<path stem>.safetensors`); `load(path, weights=...)` takes that file, or another one saved for the
same architecture (a fine-tuned copy), or a state dict of the file's keys, or the model's own state
dict (by the names StateNames records). One code artifact serves any number of weight files.

The file's keys: `<engine>/<initializer>` for each weight of an engine's ONNX (every float or int8
initializer, large or small, but the conversion's own constants where the names are known),
`eager/<attribute>` for each tensor an eager node reads. Shapes, integer constants (axes, indices)
and the graph stay in the artifact. Both the artifact's manifest
and the file's metadata carry a fingerprint of the stripped graphs and of every key's dtype and
shape: a file saved for another architecture is refused, naming it. A weight file is untrusted
input like the artifact: safetensors only (nothing unpickled), every key, dtype and shape checked
before anything is built.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, cast

import ml_dtypes
import numpy as np
import onnx
import safetensors
import safetensors.torch
import torch
from numpy.typing import NDArray
from onnx import numpy_helper

from converters.core.dtypes import numpy_view
from converters.core.errors import TrtLowerError
from converters.core.segment import OnnxSegment
from trt_lower.capture.dtensor import layout_mismatch, unwrapped
from trt_lower.deploy import onnx_members
from trt_lower.deploy.onnx_members import OnnxMemberError
from trt_lower.values.atomic_file import atomic_file

FORMAT = "trt_lower weights"
EAGER = "eager/"
# The ONNX types stripped: an engine's weights (what a refit replaces).
WEIGHT_TYPES = frozenset(
    {
        onnx.TensorProto.FLOAT,
        onnx.TensorProto.FLOAT16,
        onnx.TensorProto.BFLOAT16,
        onnx.TensorProto.DOUBLE,
        onnx.TensorProto.INT8,
    }
)
# The largest tensor (in bytes) the manifest keeps for a load from a state dict that lacks it.
_MAX_DEFAULT = 1 << 20
# A DTensor layout's text (shard_layout's: placements, mesh shape) is short; a longer one is none.
_MAX_LAYOUT = 200
# A stripped initializer's external location: the values are in the weight file, under its key.
_LOCATION = "trt_lower:separate"


class WeightFileError(TrtLowerError, ValueError):
    """A weight file (or state dict) that does not fit the artifact: names the file and the key."""


def weights_path(path: str | os.PathLike[str]) -> Path:
    """Where save(..., weights="separate") writes the weights: beside the artifact, `<stem>.safetensors`."""
    return Path(path).with_suffix(".safetensors")


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@dataclass(frozen=True)
class StateNames:
    """Which of the model's tensors, by its own names, each key of the weight file is
    (trt_lower/refit/names.py finds them), so that a load takes `model.state_dict()`."""

    sources: dict[str, str]  # key -> the model's tensor it is (in the key's dtype)
    state: dict[str, tuple[torch.dtype, tuple[int, ...]]]  # every tensor of the model lowering froze
    required: frozenset[str]  # those a state dict must give (its state dict's keys)
    literals: frozenset[str]  # engine weights the same for any weights: kept in the artifact
    derived: frozenset[str]  # keys computed from the weights by conversion: only the weight file has them
    layouts: dict[str, str] = field(default_factory=dict)  # a tensor-parallel model's DTensors: shard_layouts


@dataclass
class Separated:
    """What saving with separate weights collects: every weight by key, and the manifest's record."""

    names: StateNames | None = None
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)

    @classmethod
    def of(cls, lowered: torch.nn.Module) -> Separated:
        """For saving `lowered`, with its model's names where it holds its captured graph (found by
        refit/, which ranks above deploy/: imported by name)."""
        return cls(importlib.import_module("trt_lower.refit.names").state_names(lowered))

    def strip(self, engine: str, segment: OnnxSegment) -> bytes:
        """`segment`'s graph with every weight declared but not held (its values go to the file);
        the conversion's own constants (names.literals) held in the graph, large ones too."""
        model = onnx.ModelProto()
        model.CopyFrom(segment.model)
        for tensor in model.graph.initializer:
            if tensor.data_type not in WEIGHT_TYPES:
                continue
            if self.names is not None and f"{engine}/{tensor.name}" in self.names.literals:
                tensor.CopyFrom(numpy_helper.from_array(segment.values(tensor), tensor.name))
                continue
            # A copy: weights of one parameter read twice (tied) must not share storage in the file.
            self.tensors[f"{engine}/{tensor.name}"] = _tensor(segment.values(tensor))
            stripped = onnx.TensorProto(
                name=tensor.name, data_type=tensor.data_type, dims=tensor.dims, data_location=onnx.TensorProto.EXTERNAL
            )
            stripped.external_data.add(key="location", value=_LOCATION)
            tensor.CopyFrom(stripped)
        return bytes(model.SerializeToString())

    def eager(self, target: str, tensor: torch.Tensor) -> None:
        self.tensors[EAGER + target] = tensor.detach().cpu().contiguous().clone()

    def record(self, graphs: list[bytes]) -> dict[str, Any]:
        """The manifest's `separate_weights` entry: each key's dtype and shape, and the fingerprint."""
        shapes = {k: [_dtype_name(t.dtype), list(t.shape)] for k, t in self.tensors.items()}
        record = {"tensors": shapes, "fingerprint": fingerprint(graphs, shapes)}
        return record if self.names is None else {**record, "names": self._names_record(self.names)}

    def _names_record(self, names: StateNames) -> dict[str, Any]:
        """The manifest's record of `names`, with the values of the keys a state dict need not
        give (non-persistent buffers, tensors of the forward's own) up to _MAX_DEFAULT each."""
        defaults = {
            key: t.reshape(-1).view(torch.uint8).numpy().tobytes().hex()
            for key, t in self.tensors.items()
            if key not in names.derived
            and names.sources.get(key) not in names.required
            and t.numel() * t.element_size() <= _MAX_DEFAULT
        }
        return {
            "sources": {k: v for k, v in names.sources.items() if k in self.tensors},
            "state": {k: [_dtype_name(d), list(s)] for k, (d, s) in names.state.items()},
            "required": sorted(names.required),
            "defaults": defaults,
            **({"layouts": names.layouts} if names.layouts else {}),
        }

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
    expected: Mapping[str, Any] = record["tensors"]
    if isinstance(source, Mapping):
        # A tensor-parallel model's DTensors by the names and shards its lowered graph reads.
        if (problem := layout_mismatch(source, _layouts(record))) is not None:
            raise WeightFileError(f"the state dict does not fit {artifact}: {problem}")
        where, tensors = "the state dict", cast(dict[str, torch.Tensor], unwrapped(source))
        if not set(tensors) & set(expected):  # none of the file's keys: the model's own names
            if "names" not in record:
                raise WeightFileError(
                    f"the state dict has none of the weight file's keys, and {artifact} records no "
                    "names of the model's own (saved from a module trt_lower.load made, or from a "
                    "model whose weights the conversion derives otherwise): load it with its weight file"
                )
            tensors = from_state(tensors, record["names"], expected, artifact)
    elif isinstance(source, (str, os.PathLike)):
        where, tensors = str(source), _load_file(Path(source), str(record["fingerprint"]), artifact)
    else:
        raise WeightFileError(
            f"weights must be a path to a safetensors file or a state dict, got {type(source).__name__}"
        )
    _fits(where, tensors, expected, list(expected), str(artifact))
    return tensors


def _layouts(record: Mapping[str, Any]) -> Mapping[str, str]:
    """The lowered model's DTensor layouts by name the record keeps ({} for a model without any)."""
    layouts = record.get("names", {}).get("layouts", {})
    if not (isinstance(layouts, dict) and all(isinstance(v, str) and len(v) <= _MAX_LAYOUT for v in layouts.values())):
        raise TypeError("field 'separate_weights.names.layouts' is not a map of names to layouts")
    return layouts


def from_state(
    given: Mapping[str, object], names: Mapping[str, Any], expected: Mapping[str, Any], artifact: Path
) -> dict[str, torch.Tensor]:
    """The weight file's tensors from a state dict by the model's own names (`names`, the record
    StateNames wrote): each key the tensor it is, cast to the key's dtype, else the artifact's
    default. WeightFileError naming the model's tensor that does not fit, or the key no name gives."""
    state: Mapping[str, Any] = names["state"]
    _fits("the state dict", given, state, names["required"], str(artifact))
    tensors = {}
    for key, (dtype, shape) in expected.items():
        source = names["sources"].get(key)
        if source in given:
            tensor = given[source]
            assert isinstance(tensor, torch.Tensor)  # as _fits checked
            tensors[key] = tensor.detach().cpu().to(_dtype(dtype)).contiguous()
        elif key in names["defaults"]:
            tensors[key] = _decoded(names["defaults"][key], dtype, shape, key)
        elif source is not None:
            raise WeightFileError(
                f"the state dict has no '{source}' (a tensor outside the state dict, such as a "
                f"non-persistent buffer, too large for {artifact} to keep): give it by name"
            )
        else:
            raise WeightFileError(
                f"'{key}' is computed from the weights while converting (quantized, say): "
                f"load {artifact} with the weight file save wrote, or lower the model again"
            )
    return tensors


def _fits(where: str, given: Mapping[str, object], state: Mapping[str, Any], required: list[str], whose: str) -> None:
    """WeightFileError naming the first key `given` lacks of `required`, has and `state` (each
    key's [dtype, shape]) does not, or has of another dtype or shape."""
    missing = sorted(k for k in required if k not in given)
    unexpected = sorted(str(k) for k in given if k not in state)
    if missing or unexpected:
        raise WeightFileError(
            f"{where} does not fit {whose}: "
            + "; ".join(
                (
                    [f"missing '{missing[0]}'" + (f" and {len(missing) - 1} more" if len(missing) > 1 else "")]
                    if missing
                    else []
                )
                + ([f"unexpected '{unexpected[0]}'"] if unexpected else [])
            )
        )
    for key, t in given.items():
        dtype, shape = state[key]
        if not isinstance(t, torch.Tensor) or _dtype_name(t.dtype) != dtype or list(t.shape) != list(shape):
            got = f"{_dtype_name(t.dtype)} {list(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
            raise WeightFileError(f"{where}: '{key}' is {got}; {whose} takes {dtype} {list(shape)}")


def _dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None) if name.isidentifier() else None
    if not isinstance(dtype, torch.dtype):
        raise WeightFileError(f"'{name[:40]}' is not a torch dtype")
    return dtype


def _decoded(text: str, dtype: str, shape: list[int], key: str) -> torch.Tensor:
    """A default the manifest keeps (its bytes in hex), checked to be a tensor of `dtype` and `shape`."""
    data = bytearray.fromhex(text)
    t = _dtype(dtype)
    size = int(np.prod(shape, dtype=object)) * t.itemsize
    if len(data) != size:
        raise WeightFileError(f"the value kept for '{key}' has {len(data)} bytes; {dtype} {list(shape)} has {size}")
    return torch.frombuffer(data, dtype=torch.uint8).view(t).reshape(shape) if size else torch.zeros(shape, dtype=t)


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
