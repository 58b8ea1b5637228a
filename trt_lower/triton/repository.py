"""export_model_repository: a lowered model as a Triton Inference Server model repository entry."""

from __future__ import annotations

import operator
import os
import re
import shutil
import sysconfig
import tempfile
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Callable, ContextManager, Iterable

import onnx
import torch

import trt_lower
from converters.core.segment import OnnxSegment
from splitter.index_check import check_indices
from trt_lower.deploy import ranks
from trt_lower.deploy.artifact import load_file
from trt_lower.deploy.container import ArtifactError, open_file
from trt_lower.deploy.ranks import DISTRIBUTED
from trt_lower.deploy.signing import PublicKey
from trt_lower.runtime.guard import InputGuard
from trt_lower.runtime.profiles import ProfileChoice
from trt_lower.stitch.lowered import LoweredModule
from trt_lower.triton.config import ModelConfig
from trt_lower.triton.generation import KIND, causal_lm_step, generation_signature
from trt_lower.triton.platforms import PLATFORMS
from trt_lower.triton.signature import ModelSignature, signature
from trt_lower.values import device as devices
from trt_lower.values.atomic_file import atomic_file
from trt_lower.values.signature import EngineInputError, TensorSig, describe_profiles

if TYPE_CHECKING:
    from trt_lower.llm import LoweredCausalLM

ARTIFACT = "model.trtl"


@dataclass(frozen=True)
class TritonModel:
    """What export_model_repository wrote: the model's directory, the platform it chose and why."""

    path: Path
    platform: str
    reason: str


@dataclass(frozen=True)
class _Options:
    """export_model_repository's options, checked."""

    max_batch_size: int
    instances: int
    platform: str
    dynamic_batching: bool
    version: int
    max_eager_allocation: int | None


@dataclass(frozen=True)
class SingleEngine:
    """The one engine a fully lowered model runs: its I/O, its model file (the ONNX on ONNX
    Runtime, the plan on TensorRT) and its tensor names -> the model's."""

    inputs: tuple[TensorSig, ...]
    outputs: tuple[TensorSig, ...]
    model_file: bytes | OnnxSegment
    names: dict[str, str]


def export_model_repository(
    artifact_or_lowered: LoweredModule | LoweredCausalLM | str | os.PathLike[str],
    repo_dir: str | os.PathLike[str],
    name: str,
    *,
    max_batch_size: int = 0,
    instances: int = 1,
    platform: str = "auto",
    dynamic_batching: bool = True,
    version: int = 1,
    trusted_keys: Iterable[PublicKey] | PublicKey | None = None,
    max_eager_allocation: int | None = None,
) -> TritonModel:
    """Write `<repo_dir>/<name>/config.pbtxt` and `<repo_dir>/<name>/<version>/` for a model
    lowered by trt_lower (a LoweredModule, or the path of an artifact saved by trt_lower.save).

    platform="auto" picks `tensorrt_plan` when the model is one TensorRT engine whose inputs and
    outputs are the model's, `onnxruntime_onnx` when it is one ONNX Runtime engine, and else
    `python`: a python-backend model.py that runs the artifact with trt_lower. With
    max_batch_size > 0, dim 0 of every input and output is Triton's batch dim: the model must
    have been lowered with a TensorSpec range on it that takes 1..max_batch_size.

    A causal LM lowered for generation (trt_lower.llm.lower_causal_lm, its step or its artifact) becomes
    a python model that runs generate() per request (triton/generation.py), with
    max_batch_size=0.

    trusted_keys: for an artifact's path, the Ed25519 public keys (or their PEM files) one of which
    must have signed it, as trt_lower.load takes them ($TRT_LOWER_TRUSTED_KEYS when not given).

    max_eager_allocation: for a python model, the budget its model.py loads the artifact with
    (trt_lower.load's max_eager_allocation, written into config.pbtxt); None: load's default.
    """
    _check_options(name, max_batch_size, instances, platform, version, max_eager_allocation)
    options = _Options(max_batch_size, instances, platform, dynamic_batching, version, max_eager_allocation)
    if not isinstance(artifact_or_lowered, (str, os.PathLike)):
        lowered = artifact_or_lowered
        return _export(lowered, lambda target: trt_lower.save(lowered, target), Path(repo_dir) / name, options)
    # The file is read once, into an unnamed copy no other process can reach; that copy is verified, loaded and,
    # for a python model, published: a file changed or replaced meanwhile reaches neither the checks nor the
    # repository (and nothing is written there for a file refused).
    with tempfile.TemporaryFile() as copy:
        with open_file(Path(artifact_or_lowered)) as original:
            shutil.copyfileobj(original, copy)
        lowered = load_file(
            copy,
            artifact_or_lowered,
            trusted_keys=trusted_keys,
            check=lambda container: _refuse_ranks(container.manifest.get(DISTRIBUTED), str(artifact_or_lowered)),
        )
        return _export(lowered, lambda target: _copy(copy, target), Path(repo_dir) / name, options)


