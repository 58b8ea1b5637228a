"""trt_lower.save / trt_lower.load: a LoweredModule as one file you ship, loaded without the
model's code and without running code from the file.

The file is a zip (stdlib zipfile) of:
  manifest.json              format version, the versions that wrote it, settings, report, the
                             stitched graph as data (deploy/graph.py), the input guard's
                             signatures, each engine's I/O signatures and its members, and a
                             SHA-256 per member
  weights.safetensors        the tensors the eager nodes use (get_attr targets)
  engines/<engine>.onnx      each engine's ONNX graph, its large weights declared as ONNX external
  engines/<engine>.onnx.data data in the member beside it (extracted side by side, the two are a
                             model onnx.load, ONNX Runtime and TensorRT's parser read), at offsets
                             that are multiples of 64 from a 64-byte aligned start in the file
  plans/<engine>/<tensorrt>_<device>.plan   serialized TensorRT engines, per TensorRT version and GPU
  probe.safetensors          example inputs and eager PyTorch's outputs for them, capped
                             (deploy/probe.py): what a load that builds engines again checks

Members are stored, not compressed, and written to the file as they are made; on load the
engines' weights are memory-mapped from it, not read into memory: an artifact may hold models of
any size (format 2 and older held each engine's ONNX self-contained, so at most 2 GB; they still
load). Nothing is unpickled: JSON, safetensors, ONNX protobuf and TensorRT plans only; a member
the manifest does not list, or whose checksum differs, is refused before anything is built.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import logging
import mmap
import operator
import os
import re
import struct
import time
import weakref
import zipfile
from dataclasses import asdict, dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any, BinaryIO, Iterator, cast

import numpy as np
import onnx
import safetensors.torch
import torch
from onnx import numpy_helper
from torch.fx.graph import _PyTreeCodeGen

from converters.core.dtypes import FLOAT_WEIGHTS
from converters.core.segment import ALIGNMENT, OnnxSegment, initializer, is_external
from trt_lower.deploy import graph as artifact_graph
from trt_lower.deploy import probe as artifact_probe
from trt_lower.values import device as devices
from trt_lower.build.engines import build, engine_is_whole_call
from trt_lower.values.segment import ConvertedSegment
from trt_lower.build.backend import check_target, resolve_backend
from trt_lower.build.cache import atomic_file
from trt_lower.stitch.lowered import LoweredModule
from trt_lower.report import EngineReport, Fallback, GraphNode, LoweringReport, Repair
from trt_lower.values.digest import Hashing
from trt_lower.values.signature import TensorSig
from trt_lower.runtime.guard import InputGuard
from trt_lower.values.settings import BACKENDS, LoweringSettings

log = logging.getLogger("trt_lower")

FORMAT = "trt_lower artifact"
# 2: the input guard's size conditions (runtime/conditions.py). 3: each engine's weights in a
# member of their own beside its graph (format 2 embedded them: at most 2 GB an engine).
FORMAT_VERSION = 3
MANIFEST = "manifest.json"
WEIGHTS = "weights.safetensors"
GUARD = "_input_guard"

PathLike = str | os.PathLike[str]


class ArtifactError(ValueError):
    """A file that is not a loadable trt_lower artifact, or a module that cannot be saved as one."""


@dataclass(frozen=True)
class Plan:
    """A serialized TensorRT engine and what it runs on."""

    tensorrt: str
    device: str
    data: bytes

    @property
    def key(self) -> tuple[str, str]:
        return self.tensorrt, self.device


@dataclass
class _Loaded:
    """What a loaded module keeps of its file beyond the module itself: the settings, the input
    dims with their shape symbols, and the plans for GPUs/TensorRT versions other than this
    one's, so that saving it again keeps them (a file gathers plans for several GPUs by being
    loaded and saved on each)."""

    settings: dict[str, Any]
    input_dims: list[list[int | str]]
    plans: dict[str, list[Plan]]


_loaded: weakref.WeakKeyDictionary[torch.nn.Module, _Loaded] = weakref.WeakKeyDictionary()


# -- signatures, settings, report as JSON --------------------------------------------------------
def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _dtype(name: str) -> torch.dtype:
    found = getattr(torch, name, None) if re.fullmatch(r"[a-z0-9_]+", name) else None
    if not isinstance(found, torch.dtype):
        raise ArtifactError(f"unknown dtype {name!r}")
    return found


def _sig_to_json(sig: TensorSig) -> dict[str, Any]:
    return {"name": sig.name, "source": sig.source, "dtype": _dtype_name(sig.dtype),
            "min": list(sig.min_shape), "opt": list(sig.opt_shape), "max": list(sig.max_shape)}


def _sig_from_json(data: dict[str, Any]) -> TensorSig:
    shapes = (tuple(int(d) for d in data[k]) for k in ("min", "opt", "max"))
    return TensorSig(str(data["name"]), str(data["source"]), _dtype(data["dtype"]), *shapes)


def _settings_to_json(lowered: torch.fx.GraphModule, report: LoweringReport) -> dict[str, Any]:
    """The settings loading needs, read off the module (split and conversion are done; the
    report names the fallbacks). A machine's cache_dir is not kept."""
    return {"precision": report.precision, "trt_version": report.trt_version, "backend": report.backend,
            "cuda_graphs": any(getattr(m, "cuda_graphs", False) for _, m in _engines(lowered))}


