"""trt_lower.save / trt_lower.load: a LoweredModule as one file you ship, loaded without the
model's code and without running code from the file.

The file is a zip (container.py) of:
  manifest.json              format version, the versions that wrote it, settings, report, the
                             stitched graph as data (graph_json.py), the input guard's signatures,
                             each engine's I/O signatures and its members, and a SHA-256 per
                             member (its schema: manifest.py)
  weights.safetensors        the tensors the eager nodes use (get_attr targets)
  engines/<engine>.onnx      each engine's ONNX graph, its large weights declared as ONNX external
  engines/<engine>.onnx.data data in the member beside it (extracted side by side, the two are a
                             model onnx.load, ONNX Runtime and TensorRT's parser read), at offsets
                             that are multiples of 64 from a 64-byte aligned start in the file
  plans/<engine>/<tensorrt>_<device>.plan   serialized TensorRT engines, per TensorRT version and GPU
  probe.safetensors          example inputs and eager PyTorch's outputs for them, capped
                             (deploy/probe.py): what a load that builds engines again checks

Members are stored, not compressed, and written to the file as they are made. The file is
untrusted input on load: every member is checked against its checksum as it is read into memory
this process owns, every field against the manifest's schema, every name FX writes into code
against an identifier's grammar (the tensors' dotted names: tensor_names.py), every operator against an allowlist (operators.py), every
engine's ONNX against its signatures (onnx_members.py), before anything is built; a file that
breaks a rule is refused with an ArtifactError naming it and the field. Nothing is unpickled:
JSON, safetensors, ONNX protobuf and TensorRT plans only. (Format 2 and older held each engine's
ONNX self-contained, so at most 2 GB; they still load.)
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import operator
import os
import re
import time
import weakref
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Iterator, Mapping, cast

import safetensors.torch
import torch
from torch.fx.graph import _PyTreeCodeGen

from converters.core.user import user_ops
from trt_lower import lowering_options
from trt_lower.deploy import (
    allocations,
    graph_json,
    onnx_members,
    ranks,
    separate_weights,
    signed_weights,
    signing,
    tensor_names,
)
from trt_lower.deploy import manifest as schema
from trt_lower.deploy import probe as artifact_probe
from trt_lower.deploy.container import MANIFEST, ArtifactError, Container, Writer, open_container, open_file
from trt_lower.deploy.manifest import FORMAT, FORMAT_VERSION, GUARD, SEPARATE, WEIGHTS, FieldError, report_from_json
from trt_lower.deploy.separate_weights import Separated, WeightFileError, eager_weights, weights_path
from trt_lower.engine.backend import check_target, resolve_backend
from trt_lower.engine.engines import build, engine_is_whole_call
from trt_lower.profile import sources as node_sources
from trt_lower.report import LoweringReport
from trt_lower.runtime.guard import InputGuard
from trt_lower.stitch.lowered import LoweredModule
from trt_lower.values import device as devices
from trt_lower.values.atomic_file import atomic_file
from trt_lower.values.collectives import COLLECTIVES
from trt_lower.values.segment import ConvertedSegment
from trt_lower.values.settings import BACKENDS, LoweringSettings
from trt_lower.values.signature import EngineInputError

__all__ = [
    "ArtifactError",
    "FORMAT",
    "FORMAT_VERSION",
    "GUARD",
    "MANIFEST",
    "WEIGHTS",
    "load",
    "read",
    "report_from_json",
    "save",
]

log = logging.getLogger("trt_lower")

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class Plan:
    """A serialized TensorRT engine and what it runs on."""

    tensorrt: str
    device: str
    data: bytes
    # Serialized without its weights (weights="separate"): refitted from the weight file on load.
    stripped: bool = False

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


# -- save ------------------------------------------------------------------------------------------
def _settings_to_json(lowered: torch.fx.GraphModule, report: LoweringReport) -> dict[str, Any]:
    """The settings loading needs, read off the module (split and conversion are done; the
    report names the fallbacks). A machine's cache_dir is not kept."""
    lowering = getattr(lowered, "lowering", None)  # engines built on load are refittable as lowered (docs/refit.md)
    return {
        "precision": report.precision,
        "trt_version": report.trt_version,
        "backend": report.backend,
        "cuda_graphs": any(getattr(m, "cuda_graphs", False) for _, m in _engines(lowered)),
        "refittable": bool(getattr(getattr(lowering, "settings", None), "refittable", False)),
        # Engines built on load stream as lowered (a stored plan streams as it was built).
        "weight_streaming": bool(getattr(getattr(lowering, "settings", None), "weight_streaming", False)),
        "collectives": str(getattr(getattr(lowering, "settings", None), "collectives", "eager")),
        **_builder_knobs_to_json(getattr(lowering, "settings", None)),
    }