def _export(
    lowered: LoweredModule | LoweredCausalLM, save: Callable[[Path], None], model_dir: Path, options: _Options
) -> TritonModel:
    """export_model_repository of `lowered`; `save` writes its artifact (for a python model) at a path."""
    max_batch_size, instances, platform, dynamic_batching, version, _ = astuple(options)
    graph = getattr(getattr(lowered, "lowered_module", lowered), "graph", None)  # a LoweredCausalLM's too
    for node in graph.nodes if isinstance(graph, torch.fx.Graph) else ():
        if ranks.collective(node):
            _refuse_ranks(node, f"node '{node.name}' ({node.target})")
    step = causal_lm_step(lowered)
    if step is not None:
        return _export_causal_lm(save, step, model_dir, options)
    if not isinstance(lowered, LoweredModule):
        raise ValueError(
            f"export_model_repository takes a LoweredModule, a LoweredCausalLM or the path of their "
            f"artifact, got {type(lowered).__name__}"
        )
    guard = _guard(lowered)
    sig = signature(lowered, guard.inputs, _device(lowered))
    _check_batching(sig, max_batch_size, guard)
    _check_profiles(lowered, max_batch_size, dynamic_batching)
    engine = single_engine(lowered, sig)
    chosen, reason = _choose(platform, lowered, engine, scalar=_scalar(sig) if max_batch_size == 0 else "")
    files = model_dir / str(version)
    files.mkdir(parents=True, exist_ok=True)
    config = ModelConfig(
        model_dir.name,
        chosen,
        sig,
        max_batch_size=max_batch_size,
        instances=instances,
        kind="KIND_GPU" if lowered.report.backend == "tensorrt" else "KIND_CPU",
        dynamic_batching=dynamic_batching,
        profiles=len(profile_choices(lowered)[0].profiles) if chosen == "tensorrt_plan" else 1,
    )
    if chosen == "python":
        _write_python(save, files, config, options.max_eager_allocation)
    elif chosen == "onnxruntime_onnx":
        assert isinstance(engine, SingleEngine)
        assert isinstance(engine.model_file, OnnxSegment)
        renamed = OnnxSegment(_renamed(engine.model_file.model, engine.names), engine.model_file.weights)
        # Self-contained, or past 2 GB with its weights beside it in model.onnx.data, which
        # Triton's onnxruntime backend reads from the model's directory.
        renamed.write(files / "model.onnx", _published)
    else:
        assert isinstance(engine, SingleEngine)
        capability = _compute_capability()
        plan = f"model_sm{capability.replace('.', '')}.plan"
        assert isinstance(engine.model_file, bytes)
        _write(files / plan, engine.model_file)
        # Exporting on each kind of GPU into one repository gathers a plan per compute capability.
        config.cc_model_filenames = {**_plans_in(model_dir / "config.pbtxt"), capability: plan}
        config.renames = {ours: theirs for theirs, ours in engine.names.items()}
    _write(model_dir / "config.pbtxt", config.text().encode())
    return TritonModel(model_dir, chosen, reason)


