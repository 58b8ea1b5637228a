"""Properties every successful lowering keeps where features meet: for programs of both fuzzers of
test_fuzz.py and a small zoo of real architectures, a lowering with verify=True

  (a) matches eager with no repair where its engines are right (a repair is false when the same
      lowering with verify=False matches eager),
  (b) saves, and loads in a fresh process to return exactly the outputs of the module it saved
      (one process loads the artifacts of every case a run selects),
  (c) takes `update_weights` from a copy whose parameters and floating buffers are all perturbed,
      then matches that copy,
  (d) saves weight-stripped, loads with the perturbed copy's own `state_dict()`, and matches it,
  (e) profiles: rows of every engine and of every eager node that computes, adding up with the host
      glue to the measured call, and the module's outputs unchanged after it;

and where the case's inputs have a batch (`batch` says the rule; a case without one is skipped
with the reason), a lowering for leading sizes 1..4B with two optimization profiles

  (f) matches eager on each profile, refuses the call between them where an engine tells them
      apart (EngineInputError naming the ranges; else that call matches eager), takes (c)'s new
      weights and matches them on each profile, and saves and loads in (b)'s fresh process to do
      the same;

and a lowering on the TensorRT path (the double, TensorRT 10.13)

  (g) with the builder knobs, a timing cache, weight_streaming=True and, with a batch, (f)'s
      profiles: the knobs reach the builder, the outputs match eager on every profile, and go on
      matching as the weight streaming budget changes (half, none, all).

Tensor parallel lowering needs process groups, so it is not here: tests/test_tp_lowering.py lowers
sharded models across worker processes and checks them against eager.

A fuzzer's program gets weights to replace: each tensor literal becomes a weight of its module
(float ones alternately a parameter and a buffer, integer ones, indices, a buffer), perturbed by
multiples of 1/8 so that its arithmetic stays as exact as the fuzzer's. A failing test names the
case (the model and its seed) and every step that broke, with the error's first line.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import importlib
import inspect
import itertools
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from types import ModuleType
from typing import Any, Callable

import numpy as np
import pytest
import torch
import torch.utils._pytree as pytree
import transformers
from hypothesis import strategies as st
from hypothesis.internal.conjecture.data import ConjectureData
from test_fuzz import GRAPHS_PER_MODEL, compile_program, programs, structured_programs, together
from test_verify import Block
from trt_double import miscompile
from trt_models import bert, llama_config

import trt_lower
from trt_lower import EngineInputError, TensorSpec, WeightStreamingError
from trt_lower.engine.build_options import BuildOptions
from trt_lower.report.entries import Repair
from trt_lower.runtime.profiles import ProfileChoice

Example = tuple[torch.nn.Module, tuple[torch.Tensor, ...]]


@dataclass(frozen=True)
class Case:
    build: Callable[[int], Example]  # the model and its inputs, from the seed
    seed: int
    lowering: dict[str, Any] = field(default_factory=dict)  # lower_to_trt's settings beside the defaults
    exact: bool = False  # a fuzzer's program: multiples of 1/8, so its arithmetic is exact


# -- the fuzzers' programs, with weights --------------------------------------------------------
_LITERAL = re.compile(r"torch\.tensor\(([^()]*)\)")


class Weighted(torch.nn.Module):
    """A fuzzer's program whose tensor literals are weights of the module."""

    def __init__(self, code: str) -> None:
        super().__init__()
        for i, literal in enumerate(_LITERAL.findall(code)):
            value = torch.tensor(ast.literal_eval(literal))
            if value.is_floating_point() and i % 2 == 0:
                self.register_parameter(f"w{i}", torch.nn.Parameter(value))
            else:
                self.register_buffer(f"w{i}", value)
        count = itertools.count()
        code = _LITERAL.sub(lambda _: f"self.w{next(count)}", code).replace("def program(", "def program(self, ", 1)
        self.code = code  # printed with a failure
        self.fn = compile_program(code)

    def forward(self, *args: torch.Tensor) -> Any:
        return self.fn(self, *args)


def _drawn(strategy: st.SearchStrategy[Any], seed: int) -> Any:
    """What `strategy` draws from a random seeded with `seed`: each program its own test, which
    @given cannot give. ConjectureData is hypothesis's own drawing engine (internal API); at the
    version constraints.txt pins, a seed draws the same program on every run."""
    return ConjectureData(random=Random(seed)).draw(strategy)


def random_program(seed: int) -> Example:
    program = _drawn(programs(), seed)
    return Weighted(program.code), program.inputs()