def _builder_knobs_to_json(settings: LoweringSettings | None) -> dict[str, Any]:
    """The builder knobs engines built on load are built with, as lowered (a machine's
    timing_cache file is not kept: the loading machine names its own)."""
    if settings is None:
        return {}
    sources = settings.tactic_sources
    return {
        "optimization_level": settings.optimization_level,
        "workspace_bytes": settings.workspace_bytes,
        "tactic_sources": None if sources is None else sorted(sources),
    }


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


def _stripped_plans(module: torch.nn.Module) -> list[Plan]:
    """weights="separate": a refittable TensorRT engine's plan without its weights (10.x and newer:
    SerializationFlag.EXCLUDE_WEIGHTS); none otherwise (built on load, then cached)."""
    if not isinstance(getattr(module, "plan", None), bytes):
        return []
    import tensorrt as trt

    from trt_lower.engine.trt_refit import stripped_plan

    data = stripped_plan(module)
    return [] if data is None else [Plan(trt.__version__, devices.current().identity(), data, stripped=True)]


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


def _write_members(lowered: LoweredModule, out: Writer, separate: Separated | None = None) -> dict[str, Any]:
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
            raise ArtifactError(
                f"engine '{name}' has no converted segment on the module; save the module "
                "lower_to_trt or trt_lower.load returns"
            )
        graph, data = f"engines/{name}.onnx", f"engines/{name}.onnx.data"
        if separate is not None:  # weights="separate": the graph alone (deploy/separate_weights.py)
            out.add(graph, separate.strip(name, segment.onnx))
        else:
            pad = out.add_aligned(data, segment.onnx.write_weights)
            out.add(graph, segment.onnx.graph_bytes(f"{name}.onnx.data", start=pad))
        plans = []
        for plan in _plans(name, module, carried) if separate is None else _stripped_plans(module):
            member = f"plans/{name}/{_slug(plan.tensorrt)}_{_slug(plan.device)}.plan"
            out.add(member, plan.data)
            plans.append(
                {
                    "tensorrt": plan.tensorrt,
                    "device": plan.device,
                    "member": member,
                    **({"stripped": True} if plan.stripped else {}),
                }
            )
        engines.append(
            {
                "name": name,
                "onnx": graph,
                **({"onnx_data": data} if separate is None else {}),
                "plans": plans,
                "tuple_output": segment.tuple_output,
                "inputs": [schema.sig_to_json(s) for s in segment.inputs],
                "outputs": [schema.sig_to_json(s) for s in segment.outputs],
                "nodes": list(segment.nodes),
                "notes": list(segment.notes),
            }
        )
    weights = {}
    for node in lowered.graph.find_nodes(op="get_attr"):
        value = operator.attrgetter(node.target)(lowered)
        if not isinstance(value, torch.Tensor):
            raise ArtifactError(
                f"node '{node.name}' reads {node.target}, a {type(value).__name__}; an artifact holds tensors only"
            )
        weights[node.target] = value.detach().contiguous().clone()  # safetensors refuses shared storage
    if separate is None:
        out.add(WEIGHTS, safetensors.torch.save(weights))
    else:  # weights="separate" (deploy/separate_weights.py)
        for target, tensor in weights.items():
            separate.eager(target, tensor)
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "written_by": schema.versions(),
        "settings": loaded.settings if loaded else _settings_to_json(lowered, lowered.report),
        "report": asdict(lowered.report),
        "graph": graph_json.graph_to_json(lowered.graph),
        "inputs": [schema.sig_to_json(s) for s in guard.inputs],
        "conditions": list(guard.conditions.texts) if guard.conditions else [],
        "input_dims": loaded.input_dims if loaded else _input_dims(lowered, guard),
        "engines": engines,
        "user_converters": user_ops(op for engine in lowered.report.engines for op in engine.ops),
        **({"extra": lowered.extra} if lowered.extra is not None else {}),
        "probe": artifact_probe.write(lowered, out.add),  # verify hook: deploy/probe.py
        # Where each FX node came from, for profiling without the model's code (profile/sources.py).
        "sources": node_sources.to_json(node_sources.sources_of(lowered)),
    }