def _settings_from_json(data: dict[str, Any], cache_dir: PathLike | None) -> LoweringSettings:
    known = {k: v for k, v in data.items() if k in LoweringSettings.__dataclass_fields__}
    return LoweringSettings(**known, cache_dir=None if cache_dir is None else Path(cache_dir).expanduser())


def report_from_json(data: dict[str, Any]) -> LoweringReport:
    engines = [EngineReport(**{**e, "input_shapes": [tuple(s) for s in e["input_shapes"]],
                               "output_shapes": [tuple(s) for s in e["output_shapes"]]}) for e in data["engines"]]
    graph = [GraphNode(**{**g, "inputs": tuple(tuple(e) for e in g["inputs"])}) for g in data.get("graph", [])]
    return LoweringReport(**{**data, "engines": engines, "fallbacks": [Fallback(**f) for f in data["fallbacks"]],
                             "graph": graph, "repairs": [Repair(**r) for r in data.get("repairs", [])]})


def _versions() -> dict[str, str]:
    try:
        own = metadata.version("trt_lower")
    except metadata.PackageNotFoundError:
        own = "unknown"
    return {"trt_lower": own, "torch": torch.__version__, "onnx": onnx.__version__}


# -- save ------------------------------------------------------------------------------------------
def _engines(lowered: torch.fx.GraphModule) -> Iterator[tuple[str, torch.nn.Module]]:
    """The engine modules: what the graph calls, besides the input guard."""
    for node in lowered.graph.find_nodes(op="call_module"):
        if node.target != GUARD:
            yield str(node.target), lowered.get_submodule(str(node.target))


def _plans(name: str, module: torch.nn.Module, carried: dict[str, list[Plan]]) -> list[Plan]:
    plans = {p.key: p for p in carried.get(name, [])}
    plan = getattr(module, "plan", None)
    if isinstance(plan, bytes):
        import tensorrt as trt

        own = Plan(trt.__version__, devices.current().identity(), plan)
        plans[own.key] = own
    return list(plans.values())


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-")


def _input_dims(lowered: torch.fx.GraphModule, guard: InputGuard) -> list[list[int | str]]:
    """Each model input's dims: an int, or the shape symbol ("s0") dims that vary together share."""
    placeholders = [n for n in lowered.graph.nodes if n.op == "placeholder"]
    dims: list[list[int | str]] = []
    for sig, node in zip(guard.inputs, placeholders):
        val = node.meta.get("val")
        shape = val.shape if isinstance(val, torch.Tensor) else sig.shape
        dims.append([d if isinstance(d, int) else str(d) for d in shape])
    return dims


class _Writer:
    """Members written into the zip as they are made, each one's SHA-256 taken on the way."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        self.zip = zipfile.ZipFile(file, "w", zipfile.ZIP_STORED, allowZip64=True)
        self.sha256: dict[str, str] = {}

    def add(self, name: str, data: bytes) -> None:
        self.zip.writestr(name, data)
        self.sha256[name] = hashlib.sha256(data).hexdigest()

    def add_weights(self, name: str, segment: OnnxSegment) -> int:
        """`segment`'s external weights as member `name`, its data starting at a multiple of
        ALIGNMENT in the file (so that load maps them in place, aligned); returns the padding
        before the first weight, which the graph's offsets count."""
        with self.zip.open(zipfile.ZipInfo(name), "w", force_zip64=True) as member:
            writer = Hashing(member)
            pad = -self.file.tell() % ALIGNMENT  # the member's data starts where the file is now
            writer.write(bytes(pad))
            segment.write_weights(writer)
        self.sha256[name] = writer.hexdigest()
        return pad


