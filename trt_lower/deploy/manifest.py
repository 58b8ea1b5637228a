"""The artifact's manifest: what each field holds, checked before any of it is used.

Every check names the field (`engines[0].inputs[1].max`), and every refusal is an ArtifactError
naming the file. The members a manifest may refer to are listed here (`members`): the container
holds exactly those, so a new kind of member is one more entry there.
"""

from __future__ import annotations

import re
from typing import Any, Iterator, TypeVar, cast

import onnx
import torch

from converters.core.errors import TrtLowerError
from trt_lower.deploy.container import ArtifactError, Container
from trt_lower.report import EngineReport, Fallback, GraphNode, LoweringReport, Repair
from trt_lower.values.signature import ShapeRange, TensorSig
from trt_lower.values.versions import own_version

FORMAT = "trt_lower artifact"
# 2: the input guard's size conditions (runtime/conditions.py). 3: each engine's weights in a
# member of their own beside its graph (format 2 embedded them: at most 2 GB an engine).
FORMAT_VERSION = 3
OLDEST_FORMAT_VERSION = 1
WEIGHTS = "weights.safetensors"
GUARD = "_input_guard"
# The manifest's record of a weights="separate" artifact's weight file (separate_weights.py).
SEPARATE = "separate_weights"
# The most dims a tensor may have and the largest a dim may be (TensorRT's own limits are 8 dims
# and int32 sizes); the most size conditions and the longest.
MAX_RANK = 16
MAX_DIM = 2**31 - 1
MAX_CONDITIONS = 256
# The most optimization profiles an engine input may list.
MAX_PROFILES = 64
_DTYPE = re.compile(r"[a-z][a-z0-9_]*")

T = TypeVar("T")


class FieldError(TrtLowerError, ValueError):
    """A manifest field that does not hold what the schema says (the loader adds the file's name)."""


def need(value: Any, kind: type[T] | tuple[type, ...], where: str) -> T:
    """`value` if it is a `kind` (a bool is not an int here), else FieldError naming `where`."""
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        ok = False
    else:
        ok = isinstance(value, kind)
    if not ok:
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise FieldError(f"field '{where}' must be {names}, got {type(value).__name__} {_short(value)}")
    return cast(T, value)


def field(data: Any, key: str, kind: type[T] | tuple[type, ...], where: str) -> T:
    """data[key], which must be a `kind`; `where` names data's field."""
    at = f"{where}.{key}" if where else key
    if not isinstance(data, dict) or key not in data:
        raise FieldError(f"field '{at}' is missing")
    return need(data[key], kind, at)


def items(data: Any, key: str, where: str) -> Iterator[tuple[str, Any]]:
    """(field name, item) of the list data[key]."""
    at = f"{where}.{key}" if where else key
    for k, item in enumerate(field(data, key, list, where)):
        yield f"{at}[{k}]", item


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# -- header ----------------------------------------------------------------------------------------
def check_header(container: Container) -> None:
    """The manifest is a trt_lower artifact's of a format version this trt_lower reads."""
    manifest = container.manifest
    if manifest.get("format") != FORMAT:
        raise ArtifactError(f"{container.path} is not a trt_lower artifact (its manifest is not one)")
    version = manifest.get("format_version")
    if type(version) is not int or version < OLDEST_FORMAT_VERSION:
        raise container.error(
            f"field 'format_version' must be an int from {OLDEST_FORMAT_VERSION} to "
            f"{FORMAT_VERSION}, got {_short(version)}"
        )
    if version > FORMAT_VERSION:
        written = manifest.get("written_by")
        by = written.get("trt_lower", "?") if isinstance(written, dict) else "?"
        raise container.error(
            f"has artifact format version {version} (written by trt_lower {_short(by)}); this "
            f"trt_lower reads up to version {FORMAT_VERSION}: upgrade trt_lower"
        )


def members(manifest: dict[str, Any]) -> dict[str, str]:
    """Each member the manifest refers to, and the field that names it."""
    # A weights="separate" artifact's eager tensors are in its weight file (separate_weights.py).
    found = {} if SEPARATE in manifest else {WEIGHTS: "weights"}
    for where, entry in items(manifest, "engines", ""):
        found[field(entry, "onnx", str, where)] = f"{where}.onnx"
        if "onnx_data" in entry:
            found[field(entry, "onnx_data", str, where)] = f"{where}.onnx_data"
        for at, plan in items(entry, "plans", where):
            found[field(plan, "member", str, at)] = f"{at}.member"
    probe = manifest.get("probe")
    if isinstance(probe, dict) and "member" in probe:  # verify's probe (probe.py), unless it was left out
        found[field(probe, "member", str, "probe")] = "probe.member"
    return found