def save(
    lowered: LoweredModule | Any,
    path: PathLike,
    *,
    weights: str = "inside",
    sign_with: signing.PrivateKey | None = None,
) -> None:
    """Write `lowered` (a LoweredModule, or a use built on one such as trt_lower.llm's
    LoweredCausalLM: its `lowered_module`) to one file at `path`, atomically: a temporary file in
    the same directory, renamed over `path` once complete (a module loaded from `path` may be
    saved onto it: it holds no part of the old file). TensorRT engines carry their plans for
    this TensorRT version and GPU, plus any the module was loaded with for others. Members are
    written as they are made: saving holds no copy of the engines' weights.

    weights="separate": the file holds the graphs without their weights (and no TensorRT plans),
    the weights go to `<path stem>.safetensors` beside it; load(path, weights=...) takes that file
    or another one saved for the same architecture (deploy/separate_weights.py, docs/refit.md).
    sign_with: an Ed25519 private key (or the PEM file of one) to sign the file with
    (deploy/signing.py).

    A module whose graph calls torch.distributed's collectives is one rank's: the file records
    the rank, world size, backend and process group, and loads only on that rank of a job of the
    same size; `{rank}` in `path` is replaced by the rank (deploy/ranks.py, docs/distributed.md)."""
    path = ranks.expand(path)
    key = None if sign_with is None else signing.private_key(sign_with)  # a bad key fails first
    lowered = getattr(lowered, "lowered_module", lowered)
    if not isinstance(lowered, LoweredModule):
        raise ArtifactError(
            f"trt_lower.save takes the LoweredModule lower_to_trt returns, got {type(lowered).__name__}"
        )
    if weights not in ("inside", "separate"):
        raise ValueError(f"weights must be 'inside' or 'separate', got {weights!r}")
    separate = Separated.of(lowered) if weights == "separate" else None
    try:  # a name load would refuse, refused before anything is written
        tensor_names.check((str(n.target) for n in lowered.graph.find_nodes(op="get_attr")), "tensor name")
    except graph_json.GraphFormatError as e:
        raise ArtifactError(f"cannot save this module: {e}") from None
    # One rank's module (collectives in its graph or in its engines): refused outside its job, before writing.
    distributed = ranks.record(lowered.graph, any(e.collectives for e in lowered.report.engines))
    with atomic_file(Path(path), private=False) as file:
        out = Writer(file)
        try:
            manifest = _write_members(lowered, out, separate)
        except graph_json.GraphFormatError as e:
            raise ArtifactError(f"cannot save this module: {e}") from None
        if separate is not None:
            manifest[SEPARATE] = separate.record([out.zip.read(e["onnx"]) for e in manifest["engines"]])
            signed_weights.record(manifest[SEPARATE], separate.tensors)  # what a signature covers
            separate.write(weights_path(path), manifest[SEPARATE])
        if distributed is not None:
            manifest[ranks.DISTRIBUTED] = distributed
        out.close(manifest)
        if key is not None:  # the finished file signed before it is renamed into place
            signing.sign(file, key)


# -- load ------------------------------------------------------------------------------------------
def read(path: PathLike, file: BinaryIO | None = None) -> Container:
    """Open and verify the artifact at `path` (also what `trt-lower info` shows): its structure,
    its manifest's header and member list, and every member's checksum, read in chunks. `file`:
    the artifact already open (container.open_file), read from rather than `path`."""
    container = open_container(Path(path)) if file is None else Container(Path(path), file)
    schema.check_header(container)
    with _malformed(container):
        schema.check_members(container)
    container.verify()
    return container


@contextlib.contextmanager
def _malformed(container: Container) -> Iterator[None]:
    """ArtifactError naming the file for what does not parse in its manifest."""
    try:
        yield
    except ArtifactError:
        raise
    except (FieldError, graph_json.GraphFormatError) as e:
        raise container.error(str(e)) from None
    except (KeyError, TypeError, AttributeError, ValueError, IndexError, RecursionError, OverflowError) as e:
        raise container.error(f"malformed manifest ({type(e).__name__}: {str(e)[:300]})") from None


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