def _write_members(lowered: LoweredModule, out: _Writer) -> dict[str, Any]:
    """Write every member but the manifest; return the manifest (without checksums)."""
    guard = getattr(lowered, GUARD, None)
    if not isinstance(guard, InputGuard):
        raise ArtifactError("this LoweredModule has no input guard; save the module lower_to_trt returns")
    loaded = _loaded.get(lowered)
    carried = loaded.plans if loaded else {}
    segments = getattr(lowered, "segments", None)
    engines = []
    for name, module in _engines(lowered):
        segment = segments.get(name) if isinstance(segments, dict) else None
        if not isinstance(segment, ConvertedSegment):
            raise ArtifactError(f"engine '{name}' has no converted segment on the module; save the module "
                                "lower_to_trt or trt_lower.load returns")
        graph, data = f"engines/{name}.onnx", f"engines/{name}.onnx.data"
        pad = out.add_weights(data, segment.onnx)
        out.add(graph, segment.onnx.graph_bytes(f"{name}.onnx.data", start=pad))
        plans = []
        for plan in _plans(name, module, carried):
            member = f"plans/{name}/{_slug(plan.tensorrt)}_{_slug(plan.device)}.plan"
            out.add(member, plan.data)
            plans.append({"tensorrt": plan.tensorrt, "device": plan.device, "member": member})
        engines.append({"name": name, "onnx": graph, "onnx_data": data, "plans": plans,
                        "tuple_output": segment.tuple_output,
                        "inputs": [_sig_to_json(s) for s in segment.inputs],
                        "outputs": [_sig_to_json(s) for s in segment.outputs],
                        "nodes": list(segment.nodes), "notes": list(segment.notes)})
    weights = {}
    for node in lowered.graph.find_nodes(op="get_attr"):
        value = operator.attrgetter(node.target)(lowered)
        if not isinstance(value, torch.Tensor):
            raise ArtifactError(f"node '{node.name}' reads {node.target}, a {type(value).__name__}; "
                                "an artifact holds tensors only")
        weights[node.target] = value.detach().contiguous().clone()  # safetensors refuses shared storage
    out.add(WEIGHTS, safetensors.torch.save(weights))
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "written_by": _versions(),
        "settings": loaded.settings if loaded else _settings_to_json(lowered, lowered.report),
        "report": asdict(lowered.report),
        "graph": artifact_graph.graph_to_json(lowered.graph),
        "inputs": [_sig_to_json(s) for s in guard.inputs],
        "conditions": list(guard.conditions.texts) if guard.conditions else [],
        "input_dims": loaded.input_dims if loaded else _input_dims(lowered, guard),
        "engines": engines,
        **({"extra": lowered.extra} if lowered.extra is not None else {}),
        "probe": artifact_probe.write(lowered, out.add),  # verify hook: deploy/probe.py
    }


def save(lowered: LoweredModule | Any, path: PathLike) -> None:
    """Write `lowered` (a LoweredModule, or a use built on one such as trt_lower.llm's
    LoweredCausalLM: its `lowered_module`) to one file at `path`, atomically: a temporary file in
    the same directory, renamed over `path` once complete. TensorRT engines carry their plans for
    this TensorRT version and GPU, plus any the module was loaded with for others. Members are
    written as they are made: saving holds no copy of the engines' weights."""
    lowered = getattr(lowered, "lowered_module", lowered)
    if not isinstance(lowered, LoweredModule):
        raise ArtifactError(f"trt_lower.save takes the LoweredModule lower_to_trt returns, got {type(lowered).__name__}")
    with atomic_file(Path(path)) as file:
        out = _Writer(file)
        try:
            manifest = _write_members(lowered, out)
        except artifact_graph.GraphFormatError as e:
            raise ArtifactError(f"cannot save this module: {e}") from None
        manifest["sha256"] = out.sha256
        with out.zip:
            out.zip.writestr(MANIFEST, json.dumps(manifest, indent=1, allow_nan=False))