def structured_program(seed: int) -> Example:
    program = together([_drawn(structured_programs(), seed * GRAPHS_PER_MODEL + j) for j in range(GRAPHS_PER_MODEL)])
    return Weighted(program.code), program.inputs()


# -- the zoo --------------------------------------------------------------------------------------
def cnn(seed: int) -> Example:
    """Convolutions with BatchNorm (which lowering folds), in an nn.Sequential (numbered names)."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3, padding=1, stride=2),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(8, 10),
    )
    with torch.no_grad():  # running statistics of their own, not BatchNorm's initial 0 and 1
        model.train()(torch.randn(4, 3, 16, 16) * 2 + 1)
    return model.eval(), (torch.randn(2, 3, 16, 16),)


def llama(seed: int) -> Example:
    """A decoder with rotary embeddings (an inv_freq buffer) and grouped-query attention."""
    torch.manual_seed(seed)
    config = llama_config(use_cache=False)
    model: torch.nn.Module = transformers.LlamaModel(config)
    return model.eval(), (torch.randint(0, config.vocab_size, (1, 16)),)


def bert_model(seed: int) -> Example:
    torch.manual_seed(seed)
    model, (ids,) = bert()
    return model, (ids[:, :8],)


def vit(seed: int) -> Example:
    """A vision transformer (timm): patch embedding, class token, position embedding, LayerNorm."""
    import timm

    torch.manual_seed(seed)
    model = timm.create_model(
        "vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, depth=2, num_classes=10
    )
    return model.eval(), (torch.randn(1, 3, 32, 32),)


class Scaled(torch.nn.Module):
    """Engines on both sides of an eager node that reads a parameter (`scale`, kept eager by
    fallback_ops)."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Linear(8, 16)
        self.scale = torch.nn.Parameter(torch.rand(16) + 0.5)
        self.outer = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.outer(torch.relu(self.inner(x)) * self.scale)
        return out


def eager_weight(seed: int) -> Example:
    torch.manual_seed(seed)
    return Scaled().eval(), (torch.randn(3, 8),)


class Cancelling(torch.nn.Module):
    """Outputs that are zero but for rounding, each computed in its own way by eager and engines:
    a sum over a layer-normed value, softmax's total less 1."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(16, 32)
        self.norm = torch.nn.LayerNorm(32)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = self.proj(x)
        return h, self.norm(h).sum(-1), torch.softmax(h, -1).sum(-1) - 1


def cancelling(seed: int) -> Example:
    torch.manual_seed(seed)
    return Cancelling().eval(), (torch.randn(4, 16),)


def all_eager(seed: int) -> Example:
    """One layer, too small for an engine at the default min_block_size: its weight, `0.weight`,
    is held by an eager node."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 4)).eval(), (torch.randn(3, 8),)


CASES = {
    # From runs over seeds 12-249: 12 and 40, whose engines take no batched input (no engine tells
    # (f)'s profiles apart), and 170, a hardswish ONNX Runtime inlines (step (e)'s rows).
    **{
        f"random_program-seed{s}": Case(random_program, s, {"min_block_size": 1}, exact=True)
        for s in (*range(13), 40, 170)
    },
    **{f"structured_program-seed{s}": Case(structured_program, s, {"min_block_size": 1}, exact=True) for s in range(4)},
    "cnn_batchnorm-seed0": Case(cnn, 0),
    "bert-seed0": Case(bert_model, 0),
    "vit-seed0": Case(vit, 0),
    "llama_rotary_gqa-seed0": Case(llama, 0),
    "eager_weight-seed0": Case(eager_weight, 0, {"fallback_ops": [torch.ops.aten.mul.Tensor]}),
    "all_eager_sequential-seed0": Case(all_eager, 0),
    "cancelling_outputs-seed0": Case(cancelling, 0),
}


# -- the steps ------------------------------------------------------------------------------------
def _matches(case: Case, actual: Any, expected: Any) -> None:
    """Close to eager; the tolerances fail an engine that returns zeros for outputs of magnitude 1e-3 and up."""
    rtol, atol = (1e-4, 1e-4) if case.exact else (1e-3, 1e-5)
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True)


def _eager(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> Any:
    with torch.no_grad():
        return model(*inputs)


def _lower(case: Case, model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], verify: bool) -> Any:
    return trt_lower.lower_to_trt(model, inputs, backend="onnxruntime", verify=verify, **case.lowering)