def _settings(data: Any, cache_dir: PathLike | None) -> LoweringSettings:
    known = {k: v for k, v in schema.need(data, dict, "settings").items() if k in LoweringSettings.__dataclass_fields__}
    for key in ("precision", "trt_version", "backend"):
        if key in known:
            schema.need(known[key], str, f"settings.{key}")
    known.pop("timing_cache", None)  # never written; a planted path is not followed
    for key, check in _BUILDER_KNOBS.items():
        if key in known:  # absent from artifacts written before the knobs: the builder's defaults
            try:
                known[key] = check(known[key])
            except ValueError as e:
                raise FieldError(f"field 'settings.{key}': {e}") from None
    if "weight_streaming" in known:
        schema.need(known["weight_streaming"], bool, "settings.weight_streaming")
    if "collectives" in known and known["collectives"] not in COLLECTIVES:  # absent before the option: eager
        raise FieldError(f"field 'settings.collectives' must be one of {COLLECTIVES}, got {known['collectives']!r}")
    return LoweringSettings(**known, cache_dir=None if cache_dir is None else Path(cache_dir).expanduser())


# Each builder knob the manifest's settings may hold, and the check lower_to_trt makes of it.
_BUILDER_KNOBS: dict[str, Callable[[Any], Any]] = {
    "optimization_level": lowering_options.optimization_level_of,
    "workspace_bytes": lowering_options.workspace_of,
    "tactic_sources": lowering_options.tactic_sources_of,
}


def _weights(
    container: Container, where: torch.device, separate: dict[str, torch.Tensor] | None
) -> dict[str, torch.Tensor]:
    """The eager nodes' tensors (from the weight file given, for a weights="separate" artifact), by
    names that are attribute paths (FX writes them as code: tensor_names.py)."""
    source = f"member '{WEIGHTS}'" if separate is None else "the weight file"
    if separate is not None:
        weights = eager_weights(separate, where)
    else:
        try:
            weights = {k: v.to(where) for k, v in safetensors.torch.load(container.read(WEIGHTS)).items()}
        except ArtifactError:
            raise
        except Exception as e:  # safetensors raises its own error types on a foreign payload
            raise container.error(f"member '{WEIGHTS}' is not a safetensors file ({e})") from None
    tensor_names.check(weights, f"{source}: tensor name")
    return weights


def _segment(
    container: Container, entry: dict[str, Any], where: str, separate: dict[str, torch.Tensor] | None
) -> ConvertedSegment:
    name = graph_json.identifier(schema.field(entry, "name", str, where), f"{where}.name: engine name")
    inputs, outputs = schema.sigs(entry, "inputs", where), schema.sigs(entry, "outputs", where)
    graph = schema.field(entry, "onnx", str, where)
    try:
        if separate is not None:  # weights="separate": its weights from the file given
            onnx_segment = separate_weights.filled(name, container.read(graph), separate)
        elif "onnx_data" in entry:
            data = schema.field(entry, "onnx_data", str, where)
            onnx_segment = onnx_members.with_weights(
                container.read(graph), data.rpartition("/")[2], container.read_aligned(data)
            )
        else:
            onnx_segment = onnx_members.self_contained(container.read(graph))
        onnx_members.check_io(onnx_segment.model, inputs, outputs)
    except onnx_members.OnnxMemberError as e:
        raise container.error(f"member '{graph}' {e}") from None
    return ConvertedSegment(
        name,
        onnx_segment,
        inputs,
        outputs,
        schema.field(entry, "tuple_output", bool, where),
        tuple(schema.need(n, str, at) for at, n in schema.items(entry, "nodes", where)),
        tuple(schema.need(n, str, at) for at, n in schema.items(entry, "notes", where)),
    )


def _plans_of(container: Container, entry: dict[str, Any], where: str) -> list[Plan]:
    return [
        Plan(
            schema.field(p, "tensorrt", str, at),
            schema.field(p, "device", str, at),
            container.read(schema.field(p, "member", str, at)),
            p.get("stripped") is True,
        )
        for at, p in schema.items(entry, "plans", where)
    ]