# -- load ------------------------------------------------------------------------------------------
@dataclass
class _Archive:
    """A verified artifact: its manifest, and its members read (or memory-mapped) on demand."""

    path: Path
    manifest: dict[str, Any]
    infos: dict[str, zipfile.ZipInfo] = field(default_factory=dict)

    def member(self, name: str) -> bytes:
        if name not in self.infos:
            raise ArtifactError(f"{self.path}: the manifest names member '{name}', which the file does not hold")
        with zipfile.ZipFile(self.path) as z:
            return z.read(self.infos[name])

    def mapped(self, name: str) -> memoryview:
        """A stored member's bytes, memory-mapped from the file (read-only), not read."""
        if name not in self.infos:
            raise ArtifactError(f"{self.path}: the manifest names member '{name}', which the file does not hold")
        info = self.infos[name]
        if info.compress_type != zipfile.ZIP_STORED:
            raise ArtifactError(f"{self.path}: member '{name}' is compressed; trt_lower stores its weights")
        with open(self.path, "rb") as file:
            file.seek(info.header_offset)
            header = file.read(30)  # the local file header: names and extra field lengths at its end
            if header[:4] != b"PK\x03\x04":
                raise ArtifactError(f"{self.path}: member '{name}' has no local header (the file is corrupted)")
            name_length, extra_length = struct.unpack("<HH", header[26:30])
            start = info.header_offset + 30 + name_length + extra_length
            if info.file_size == 0:
                return memoryview(b"")
            mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        if start + info.file_size > len(mapped):
            raise ArtifactError(f"{self.path}: member '{name}' runs past the end of the file (truncated?)")
        return memoryview(mapped)[start:start + info.file_size]


def read(path: PathLike) -> _Archive:
    """Open and verify the artifact at `path` (also what `trt-lower info` shows): the manifest, and
    every member's checksum, read in chunks."""
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"trt_lower.load: no such file: {file}")
    try:
        with zipfile.ZipFile(file) as archive:
            infos = {info.filename: info for info in archive.infolist()}
            if MANIFEST not in infos:
                raise ArtifactError(f"{file} is not a trt_lower artifact (it has no {MANIFEST})")
            manifest = json.loads(archive.read(MANIFEST))
            _check_manifest(file, manifest)
            listed = manifest["sha256"]
            for name in infos:
                if name != MANIFEST and name not in listed:
                    raise ArtifactError(f"{file}: member '{name}' is not listed in the manifest; refusing the file")
            for name, digest in listed.items():
                if name not in infos:
                    raise ArtifactError(f"{file}: member '{name}' is missing (truncated file?)")
                if _sha256(archive, infos[name]) != digest:
                    raise ArtifactError(f"{file}: checksum mismatch in member '{name}' (the file is corrupted)")
    except zipfile.BadZipFile as e:
        raise ArtifactError(f"{file} is not a trt_lower artifact, or is truncated or corrupted ({e})") from None
    except (ValueError, KeyError, EOFError) as e:
        if isinstance(e, ArtifactError):
            raise
        raise ArtifactError(f"{file} is truncated or corrupted ({type(e).__name__}: {e})") from None
    return _Archive(file, manifest, {name: info for name, info in infos.items() if name != MANIFEST})