def _export_causal_lm(
    save: Callable[[Path], None], step: LoweredModule, model_dir: Path, options: _Options
) -> TritonModel:
    """A python model whose runner is generation.GenerationRunner: one generate() per request
    (its artifact, the step's, loads as the LoweredCausalLM)."""
    max_batch_size, instances, platform, _, version, _ = astuple(options)
    if platform not in ("auto", "python"):
        raise ValueError(
            f"platform={platform!r} cannot serve a causal LM: its generate() loop runs in a python-backend "
            "model; use platform='python' or 'auto'"
        )
    assert step.extra is not None  # causal_lm_step read the kind there
    if max_batch_size != 0:
        raise ValueError(
            f"max_batch_size={max_batch_size}: a causal LM is served with max_batch_size=0 (Triton's batcher "
            "would merge prompts with different options into one generate() call); a request carries up "
            f"to max_batch={step.extra['max_batch']} prompts itself"
        )
    files = model_dir / str(version)
    files.mkdir(parents=True, exist_ok=True)
    config = ModelConfig(
        model_dir.name,
        "python",
        generation_signature(),
        instances=instances,
        kind="KIND_GPU" if step.report.backend == "tensorrt" else "KIND_CPU",
        dynamic_batching=False,
    )
    _write_python(save, files, config, options.max_eager_allocation)
    config.parameters["kind"] = KIND  # model.py runs it with generation.GenerationRunner
    _write(model_dir / "config.pbtxt", config.text().encode())
    return TritonModel(model_dir, "python", "a causal LM: the python model runs generate() per request")


def _refuse_ranks(found: object, what: str) -> None:
    """ArtifactError for one rank of a multi-process model (`found`: its file's record or a
    collective node of its graph): Triton starts, restarts and scales each model instance as a
    process of its own, and forms no torch.distributed job between them."""
    if found is not None:
        raise ArtifactError(
            f"{what}: this model is one rank of a torch.distributed job; serving a multi-rank model through "
            "Triton is not supported (Triton's instances form no job between them): run it under torchrun "
            "(docs/distributed.md)"
        )


def _check_options(
    name: str, max_batch_size: int, instances: int, platform: str, version: int, max_eager_allocation: int | None
) -> None:
    # '.' and '..' are the repository itself and its parent, not a directory of their own.
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.\-]+", name) or name in (".", ".."):
        raise ValueError(f"name must be a model name (letters, digits, '_', '-', '.'; not '.' or '..'), got {name!r}")
    for option, value, least in (
        ("max_batch_size", max_batch_size, 0),
        ("instances", instances, 1),
        ("version", version, 1),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"{option} must be an int >= {least}, got {value!r}")
    if max_eager_allocation is not None and (type(max_eager_allocation) is not int or max_eager_allocation < 1):
        raise ValueError(f"max_eager_allocation must be a positive int of bytes or None, got {max_eager_allocation!r}")
    if platform not in PLATFORMS:
        raise ValueError(f"platform must be one of {', '.join(map(repr, PLATFORMS))}, got {platform!r}")


def _guard(lowered: LoweredModule) -> InputGuard:
    guard = getattr(lowered, "_input_guard", None)
    if not isinstance(guard, InputGuard):
        raise ValueError(
            "this LoweredModule has no input guard; export the module lower_to_trt or trt_lower.load returns"
        )
    return guard


def _device(lowered: LoweredModule) -> torch.device:
    """Where the module takes its inputs: TensorRT engines on trt_lower's device, else the CPU."""
    return devices.current().torch_device() if lowered.report.backend == "tensorrt" else torch.device("cpu")


def _check_batching(sig: ModelSignature, max_batch_size: int, guard: InputGuard) -> None:
    if max_batch_size == 0:
        return
    if sig.batch_range is None:
        raise ValueError(
            f"max_batch_size={max_batch_size} needs a batch dim, but {sig.not_batchable}; lower the model with a "
            "trt_lower.TensorSpec whose dim 0 varies (e.g. min_shape=(1, ...), max_shape=(N, ...)), or use max_batch_size=0"
        )
    lo, hi = sig.batch_range
    if lo > 1 or hi < max_batch_size:
        raise ValueError(
            f"max_batch_size={max_batch_size}: Triton sends batches of 1..{max_batch_size}, but the model "
            f"was lowered for batch sizes {lo}..{hi}"
        )
    if guard.conditions is not None:
        # Size conditions (capture/conditions.py) may rule batch sizes out: each one Triton may
        # send must meet them, with the other dims at their optimal sizes.
        for batch in range(1, max_batch_size + 1):
            shapes = [(batch, *s.opt_shape[1:]) for s in guard.inputs]
            try:
                guard.conditions([torch.empty(shape, device="meta") for shape in shapes])
            except EngineInputError as e:
                raise ValueError(f"max_batch_size={max_batch_size}: Triton may send a batch of {batch}, and {e}") from e