def _guard(manifest: dict[str, Any]) -> InputGuard:
    """The input guard, its size conditions each evaluated once on the recorded (opt) shapes: a
    condition that does not hold there is not one the model was captured under."""
    inputs = schema.sigs(manifest, "inputs", "")
    texts = (
        [schema.need(t, str, at) for at, t in schema.items(manifest, "conditions", "")]
        if "conditions" in manifest
        else []
    )
    if len(texts) > schema.MAX_CONDITIONS:
        raise FieldError(f"field 'conditions' holds {len(texts)} size conditions; at most {schema.MAX_CONDITIONS}")
    try:
        guard = InputGuard(inputs, texts)
    except ValueError as e:
        raise FieldError(f"field 'conditions': {e}") from None
    if guard.conditions is not None:
        try:
            guard.conditions([torch.empty(s.opt_shape, device="meta") for s in inputs])
        except EngineInputError as e:
            raise FieldError(f"field 'conditions' does not hold on the inputs' recorded shapes ({e})") from None
    return guard


def _engine_modules(
    container: Container,
    segments: list[ConvertedSegment],
    plans: list[list[Plan]],
    backend: str,
    settings: LoweringSettings,
    alone: bool,
) -> tuple[dict[str, torch.nn.Module], dict[str, bool | None], dict[str, list[Plan]]]:
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
    for segment, its_plans in zip(segments, plans):
        name = segment.name
        carried[name] = [p for p in its_plans if p.key != here]
        fitting = next((p for p in its_plans if p.key == here), None)
        if fitting is not None:
            from trt_lower.engine.trt_refit import RefitError, refit
            from trt_lower.runtime.trt_module import PlanLoadError, TRTEngineModule

            try:
                module = TRTEngineModule(
                    name,
                    fitting.data,
                    segment.inputs,
                    segment.outputs,
                    segment.tuple_output,
                    cuda_graphs=settings.cuda_graphs,
                    collectives=bool(segment.collectives),
                )
                if fitting.stripped:  # weights="separate": the weights from the file given (docs/refit.md)
                    refit(module.engine, segment.onnx, name)
                    module.plan = bytes(module.engine.serialize())
                modules[name] = module
                hits[name] = True
                continue
            except (PlanLoadError, RefitError) as e:
                rebuilt.append(f"{name} (its plan does not load: {e})")
        elif here is not None:
            rebuilt.append(name)
        unbuilt.append(segment)
    for engine in build(unbuilt, backend, settings, alone=alone):
        modules[engine.segment.name], hits[engine.segment.name] = engine.module, engine.cache_hit
    if rebuilt and here is not None:
        others = sorted({f"TensorRT {p.tensorrt} on {p.device}" for ps in carried.values() for p in ps})
        log.warning(
            "trt_lower: %s has no TensorRT plan for TensorRT %s on %s (it has: %s); built %s from its ONNX "
            "(through the engine cache)",
            container.path,
            here[0],
            here[1],
            ", ".join(others) or "none",
            ", ".join(rebuilt),
        )
    return modules, hits, carried


def _check_user_converters(container: Container, names: Any) -> None:
    """The file's engines hold ops converted by converters a user registered (by name only: the
    code that defines an op and its converter is the user's, imported before load, as
    torch.library ops are)."""
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise FieldError("field 'user_converters' must be a list of op names")
    missing = sorted(set(names) - set(user_ops(names)))
    if missing:
        raise container.error(
            f"its engines hold {', '.join(m[:80] for m in missing[:8])}, converted by converter(s) "
            "registered with trt_lower.converter; import the code that registers them before "
            "trt_lower.load"
        )