def _sha256(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> str:
    digest = hashlib.sha256()
    with archive.open(info) as member:
        while chunk := member.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()


def _check_manifest(file: Path, manifest: Any) -> None:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArtifactError(f"{file} is not a trt_lower artifact (its {MANIFEST} is not one)")
    version = manifest.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        written = manifest.get("written_by", {}).get("trt_lower", "?")
        raise ArtifactError(f"{file} has artifact format version {version} (written by trt_lower {written}); "
                            f"this trt_lower reads up to version {FORMAT_VERSION}: upgrade trt_lower")
    if not isinstance(manifest.get("sha256"), dict):
        raise ArtifactError(f"{file}: the manifest has no checksums")


def _onnx_segment(data: bytes) -> OnnxSegment:
    """An engine's self-contained ONNX (format 2 and older) as lowering held it: large float
    initializers kept apart as arrays."""
    model = onnx.load_from_string(data)  # protobuf: data only
    segment = OnnxSegment(model)
    for tensor in model.graph.initializer:
        if not is_external(tensor):
            declared = initializer(tensor.name, numpy_helper.to_array(tensor), segment.weights)
            if tensor.name in segment.weights:
                tensor.CopyFrom(declared)
    return segment


def _mapped_segment(graph: bytes, weights: memoryview) -> OnnxSegment:
    """An engine's graph and its weights member (format 3): each external initializer a read-only
    array over the memory-mapped file, declared as lowering declares it."""
    model = onnx.load_from_string(graph)
    segment = OnnxSegment(model)
    for tensor in model.graph.initializer:
        if not is_external(tensor):
            continue
        where = {entry.key: entry.value for entry in tensor.external_data}
        dtype = next(d for d, t in FLOAT_WEIGHTS.items() if t == tensor.data_type)
        offset, length = int(where.get("offset", 0)), int(where["length"])
        count = int(np.prod(tensor.dims, dtype=np.int64))
        if offset + length > len(weights) or length != count * np.dtype(dtype).itemsize:
            raise ArtifactError(f"initializer '{tensor.name}' lies outside its weights member")
        array = np.frombuffer(weights, dtype=dtype, count=count, offset=offset).reshape(tuple(tensor.dims))
        tensor.CopyFrom(initializer(tensor.name, array, segment.weights))
    return segment


def _resolve_backend(backend: str, trt_version: str) -> str:
    resolved = resolve_backend(backend)
    if resolved == "tensorrt":
        try:
            check_target(trt_version)
        except ValueError as e:
            if backend == "tensorrt":
                raise
            log.warning("trt_lower: %s; running engines on ONNX Runtime", e)
            return "onnxruntime"
    return resolved


def _segments(archive: _Archive) -> list[ConvertedSegment]:
    segments = []
    for entry in archive.manifest["engines"]:
        try:
            if "onnx_data" in entry:
                onnx_segment = _mapped_segment(archive.member(entry["onnx"]), archive.mapped(entry["onnx_data"]))
            else:
                onnx_segment = _onnx_segment(archive.member(entry["onnx"]))
        except ArtifactError:
            raise
        except Exception as e:  # protobuf's DecodeError and friends
            raise ArtifactError(f"{archive.path}: member '{entry['onnx']}' is not an ONNX model ({e})") from None
        segments.append(ConvertedSegment(
            str(entry["name"]), onnx_segment, tuple(_sig_from_json(s) for s in entry["inputs"]),
            tuple(_sig_from_json(s) for s in entry["outputs"]), bool(entry["tuple_output"]),
            tuple(str(n) for n in entry["nodes"]), tuple(str(n) for n in entry["notes"])))
    return segments


def _engine_modules(archive: _Archive, segments: list[ConvertedSegment], backend: str, settings: LoweringSettings,
                    alone: bool) -> tuple[dict[str, torch.nn.Module], dict[str, bool | None], dict[str, list[Plan]]]:
    """Each engine's module: from the file's plan where one fits this TensorRT and GPU, else made
    as lowering makes it (build.build: through the engine cache on TensorRT). Also whether it came
    from a plan or the cache, and the file's plans for other TensorRT versions and GPUs."""
    here: tuple[str, str] | None = None
    if backend == "tensorrt":
        import tensorrt as trt

        here = (trt.__version__, devices.current().identity())
    modules: dict[str, torch.nn.Module] = {}
    hits: dict[str, bool | None] = {}
    carried: dict[str, list[Plan]] = {}
    rebuilt: list[str] = []
    unbuilt = []
    for segment, entry in zip(segments, archive.manifest["engines"]):
        name = segment.name
        plans = [Plan(p["tensorrt"], p["device"], archive.member(p["member"])) for p in entry["plans"]]
        carried[name] = [p for p in plans if p.key != here]
        fitting = next((p for p in plans if p.key == here), None)
        if fitting is not None:
            from trt_lower.runtime.trt_module import PlanLoadError, TRTEngineModule

            try:
                modules[name] = TRTEngineModule(name, fitting.data, segment.inputs, segment.outputs,
                                                segment.tuple_output, cuda_graphs=settings.cuda_graphs)
                hits[name] = True
                continue
            except PlanLoadError as e:
                rebuilt.append(f"{name} (its plan does not load: {e})")
        elif here is not None:
            rebuilt.append(name)
        unbuilt.append(segment)
    for engine in build(unbuilt, backend, settings, alone=alone):
        modules[engine.segment.name], hits[engine.segment.name] = engine.module, engine.cache_hit
    if rebuilt and here is not None:
        others = sorted({f"TensorRT {p.tensorrt} on {p.device}" for ps in carried.values() for p in ps})
        log.warning("trt_lower: %s has no TensorRT plan for TensorRT %s on %s (it has: %s); built %s from its ONNX "
                    "(through the engine cache)", archive.path, here[0], here[1], ", ".join(others) or "none",
                    ", ".join(rebuilt))
    return modules, hits, carried


@contextlib.contextmanager
def _malformed(archive: _Archive) -> Iterator[None]:
    """ArtifactError naming the file for what does not parse in its manifest."""
    try:
        yield
    except ArtifactError:
        raise
    except artifact_graph.GraphFormatError as e:
        raise ArtifactError(f"{archive.path}: {e}") from None
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise ArtifactError(f"{archive.path}: malformed manifest ({type(e).__name__}: {e})") from None


def load(path: PathLike, *, backend: str = "auto", cache_dir: PathLike | None = None) -> Any:
    """The LoweredModule saved at `path`, callable as the original (same inputs, output structure
    and dtypes); for a use built on one (a LoweredCausalLM), that use, made again from it. backend: "auto" (TensorRT when usable, else ONNX Runtime with one warning),
    "tensorrt" or "onnxruntime". cache_dir: the TensorRT engine cache for engines that must be
    built here (no plan in the file for this TensorRT version and GPU)."""
    start = time.perf_counter()
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    archive = read(path)
    manifest = archive.manifest
    # Everything the file says is parsed and checked before any engine is made.
    with _malformed(archive):
        saved = _settings_from_json(manifest["settings"], cache_dir)
        report = report_from_json(manifest["report"])
    resolved = _resolve_backend(backend, saved.trt_version)
    # The eager nodes run where the engines do (weights and CUDA device arguments included).
    where = devices.current().torch_device() if resolved == "tensorrt" else torch.device("cpu")
    with _malformed(archive):
        try:
            weights = {k: v.to(where) for k, v in safetensors.torch.load(archive.member(WEIGHTS)).items()}
        except Exception as e:  # safetensors raises its own error types on a foreign payload
            raise ArtifactError(f"{archive.path}: member '{WEIGHTS}' is not a safetensors file ({e})") from None
        segments = _segments(archive)
        guard = InputGuard(tuple(_sig_from_json(s) for s in manifest["inputs"]), manifest.get("conditions", []))
        graph = artifact_graph.graph_from_json(manifest["graph"], {*(s.name for s in segments), GUARD},
                                               set(weights), where)
        # verify hook (deploy/probe.py): artifacts older than the probe have none
        probe = artifact_probe.read(manifest["probe"], archive.member, where) if "probe" in manifest else None
    settings = replace(saved, backend=resolved)
    modules, hits, carried = _engine_modules(archive, segments, resolved, settings,
                                             alone=engine_is_whole_call(len(segments), len(report.fallbacks)))
    report.backend = resolved
    report.engines = [replace(e, backend=resolved, cache_hit=hits.get(e.name)) for e in report.engines]
    report.timings = {"load": time.perf_counter() - start}
    # GraphModule also takes its root as a dict of its call_module and get_attr targets.
    root = cast(torch.nn.Module, {**modules, **weights, GUARD: guard})
    lowered = LoweredModule(root, graph, report)
    lowered.segments = {segment.name: segment for segment in segments}
    codegen = graph._codegen
    if isinstance(codegen, _PyTreeCodeGen):
        lowered._in_spec = codegen.pytree_info.in_spec
        lowered._out_spec = codegen.pytree_info.out_spec
    _loaded[lowered] = _Loaded(manifest["settings"], manifest["input_dims"], carried)
    lowered.extra = manifest.get("extra")
    lowered.probe = probe  # verify hook: engines built again here are checked against the probe
    artifact_probe.verify_rebuilt(lowered, probe, artifact_probe.rebuilt(manifest, carried, resolved), archive.path)
    kind = lowered.extra.get("kind") if isinstance(lowered.extra, dict) else None
    if kind is None:
        return lowered
    if kind not in _USES:  # a name from the file: only the uses trt_lower has are imported
        raise ArtifactError(f"{archive.path}: the module is for '{kind}', which this trt_lower does not know "
                            f"(it knows {sorted(_USES)})")
    module, _, name = _USES[kind].rpartition(".")
    return getattr(importlib.import_module(module), name).from_lowered(lowered)


# The uses whose artifacts load as themselves, by the `kind` their `extra` names: imported by name,
# as they rank above deploy/.
_USES = {"causal_lm": "trt_lower.llm.generation.LoweredCausalLM"}