def perturbed(case: Case, model: torch.nn.Module, names: set[str]) -> torch.nn.Module:
    """A copy of `model` whose floating tensors named in `names` are all changed: by multiples of
    1/8 for a fuzzer's program; else by up to 10 % of each value (keeping its sign: variances and
    frequencies stay positive) and, for parameters, 2 % of their spread (biases and norms that
    start at 0 and 1 change too)."""
    other = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(case.seed + 1)
    parameters = dict(other.named_parameters())
    with torch.no_grad():
        for name, tensor in itertools.chain(other.named_parameters(), other.named_buffers()):
            if name not in names or not tensor.is_floating_point():
                continue
            sign = torch.randint(2, tensor.shape, generator=generator) * 2 - 1
            if case.exact:
                tensor += torch.randint(1, 3, tensor.shape, generator=generator) / 8 * sign
                continue
            tensor *= 1 + 0.1 * torch.rand(tensor.shape, generator=generator) * sign
            if name in parameters:
                tensor += (
                    0.02 * (tensor.std() if tensor.numel() > 1 else 1) * torch.randn(tensor.shape, generator=generator)
                )
    return other


def verifies_without_false_repairs(case: Case, model: torch.nn.Module, inputs: Any, lowered: Any) -> None:
    expected = _eager(model, inputs)
    _matches(case, lowered(*inputs), expected)
    repairs = lowered.report.repairs
    if lowered.report.engines:
        assert lowered.report.verify_errors, "verify=True verified no engine"
    if repairs:
        unverified = _lower(case, model, inputs, verify=False)
        try:
            _matches(case, unverified(*inputs), expected)
        except AssertionError:
            return  # the engines were wrong: a true repair
        raise AssertionError(f"{len(repairs)} repair(s) of engines that match eager: {repairs[0]}")


def takes_perturbed_weights(case: Case, model: torch.nn.Module, inputs: Any, lowered: Any) -> torch.nn.Module:
    """(c); the perturbed copy, for more calls to compare with."""
    names = {n for n, _ in itertools.chain(model.named_parameters(), model.named_buffers())}
    new = perturbed(case, model, names)
    lowered.update_weights(new)
    _matches(case, lowered(*inputs), _eager(new, inputs))
    return new


def loads_stripped_with_a_state_dict(case: Case, model: torch.nn.Module, inputs: Any, lowered: Any, tmp: Path) -> None:
    new = perturbed(case, model, set(model.state_dict()))  # what a state dict can carry
    trt_lower.save(lowered, tmp / "stripped.trtl", weights="separate")
    loaded = trt_lower.load(tmp / "stripped.trtl", backend="onnxruntime", weights=new.state_dict())
    _matches(case, loaded(*inputs), _eager(new, inputs))


def profiles(case: Case, model: torch.nn.Module, inputs: Any, lowered: Any) -> None:
    profile = lowered.profile(inputs, iterations=2, warmup=0)
    assert sum(r.seconds for r in profile.rows) + profile.glue_seconds == pytest.approx(profile.call_seconds)
    timed = {r.engine for r in profile.rows if r.engine is not None}
    missing = {e.name for e in lowered.report.engines} - timed
    assert not missing, f"no row for {sorted(missing)}"
    assert all(r.nodes for r in profile.rows if r.kind == "eager"), "an eager row names no FX node"
    _matches(case, lowered(*inputs), _eager(model, inputs))