def profile_choices(lowered: LoweredModule) -> list[ProfileChoice]:
    """How each engine of `lowered` picks its optimization profile, in graph order."""
    choices = (getattr(m, "profile", None) for m in lowered.modules())
    return [c for c in choices if isinstance(c, ProfileChoice)]


def _outside_profiles(choice: ProfileChoice, batch: int) -> bool:
    """Whether no profile's dim 0 holds `batch` on every input whose dim 0 varies."""
    varying = [i for i, s in enumerate(choice.sigs) if s.min_shape and s.min_shape[0] != s.max_shape[0]]
    return bool(varying) and not any(all(p[i][0][0] <= batch <= p[i][2][0] for i in varying) for p in choice.profiles)


def _check_profiles(lowered: LoweredModule, max_batch_size: int, dynamic_batching: bool) -> None:
    """Triton's dynamic batcher merges requests into any batch up to max_batch_size: refused where
    an engine's optimization profiles leave some out (the merged batch would fail)."""
    if not dynamic_batching or max_batch_size == 0:
        return
    for choice in profile_choices(lowered):
        gaps = [b for b in range(1, max_batch_size + 1) if _outside_profiles(choice, b)]
        if gaps:
            engine, ranges = choice.where.removesuffix(": "), "; ".join(describe_profiles(choice.sigs))
            raise ValueError(
                f"dynamic_batching=True: Triton's batcher may merge requests into a batch of {gaps[0]}, which no "
                f"optimization profile of {engine} holds ({ranges}); "
                "export with dynamic_batching=False (each request runs at its own batch size), or lower with "
                "profiles that cover 1..max_batch_size"
            )


def single_engine(lowered: LoweredModule, sig: ModelSignature) -> SingleEngine | str:
    """The model's one engine when it computes the whole model (its inputs are the model's
    inputs, its outputs the model's outputs), else why not."""
    report = lowered.report
    if len(report.engines) != 1 or report.fallbacks:
        return f"{len(report.engines)} engine(s) and {len(report.fallbacks)} eager fallback(s)"
    nodes = list(lowered.graph.nodes)
    engine = next(n for n in nodes if n.op == "call_module" and n.target == report.engines[0].name)
    module = lowered.get_submodule(str(engine.target))
    inputs: tuple[TensorSig, ...] = getattr(module, "inputs")
    outputs: tuple[TensorSig, ...] = getattr(module, "outputs")
    placeholders = [n for n in nodes if n.op == "placeholder"]
    output = nodes[-1]
    results = list(output.args[0]) if isinstance(output.args[0], (tuple, list)) else [output.args[0]]
    picked: list[int] = []  # the engine output each model output is
    for r in results:
        if (
            isinstance(r, torch.fx.Node)
            and r.target is operator.getitem
            and r.args[0] is engine
            and isinstance(r.args[1], int)
        ):
            picked.append(r.args[1])
        elif r is engine and not getattr(module, "tuple_output"):
            picked.append(0)
        else:
            return f"the model's output {r} is not an output of its engine"
    if any(n.target is check_indices for n in nodes):
        return "its indices read from data are checked outside the engine (the engine alone would not raise for one out of range)"
    others = [
        n for n in nodes if n.op == "call_function" and not (n.target is operator.getitem and n.args[0] is engine)
    ]
    if others or list(engine.args) != placeholders or sorted(picked) != list(range(len(outputs))):
        return "the engine's inputs and outputs are not exactly the model's"
    names = {s.name: t.name for s, t in zip(inputs, sig.inputs)}
    names.update({outputs[i].name: t.name for i, t in zip(picked, sig.outputs)})
    plan = getattr(module, "plan", None)
    return SingleEngine(
        inputs, outputs, plan if isinstance(plan, bytes) else lowered.segments[str(engine.target)].onnx, names
    )


def _narrowed(lowered: LoweredModule, engine: SingleEngine) -> list[str]:
    """The engine I/O whose dtype the engine carries as another (docs/precision.md):
    a Triton model of the engine alone would declare the wrong type."""
    report = lowered.report
    wide = (
        (torch.int64, torch.float64)
        if report.backend == "tensorrt" and report.trt_version == "8.6"
        else (torch.float64,)
    )
    return [s.source for s in (*engine.inputs, *engine.outputs) if s.dtype in wide]