def load(
    path: PathLike,
    *,
    backend: str = "auto",
    cache_dir: PathLike | None = None,
    weights: PathLike | Mapping[str, torch.Tensor] | None = None,
    trusted_keys: Iterable[signing.PublicKey] | signing.PublicKey | None = None,
    max_eager_allocation: int = allocations.DEFAULT_MAX_EAGER_ALLOCATION,
) -> Any:
    """The LoweredModule saved at `path`, callable as the original (same inputs, output structure
    and dtypes); for a use built on one (a LoweredCausalLM), that use, made again from it. backend: "auto" (TensorRT when usable, else ONNX Runtime with one warning),
    "tensorrt" or "onnxruntime". cache_dir: the TensorRT engine cache for engines that must be
    built here (no plan in the file for this TensorRT version and GPU). The module holds no part
    of the file: replacing or deleting the file afterwards changes nothing of it.

    weights: for a file saved with weights="separate", the weight file (or a state dict of its
    keys, or the model's own `state_dict()`) to run it with. trusted_keys: Ed25519 public keys (or
    their PEM files); when given, or when $TRT_LOWER_TRUSTED_KEYS lists some, a file not signed by
    one of them is refused, and so are weights other than those a weights="separate" file was
    signed with (deploy/signing.py). A file saved on one rank of a torch.distributed job loads on
    that rank of a job of the same size only (RankMismatchError otherwise); `{rank}` in `path` is
    replaced by this process's rank (docs/distributed.md). max_eager_allocation: the most bytes one
    call of an eager node may allocate from sizes computed at run time (EagerAllocationError
    otherwise, before it allocates; deploy/allocations.py; docs/security.md)."""
    _check_options(backend, max_eager_allocation)  # before the file is opened
    path = ranks.expand(path)
    # One open file: the signature is checked on it before anything else in it is parsed, and
    # everything loaded is read from it (a path replaced in between changes nothing).
    with open_file(Path(path)) as file:
        return load_file(
            file,
            path,
            backend=backend,
            cache_dir=cache_dir,
            weights=weights,
            trusted_keys=trusted_keys,
            max_eager_allocation=max_eager_allocation,
        )


def _check_options(backend: str, max_eager_allocation: int) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if type(max_eager_allocation) is not int or max_eager_allocation < 1:
        raise ValueError(f"max_eager_allocation must be a positive int of bytes, got {max_eager_allocation!r}")


def load_file(
    file: BinaryIO,
    path: PathLike,
    *,
    backend: str = "auto",
    cache_dir: PathLike | None = None,
    weights: PathLike | Mapping[str, torch.Tensor] | None = None,
    trusted_keys: Iterable[signing.PublicKey] | signing.PublicKey | None = None,
    max_eager_allocation: int = allocations.DEFAULT_MAX_EAGER_ALLOCATION,
    check: Callable[[Container], None] | None = None,
) -> Any:
    """`load` of the artifact open as `file` (container.open_file), read from there only; `path`
    names it in errors. `check`: called with the container once its signature is verified and its
    manifest parsed, before anything of it is loaded (a use's own refusals)."""
    start = time.perf_counter()
    _check_options(backend, max_eager_allocation)
    required = signing.trusted(trusted_keys)
    if (refused := signing.untrusted(file, path, required)) is not None:
        raise ArtifactError(refused)
    container = Container(Path(path), file)
    if check is not None:
        check(container)
    return _load(container, start, backend, cache_dir, weights, max_eager_allocation, signed=required is not None)