def summary(error: BaseException) -> str:
    """The error's type and first line; for assert_close's, where and by how much too."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    said = lines[:1] + [line for line in lines[1:] if line.startswith(("Greatest absolute", "The failure occurred"))]
    return f"{type(error).__name__}: {'; '.join(said)}"


# -- a batch, for several profiles (f) and the TensorRT path (g) ----------------------------------
@dataclass(frozen=True)
class Batch:
    """A case's inputs along a leading dim that varies (size B): lowered for 1..4B with the
    profiles 1..B (the case's own inputs) and 2B+1..4B, called at both ends of each profile and
    at 2B, between them."""

    inputs: tuple[torch.Tensor, ...]
    size: int

    def at(self, n: int) -> tuple[torch.Tensor, ...]:
        """The inputs at leading size n: cut, or repeated (integer inputs stay valid indices)."""
        return tuple(x if x.dim() == 0 else torch.cat([x] * -(-n // x.shape[0]))[:n] for x in self.inputs)

    def specs(self, low: int, opt: int, high: int) -> tuple[TensorSpec | torch.Tensor, ...]:
        return tuple(
            x if x.dim() == 0 else TensorSpec((low, *x.shape[1:]), (opt, *x.shape[1:]), (high, *x.shape[1:]), x.dtype)
            for x in self.inputs
        )

    def lowering(self) -> dict[str, Any]:
        """lower_to_trt's `inputs` and `profiles` for the range and the two profiles."""
        b = self.size
        return {
            "inputs": self.specs(1, b, 4 * b),
            "profiles": [self.specs(1, b, b), self.specs(2 * b + 1, 4 * b, 4 * b)],
        }

    @property
    def calls(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys((self.size, 1, 2 * self.size + 1, 4 * self.size)))

    @property
    def between(self) -> int:
        return 2 * self.size

    def replay(self) -> list[tuple[torch.Tensor, ...]]:
        """The inputs of every call (f) makes, for its fresh process to make again."""
        return [self.at(n) for n in (*self.calls, self.between)]


def batch(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> Batch | str:
    """The case's batch, or why it has none. The rule, cheap and checked rather than assumed: every
    input but scalars (which stay as they are) has one leading size B, and eager runs the model
    with the inputs at the sizes the profiles are called at."""
    sizes = {x.shape[0] for x in inputs if x.dim()}
    if not sizes:
        return "no batch: every input is a scalar"
    if len(sizes) != 1:
        return f"no batch: the inputs' leading sizes differ ({', '.join(str(tuple(x.shape)) for x in inputs)})"
    found = Batch(inputs, sizes.pop())
    for n in found.calls:
        try:
            _eager(model, found.at(n))
        except Exception as e:
            return f"no batch: eager refuses the inputs at leading size {n} ({summary(e)})"
    return found


def _narrowed(lowered: Any) -> str | None:
    """Why a lowering over the batch range does not take it all, or None: its capture holds a
    narrower range (a guard torch.export added: calls outside it are refused naming the range), or
    torch.export fixed the dim (a CaptureError naming the input and the size)."""
    if isinstance(lowered, trt_lower.CaptureError) and "no range works" in str(lowered):
        return summary(lowered)
    notes = getattr(getattr(lowered, "report", None), "notes", [])
    return next((note for note in notes if "the captured graph holds for" in note), None)


def _lower_profiled(case: Case, model: torch.nn.Module, found: Batch) -> Any:
    # verify=False: (a) verifies; this lowering is for the profiles.
    return trt_lower.lower_to_trt(model, **found.lowering(), backend="onnxruntime", verify=False, **case.lowering)


def _between(case: Case, model: torch.nn.Module, lowered: Any, found: Batch) -> None:
    """The call between the profiles: where an engine tells them apart (an engine taking the batch,
    whose inputs' ranges differ between the profiles, has both), refused naming both profiles'
    ranges; where none does (all eager, or engines only after the batch is summed away or on
    inputs without it), it reaches no engine it fits none of, and runs and matches eager."""
    engines = lowered.report.engines
    dynamic = [e.profiles for e in engines if any(-1 in shape for shape in e.input_shapes)]
    assert not dynamic or any(len(p) == 2 for p in dynamic), f"no engine has the two profiles: {dynamic}"
    profiled = [e.profiles for e in engines if e.profiles]
    assert all(len(p) == 2 for p in profiled), f"an engine has other than the two profiles: {profiled}"
    if not profiled:
        _matches(case, lowered(*found.at(found.between)), _eager(model, found.at(found.between)))
        return
    try:
        lowered(*found.at(found.between))
    except EngineInputError as e:
        if not re.search(r"fits none of its optimization profiles \(profile 0: .+; profile 1: .+\)", str(e)):
            raise AssertionError(f"the refusal names no profile ranges: {e}") from e
        return
    raise AssertionError(f"the call at leading size {found.between}, between the profiles, ran")


def keeps_several_profiles(case: Case, model: torch.nn.Module, found: Batch, lowered: Any) -> None:
    """(f): each profile's calls match eager, and the call between them is refused or runs as
    `_between` says. Then it takes (c)'s new weights and matches them on each profile."""
    for n in found.calls:
        _matches(case, lowered(*found.at(n)), _eager(model, found.at(n)))
    _between(case, model, lowered, found)
    new = takes_perturbed_weights(case, model, found.inputs, lowered)
    for n in found.calls:
        _matches(case, lowered(*found.at(n)), _eager(new, found.at(n)))


# (g)'s builder knobs, none at its default (a timing cache too: a file in the test's folder).
KNOBS = {"optimization_level": 1, "workspace_bytes": 1 << 26, "tactic_sources": {"jit_convolutions"}}
KNOBS_BUILT = (1, 1 << 26, 1 << 4)  # as the builder config holds them: JIT_CONVOLUTIONS is bit 4


def streams_on_tensorrt(case: Case, model: torch.nn.Module, inputs: Any, double: ModuleType, tmp: Path) -> None:
    """(g): lowered for TensorRT 10.x (the double) with the builder knobs, weight_streaming=True and,
    where the case has a batch, (f)'s profiles; the knobs reach the builder, and the outputs match
    eager at every budget (half, none, all of the streamable weights) on every profile."""
    settings = {"backend": "tensorrt", "verify": False, "weight_streaming": True, **KNOBS, **case.lowering}

    def lower(shapes: dict[str, Any]) -> Any:
        return trt_lower.lower_to_trt(model, **shapes, timing_cache=tmp / "timing.cache", **settings)

    found: Batch | str = batch(model, inputs)
    lowered = _attempt(lambda: lower(found.lowering())) if isinstance(found, Batch) else None
    if _narrowed(lowered):
        found = "the capture narrowed the batch"
    elif isinstance(lowered, Exception):
        raise lowered
    if not isinstance(found, Batch):
        lowered = lower({"inputs": inputs})
    calls = [found.at(n) for n in found.calls] if isinstance(found, Batch) else [inputs]
    expected = [_eager(model, c) for c in calls]

    def each_call_matches() -> None:
        for call, outputs in zip(calls, expected):
            _matches(case, lowered(*call), outputs)

    each_call_matches()
    if isinstance(found, Batch):
        _between(case, model, lowered, found)
    if double.state.builds:
        build = double.state.last_build
        built = (build.optimization_level, build.workspace_bytes, build.tactic_sources)
        assert built == KNOBS_BUILT, f"a knob missed the builder: {built}"
        assert (tmp / "timing.cache").is_file(), "no timing cache was written"
    sizes = [e.streamable_bytes for e in lowered.report.engines]
    if not any(sizes):  # no engine, or no weight TensorRT streams (of two or more dims)
        try:
            lowered.weight_streaming_budget = 0.5
        except WeightStreamingError as e:
            assert "no engine of this module has streamable weights" in str(e), e
            return
        raise AssertionError("a budget was taken by a module without streamable weights")
    for budget in (0.5, 0, 1.0):
        lowered.weight_streaming_budget = budget
        assert lowered.weight_streaming_budget == sum(int(size * budget) for size in sizes), budget
        each_call_matches()


def replayed(module: Any, calls: list[tuple[torch.Tensor, ...]]) -> list[tuple[Any, str, Any]]:
    """What `module` does with each call's inputs: the outputs' type and leaves (a transformers
    ModelOutput is no tensor container torch.load takes), or the refusal's type and message."""
    done: list[tuple[Any, str, Any]] = []
    for inputs in calls:
        try:
            outputs = module(*inputs)
        except EngineInputError as e:
            done.append((inputs, type(e).__name__, str(e)))
            continue
        done.append((inputs, type(outputs).__name__, pytree.tree_leaves(outputs)))
    return done


# (b): one fresh process loads every artifact and replays the calls the saved module was given: the
# same outputs exactly, or the same refusal; it imports nothing of the tests but `summary`, so that
# nothing of the models' code is there.
FRESH_LOADS = (
    inspect.getsource(summary)
    + """
import json, sys, torch, torch.utils._pytree as pytree, trt_lower
failures = {}
for name, artifact, io in json.loads(sys.argv[1]):
    try:
        loaded = trt_lower.load(artifact, backend="onnxruntime")
        for inputs, kind, expected in torch.load(io, weights_only=True):
            try:
                actual = loaded(*inputs)
            except trt_lower.EngineInputError as e:
                actual = e
            assert type(actual).__name__ == kind, f"gives a {type(actual).__name__}, the saved module a {kind}"
            if isinstance(actual, Exception):
                assert str(actual) == expected, f"refuses with {actual}, the saved module with {expected}"
            else:
                torch.testing.assert_close(pytree.tree_leaves(actual), expected, rtol=0, atol=0, equal_nan=True)
    except Exception as e:
        failures[name] = summary(e)
print(json.dumps(failures))
"""
)


@dataclass
class Lowered:
    model: torch.nn.Module
    inputs: tuple[torch.Tensor, ...]
    batch: Batch | str  # (f)'s batch, or why the case has none
    module: Any = None  # the LoweredModule, or the exception lowering raised
    profiled: Any = None  # (f)'s LoweredModule with two profiles, or the exception lowering raised
    fresh_load: dict[str, str] = field(default_factory=dict)  # (b)'s failures, of "module" and "profiled"


def _fresh_loads(saved: dict[str, tuple[Path, Path]]) -> dict[str, str]:
    jobs = json.dumps([[name, str(artifact), str(io)] for name, (artifact, io) in saved.items()])
    done = subprocess.run([sys.executable, "-c", FRESH_LOADS, jobs], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        return dict.fromkeys(saved, f"the fresh process failed: {' '.join(done.stderr.strip().splitlines()[-1:])}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _selected(session: pytest.Session, test: Callable[..., None]) -> set[str]:
    """The cases this run selected of `test` (a -k selection lowers only those)."""
    return {
        str(item.callspec.params["name"])
        for item in session.items
        if isinstance(item, pytest.Function) and item.function is test
    }


def _attempt(make: Callable[[], Any]) -> Any:
    """What `make` returns, or the exception it raised (a step's failure, reported with the case)."""
    try:
        return make()
    except Exception as e:
        return e


def _lowered(name: str, steps: set[str]) -> tuple[Lowered, dict[str, list[tuple[torch.Tensor, ...]]]]:
    """The case lowered for the steps `steps` of "module" (a to e) and "profiled" (f), with the
    calls each of its lowered modules is to be saved with."""
    case = CASES[name]
    model, inputs = case.build(case.seed)
    made, calls = Lowered(model, inputs, batch(model, inputs)), {}
    if "module" in steps:
        made.module, calls["module"] = _attempt(lambda: _lower(case, model, inputs, verify=True)), [inputs]
    if "profiled" in steps and isinstance(found := made.batch, Batch):
        made.profiled = _attempt(lambda: _lower_profiled(case, model, found))
        if (note := _narrowed(made.profiled)) is not None:
            made.batch, made.profiled = f"no batch: {note}", None
        else:
            calls["profiled"] = found.replay()
    return made, calls


@pytest.fixture(scope="module")
def lowered_cases(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Lowered]:
    """Every selected case lowered (verify=True) and, where it has a batch, with (f)'s two
    profiles; each saved, and loaded again in one fresh process."""
    out, found, saved = tmp_path_factory.mktemp("artifacts"), {}, {}
    selected = {"module": _selected(request.session, test_a_lowering_keeps_every_property)}
    selected["profiled"] = _selected(request.session, test_a_lowering_with_two_profiles_keeps_them)
    for name in sorted(set().union(*selected.values())):
        found[name], calls = _lowered(name, {step for step, names in selected.items() if name in names})
        for step, replay in calls.items():
            module, path = getattr(found[name], step), out / f"{name}-{step}"
            if isinstance(module, Exception):
                continue
            try:
                trt_lower.save(module, path.with_suffix(".trtl"))
                torch.save(replayed(module, replay), path.with_suffix(".pt"))
                saved[f"{name}/{step}"] = (path.with_suffix(".trtl"), path.with_suffix(".pt"))
            except Exception as e:
                found[name].fresh_load[step] = f"save: {summary(e)}"
    for key, failure in (_fresh_loads(saved) if saved else {}).items():
        name, step = key.rsplit("/", 1)
        found[name].fresh_load[step] = failure
    return found


def _failed(name: str, model: torch.nn.Module, failures: list[str]) -> None:
    """Fail naming the case (the model, its seed, a fuzzer's program) and every step that broke."""
    if failures:
        case = CASES[name]
        program = f"\n{model.code}" if isinstance(model, Weighted) else ""
        pytest.fail(
            f"{name} (model {case.build.__name__}, seed {case.seed}):\n" + "\n".join(sorted(failures)) + program
        )


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_lowering_keeps_every_property(name: str, lowered_cases: dict[str, Lowered], tmp_path: Path) -> None:
    case, made = CASES[name], lowered_cases[name]
    if isinstance(made.module, Exception):
        _failed(name, made.model, [f"(a) lowering with verify=True raised {summary(made.module)}"])
    failures = []
    steps: dict[str, Callable[[], object]] = {
        "(a) verify": lambda: verifies_without_false_repairs(case, made.model, made.inputs, made.module),
        "(e) profile": lambda: profiles(case, made.model, made.inputs, made.module),
        "(d) weight-stripped load with the perturbed state_dict": lambda: loads_stripped_with_a_state_dict(
            case, made.model, made.inputs, made.module, tmp_path
        ),
        "(c) update_weights from a perturbed copy": lambda: takes_perturbed_weights(
            case, made.model, made.inputs, made.module
        ),
    }
    for step, check in steps.items():
        try:
            check()
        except Exception as e:
            failures.append(f"{step}: {summary(e)}")
    if "module" in made.fresh_load:
        failures.append(f"(b) save, then load in a fresh process: {made.fresh_load['module']}")
    _failed(name, made.model, failures)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_lowering_with_two_profiles_keeps_them(name: str, lowered_cases: dict[str, Lowered]) -> None:
    made = lowered_cases[name]
    if isinstance(made.batch, str):
        pytest.skip(f"(f) {made.batch}")
    if isinstance(made.profiled, Exception):
        _failed(name, made.model, [f"(f) lowering with two profiles raised {summary(made.profiled)}"])
    failures = []
    try:
        keeps_several_profiles(CASES[name], made.model, made.batch, made.profiled)
    except Exception as e:
        failures.append(f"(f) two profiles: {summary(e)}")
    if "profiled" in made.fresh_load:
        failures.append(f"(f) with two profiles, save, then load in a fresh process: {made.fresh_load['profiled']}")
    _failed(name, made.model, failures)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_tensorrt_path_keeps_knobs_streaming_and_profiles(
    name: str, trt_double: ModuleType, tmp_path: Path
) -> None:
    case = CASES[name]
    model, inputs = case.build(case.seed)
    try:
        streams_on_tensorrt(case, model, inputs, trt_double, tmp_path)
    except Exception as e:
        _failed(name, model, [f"(g) the TensorRT path: {summary(e)}"])


# -- each step fails on the fault it is there for --------------------------------------------------
@pytest.fixture(scope="module")
def cnn_lowered() -> tuple[Case, Example, Any]:
    case = CASES["cnn_batchnorm-seed0"]
    model, inputs = case.build(case.seed)
    return case, (model, inputs), _lower(case, model, inputs, verify=True)


@pytest.fixture(scope="module")
def cnn_batch(cnn_lowered: tuple[Case, Example, Any]) -> Batch:
    _, (model, inputs), _ = cnn_lowered
    found = batch(model, inputs)
    assert isinstance(found, Batch), found
    return found


@pytest.fixture(scope="module")
def cnn_profiled(cnn_lowered: tuple[Case, Example, Any], cnn_batch: Batch) -> Any:
    case, (model, _), _ = cnn_lowered
    return _lower_profiled(case, model, cnn_batch)


@pytest.mark.parametrize("name", [name for name, case in sorted(CASES.items()) if not case.exact])
def test_a_module_returning_zeros_fails_the_comparison(name: str) -> None:
    case = CASES[name]
    expected = _eager(*case.build(case.seed))
    with pytest.raises(AssertionError):
        _matches(case, pytree.tree_map(torch.zeros_like, expected), expected)


def test_step_a_fails_a_repair_of_right_engines_and_passes_a_true_one(monkeypatch: pytest.MonkeyPatch) -> None:
    case = Case(lambda seed: (Block().eval(), (torch.randn(8, 16),)), 0, {"min_block_size": 1})
    model, inputs = case.build(case.seed)
    lowered = _lower(case, model, inputs, verify=True)
    lowered.report.repairs.append(
        Repair("tanh", "aten.tanh.default", "", "", "engine_0", "ONNX Runtime", ["tanh"], 1.0, 0.0, "split")
    )
    with pytest.raises(AssertionError, match=r"1 repair\(s\) of engines that match eager: tanh"):
        verifies_without_false_repairs(case, model, inputs, lowered)

    miscompile.on_onnxruntime(monkeypatch, miscompile.Wrong("Tanh"))
    repaired = _lower(case, model, inputs, verify=True)
    assert repaired.report.repairs
    verifies_without_false_repairs(case, model, inputs, repaired)


def test_step_b_reports_outputs_and_refusals_that_differ(
    cnn_lowered: tuple[Case, Example, Any], cnn_batch: Batch, cnn_profiled: Any, tmp_path: Path
) -> None:
    """Wrong outputs; and a loaded module that lost (f)'s profiles: it runs the call between them."""
    _, (model, inputs), lowered = cnn_lowered
    trt_lower.save(lowered, tmp_path / "cnn.trtl")
    outputs = lowered(*inputs)
    torch.save(replayed(lowered, [inputs]), tmp_path / "right.pt")
    torch.save([(inputs, "Tensor", [outputs.clone().index_fill_(-1, torch.tensor([3]), 0.0)])], tmp_path / "wrong.pt")
    one_range = trt_lower.lower_to_trt(model, cnn_batch.lowering()["inputs"], backend="onnxruntime", verify=False)
    trt_lower.save(one_range, tmp_path / "one_range.trtl")
    torch.save(replayed(cnn_profiled, cnn_batch.replay()), tmp_path / "profiled.pt")
    found = _fresh_loads(
        {
            "right": (tmp_path / "cnn.trtl", tmp_path / "right.pt"),
            "wrong": (tmp_path / "cnn.trtl", tmp_path / "wrong.pt"),
            "lost profiles": (tmp_path / "one_range.trtl", tmp_path / "profiled.pt"),
        }
    )
    assert sorted(found) == ["lost profiles", "wrong"] and "Tensor-likes are not equal" in found["wrong"]
    assert "gives a Tensor, the saved module a EngineInputError" in found["lost profiles"]


def test_step_c_fails_an_update_that_keeps_the_old_weights(
    cnn_lowered: tuple[Case, Example, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    case, (model, inputs), lowered = cnn_lowered
    monkeypatch.setattr(type(lowered), "update_weights", lambda self, source: None)
    with pytest.raises(AssertionError, match="not close"):
        takes_perturbed_weights(case, model, inputs, lowered)


def test_step_d_fails_a_load_that_keeps_the_saved_weights(
    cnn_lowered: tuple[Case, Example, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    case, (model, inputs), lowered = cnn_lowered
    monkeypatch.setattr(trt_lower, "load", lambda path, **settings: lowered)
    with pytest.raises(AssertionError, match="not close"):
        loads_stripped_with_a_state_dict(case, model, inputs, lowered, tmp_path)


def test_step_e_fails_a_profile_that_leaves_out_an_engine(
    cnn_lowered: tuple[Case, Example, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    case, (model, inputs), lowered = cnn_lowered
    measure = importlib.import_module("trt_lower.profile.measure")
    real = measure.profile

    def engines_left_out(*args: Any, **kwargs: Any) -> Any:
        found = real(*args, **kwargs)
        return dataclasses.replace(found, rows=tuple(r for r in found.rows if r.engine is None))

    monkeypatch.setattr(measure, "profile", engines_left_out)
    with pytest.raises(AssertionError, match=r"no row for \['engine_0'\]"):
        profiles(case, model, inputs, lowered)


def test_step_f_fails_a_module_that_runs_a_call_between_the_profiles(
    cnn_lowered: tuple[Case, Example, Any], cnn_batch: Batch, cnn_profiled: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    case, (model, _), _ = cnn_lowered
    monkeypatch.setattr(ProfileChoice, "__call__", lambda self, shapes: 0)  # every call on the first profile
    with pytest.raises(AssertionError, match=r"the call at leading size 4, between the profiles, ran"):
        keeps_several_profiles(case, model, cnn_batch, cnn_profiled)


def test_step_g_fails_a_call_on_the_wrong_profile(
    cnn_lowered: tuple[Case, Example, Any], trt_double: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    case, (model, inputs), _ = cnn_lowered
    real = ProfileChoice.__call__
    monkeypatch.setattr(ProfileChoice, "__call__", lambda self, shapes: 1 - real(self, shapes))
    with pytest.raises(EngineInputError, match=r"setInputShape: input_1 \(2, 3, 16, 16\) is outside the optimization"):
        streams_on_tensorrt(case, model, inputs, trt_double, tmp_path)


def test_step_g_fails_a_build_without_the_knobs(
    cnn_lowered: tuple[Case, Example, Any], trt_double: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    case, (model, inputs), _ = cnn_lowered
    real = BuildOptions.of
    monkeypatch.setattr(BuildOptions, "of", lambda settings: dataclasses.replace(real(settings), optimization_level=3))
    with pytest.raises(AssertionError, match="a knob missed the builder"):
        streams_on_tensorrt(case, model, inputs, trt_double, tmp_path)


def test_step_g_fails_a_budget_that_drops_the_streamed_weights(
    cnn_lowered: tuple[Case, Example, Any], trt_double: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    case, (model, inputs), _ = cnn_lowered
    engine_module = importlib.import_module("trt_lower.runtime.trt_module").TRTEngineModule
    real = engine_module.set_weight_streaming_budget

    def dropping(self: Any, budget: int | None) -> None:
        real(self, budget)
        initializers = self.engine._segment.model.graph.initializer  # the double's engine: zero what streams
        self.engine._refit({t.name: np.zeros(t.dims, np.float32) for t in initializers if len(t.dims) >= 2})

    monkeypatch.setattr(engine_module, "set_weight_streaming_budget", dropping)
    with pytest.raises(AssertionError, match="not close"):
        streams_on_tensorrt(case, model, inputs, trt_double, tmp_path)