def _scalar(sig: ModelSignature) -> str:
    """Why a non-batching model file cannot be served as it is: a 0-d input or output, which
    Triton declares as [1] (the python model's Runner reshapes it); else ''."""
    scalars = [t.name for t in (*sig.inputs, *sig.outputs) if not t.dims]
    return f"{', '.join(scalars)} 0-d, which a model without a batch dim declares as [1]" if scalars else ""


def _choose(platform: str, lowered: LoweredModule, engine: SingleEngine | str, scalar: str = "") -> tuple[str, str]:
    """The platform, and why."""
    backend = lowered.report.backend
    why_not = engine if isinstance(engine, str) else ""
    if isinstance(engine, SingleEngine) and _narrowed(lowered, engine):
        why_not = f"the engine carries {', '.join(_narrowed(lowered, engine))} in another dtype than the model"
    conditions = _guard(lowered).conditions
    why_not = why_not or scalar
    if not why_not and conditions is not None:
        # The engine alone would compute a branch the model does not take for shapes that break them.
        why_not = (
            f"its inputs must meet size conditions the engine alone does not check ({'; '.join(conditions.texts)})"
        )
    wanted = {"tensorrt_plan": "tensorrt", "onnxruntime_onnx": "onnxruntime"}
    if platform in wanted:
        if wanted[platform] != backend:
            raise ValueError(
                f"platform={platform!r} needs a model lowered with backend={wanted[platform]!r}; "
                f"this one runs on {backend}"
            )
        if why_not:
            raise ValueError(
                f"platform={platform!r} needs the whole model in one engine with the model's I/O: {why_not}"
            )
        return platform, "asked for"
    if platform == "python":
        return "python", "asked for"
    if why_not:
        return "python", why_not
    return {"tensorrt": "tensorrt_plan", "onnxruntime": "onnxruntime_onnx"}[backend], "the whole model is one engine"


def _renamed(source: onnx.ModelProto, names: dict[str, str]) -> onnx.ModelProto:
    """The engine's ONNX with its graph inputs and outputs called by the model's names."""
    model = onnx.ModelProto()
    model.CopyFrom(source)  # the graph only: large weights are declared, their values kept apart
    graph = model.graph
    for value in (*graph.input, *graph.output):
        value.name = names[value.name]
    for node in graph.node:
        node.input[:] = [names.get(n, n) for n in node.input]
        node.output[:] = [names.get(n, n) for n in node.output]
    return model


def _compute_capability() -> str:
    """The GPU the plans were built on, as Triton names compute capabilities ("8.0")."""
    found = re.search(r"sm_(\d+)(\d)$", devices.current().identity())
    if found is None:
        raise ValueError(
            f"cannot tell the compute capability of {devices.current().identity()!r}, which a tensorrt_plan model needs"
        )
    return f"{found[1]}.{found[2]}"


def _plans_in(config: Path) -> dict[str, str]:
    """The cc_model_filenames of an existing tensorrt_plan config.pbtxt (as ModelConfig.text writes them)."""
    text = config.read_text() if config.is_file() else ""
    if 'platform: "tensorrt_plan"' not in text:
        return {}
    return dict(re.findall(r'cc_model_filenames \{ key: "([^"]+)" value: "([^"]+)" \}', text))


# A server may load the repository while it is written (its model control polls it): each file
# appears whole or not at all, never torn by a failure or a crash mid-write.
def _published(path: Path) -> ContextManager[BinaryIO]:
    return atomic_file(path, private=False)  # readable by a server running as another user


def _write(path: Path, data: bytes) -> None:
    with _published(path) as file:
        file.write(data)


def _copy(source: BinaryIO, target: Path) -> None:
    source.seek(0)
    with _published(target) as copy:
        shutil.copyfileobj(source, copy)


def _python_path() -> str:
    """Where the serving stub finds trt_lower and its dependencies: this environment."""
    root = Path(trt_lower.__file__).resolve().parent.parent
    paths = dict.fromkeys([str(root), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    return os.pathsep.join(paths)


def _write_python(
    save: Callable[[Path], None], files: Path, config: ModelConfig, max_eager_allocation: int | None
) -> None:
    save(files / ARTIFACT)  # atomically, as every file here
    with open(Path(__file__).with_name("model.py"), "rb") as stub:
        _copy(stub, files / "model.py")
    config.parameters = {"artifact": ARTIFACT, "python_path": _python_path()}
    if max_eager_allocation is not None:  # model.py loads the artifact with it
        config.parameters["max_eager_allocation"] = str(max_eager_allocation)