def _load(
    container: Container,
    start: float,
    backend: str,
    cache_dir: PathLike | None,
    weights: PathLike | Mapping[str, torch.Tensor] | None,
    max_eager_allocation: int,
    *,
    signed: bool,
) -> Any:
    """`load`'s module from the open `container`; `signed`: its signature was checked against trusted keys."""
    schema.check_header(container)
    manifest = container.manifest
    # Everything the file says is read, verified and checked before any engine is made.
    with _malformed(container):
        schema.check_members(container)
        saved = _settings(manifest.get("settings"), cache_dir)
        _check_user_converters(container, manifest.get("user_converters", []))
        report = report_from_json(manifest["report"])
        groups = ranks.check(manifest, container.path)
    resolved = _resolve_backend(backend, saved.trt_version)
    # The eager nodes run where the engines do (weights and CUDA device arguments included).
    where = devices.current().torch_device() if resolved == "tensorrt" else torch.device("cpu")
    separate = _separate_weights(container, weights, signed)
    with _malformed(container):
        eager = _weights(container, where, separate)
        entries = list(schema.items(manifest, "engines", ""))
        segments = [_segment(container, schema.need(entry, dict, at), at, separate) for at, entry in entries]
        called = [GUARD, *(s.name for s in segments)]
        clashes = {n for n in called if called.count(n) > 1} | set(called) & {w.split(".")[0] for w in eager}
        if clashes:  # each is an attribute of the module
            raise FieldError(
                f"field 'engines': the names {sorted(clashes)[:8]} are used twice (engine names differ "
                f"from each other, from '{GUARD}' and from the weights')"
            )
        plans = [_plans_of(container, entry, at) for at, entry in entries]
        guard = _guard(manifest)
        graph = graph_json.graph_from_json(manifest["graph"], {*(s.name for s in segments), GUARD}, set(eager), where)
        ranks.bind(graph, groups)
        input_dims = schema.need(manifest["input_dims"], list, "input_dims")
        extra = schema.need(manifest.get("extra", {}), dict, "extra") if manifest.get("extra") is not None else None
        # Artifacts older than the probe have none (deploy/probe.py).
        probe = artifact_probe.read(manifest["probe"], container.read, where) if "probe" in manifest else None
        sources = _sources(manifest)
        container.verify()  # members no field above reads
    settings = replace(saved, backend=resolved)
    modules, hits, carried = _engine_modules(
        container, segments, plans, resolved, settings, alone=engine_is_whole_call(len(segments), len(report.fallbacks))
    )
    # GraphModule also takes its root as a dict of its call_module and get_attr targets.
    root = cast(torch.nn.Module, {**modules, **eager, GUARD: guard})
    with _malformed(container):
        report.backend = resolved
        report.engines = [replace(e, backend=resolved, cache_hit=hits.get(e.name)) for e in report.engines]
        report.timings = {"load": time.perf_counter() - start}
        try:
            lowered = LoweredModule(root, graph, report)
        except (SyntaxError, RuntimeError) as e:  # names that are identifiers still may not make a valid forward
            raise FieldError(f"field 'graph' does not make a valid module ({type(e).__name__}: {e})") from None
    lowered.call_checks = allocations.checks(graph, max_eager_allocation)
    if lowered.call_checks:
        lowered.recompile()
    lowered.segments = {segment.name: segment for segment in segments}
    codegen = graph._codegen
    if isinstance(codegen, _PyTreeCodeGen):
        lowered._in_spec = codegen.pytree_info.in_spec
        lowered._out_spec = codegen.pytree_info.out_spec
    _loaded[lowered] = _Loaded(manifest["settings"], input_dims, carried)
    lowered.extra = extra
    lowered.probe = probe  # engines built again here are checked against the probe
    lowered.sources = sources
    artifact_probe.verify_rebuilt(lowered, probe, artifact_probe.rebuilt(manifest, carried, resolved), container.path)
    kind = extra.get("kind") if extra is not None else None
    if kind is None:
        return lowered
    if not isinstance(kind, str) or kind not in _USES:  # a name from the file: only the uses trt_lower has are imported
        raise container.error(
            f"the module is for '{str(kind)[:80]}', which this trt_lower does not know (it knows {sorted(_USES)})"
        )
    module, _, name = _USES[kind].rpartition(".")
    try:
        return getattr(importlib.import_module(module), name).from_lowered(lowered)
    except ValueError as e:  # the use checks what it reads of `extra`
        raise container.error(f"field 'extra': {e}") from None


def _sources(manifest: dict[str, Any]) -> dict[str, node_sources.NodeSource] | None:
    """The nodes' sources; None in a file written before they were stored (profiles name nodes only)."""
    if "sources" not in manifest:
        return None
    try:
        return node_sources.from_json(manifest["sources"])
    except ValueError as e:
        raise FieldError(f"field 'sources': {e}") from None


# The uses whose artifacts load as themselves, by the `kind` their `extra` names: imported by name,
# as they rank above deploy/.
_USES = {"causal_lm": "trt_lower.llm.generation.LoweredCausalLM"}


def _separate_weights(
    container: Container, weights: PathLike | Mapping[str, torch.Tensor] | None, signed: bool
) -> dict[str, torch.Tensor] | None:
    """The checked tensors of the weight file given for a weights="separate" artifact; None for
    one that holds its weights. ArtifactError where one is given without the other, and where
    the artifact is `signed` (checked against trusted keys) and they are not the weights it was
    signed with (signed_weights.py)."""
    record = container.manifest.get(SEPARATE)
    if record is None:
        if weights is not None:
            raise container.error(
                "holds its weights; weights=... is for a file saved with trt_lower.save(..., weights='separate')"
            )
        return None
    if weights is None:
        raise container.error(
            f"was saved with weights='separate': load it with weights= the weight file "
            f"({weights_path(container.path).name} was saved beside it)"
        )
    with _malformed(container):
        try:
            tensors = separate_weights.read(weights, schema.need(record, dict, SEPARATE), container.path)
        except WeightFileError as e:
            raise ArtifactError(str(e)) from None
    where = "the state dict" if isinstance(weights, Mapping) else str(weights)
    if signed and (refused := signed_weights.refusal(record, tensors, where)) is not None:
        raise container.error(refused)
    return tensors