def check_members(container: Container) -> None:
    """The file holds exactly the members the manifest's fields name."""
    named = members(container.manifest)
    for name in container.sha256:
        if name not in named:
            raise container.error(f"member '{name}' is listed in 'sha256' but no field names it; refusing the file")
    for name, where in named.items():
        if name not in container.sha256:
            raise container.error(f"field '{where}' names member '{name}', which the file does not hold")


# -- signatures, settings, report ------------------------------------------------------------------
def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def dtype(value: Any, where: str) -> torch.dtype:
    name = need(value, str, where)
    found = getattr(torch, name, None) if _DTYPE.fullmatch(name) else None
    if not isinstance(found, torch.dtype):
        raise FieldError(f"field '{where}': unknown dtype {_short(name)}")
    return found


def _shape(value: Any, where: str) -> tuple[int, ...]:
    dims = need(value, list, where)
    if len(dims) > MAX_RANK:
        raise FieldError(f"field '{where}' has {len(dims)} dims; at most {MAX_RANK}")
    for k, d in enumerate(dims):
        if need(d, int, f"{where}[{k}]") < 0 or d > MAX_DIM:
            raise FieldError(f"field '{where}[{k}]' must be from 0 to {MAX_DIM}, got {d}")
    return tuple(dims)


def _range_to_json(shapes: ShapeRange) -> dict[str, Any]:
    return {"min": list(shapes[0]), "opt": list(shapes[1]), "max": list(shapes[2])}


def sig_to_json(sig: TensorSig) -> dict[str, Any]:
    data = {
        "name": sig.name,
        "source": sig.source,
        "dtype": dtype_name(sig.dtype),
        **_range_to_json((sig.min_shape, sig.opt_shape, sig.max_shape)),
    }
    if sig.profiles:  # an engine of several optimization profiles (older artifacts have one)
        data["profiles"] = [_range_to_json(r) for r in sig.profiles]
    return data


def _range(data: Any, where: str) -> ShapeRange:
    low, opt, high = (_shape(field(data, k, list, where), f"{where}.{k}") for k in ("min", "opt", "max"))
    if not len(low) == len(opt) == len(high) or not all(a <= b <= c for a, b, c in zip(low, opt, high)):
        raise FieldError(f"field '{where}': min {list(low)} <= opt {list(opt)} <= max {list(high)} does not hold")
    return low, opt, high


def _profiles(data: Any, outer: ShapeRange, where: str) -> tuple[ShapeRange, ...]:
    """An input's range per optimization profile, each inside its overall range."""
    if "profiles" not in data:
        return ()
    if len(need(data["profiles"], list, f"{where}.profiles")) > MAX_PROFILES:
        raise FieldError(f"field '{where}.profiles' lists more than {MAX_PROFILES} profiles")
    ranges = tuple(_range(item, at) for at, item in items(data, "profiles", where))
    for k, (low, _, high) in enumerate(ranges):
        if len(low) != len(outer[0]) or not all(a <= b <= c <= d for a, b, c, d in zip(outer[0], low, high, outer[2])):
            raise FieldError(f"field '{where}.profiles[{k}]': {list(low)}..{list(high)} is outside the input's range")
    return ranges


def sig_from_json(data: Any, where: str) -> TensorSig:
    low, opt, high = _range(data, where)
    return TensorSig(
        field(data, "name", str, where),
        field(data, "source", str, where),
        dtype(field(data, "dtype", str, where), f"{where}.dtype"),
        low,
        opt,
        high,
        _profiles(data, (low, opt, high), where),
    )


def sigs(data: Any, key: str, where: str) -> tuple[TensorSig, ...]:
    """The signatures of data[key]; FieldError where its inputs disagree on how many optimization
    profiles their engine has."""
    found = tuple(sig_from_json(item, at) for at, item in items(data, key, where))
    if len({len(s.ranges) for s in found}) > 1:
        raise FieldError(f"field '{where}.{key}': its entries list different numbers of optimization profiles")
    return found


def report_from_json(data: dict[str, Any]) -> LoweringReport:
    """The report as saved (a description only: nothing is built from it). TypeError/KeyError on a
    malformed one, which the loader names."""
    engines = [
        EngineReport(
            **{
                **e,
                "input_shapes": [tuple(s) for s in e["input_shapes"]],
                "output_shapes": [tuple(s) for s in e["output_shapes"]],
            }
        )
        for e in data["engines"]
    ]
    graph = [GraphNode(**{**g, "inputs": tuple(tuple(e) for e in g["inputs"])}) for g in data.get("graph", [])]
    return LoweringReport(
        **{
            **data,
            "engines": engines,
            "fallbacks": [Fallback(**f) for f in data["fallbacks"]],
            "graph": graph,
            "repairs": [Repair(**r) for r in data.get("repairs", [])],
        }
    )


def versions() -> dict[str, str]:
    return {"trt_lower": own_version(), "torch": torch.__version__, "onnx": onnx.__version__}
