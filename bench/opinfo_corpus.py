"""The OpInfo sweep: PyTorch's own OpInfo sample inputs (`op_db`) as an independent test corpus.

Shared by tests/test_opinfo_sweep.py (capped, in CI) and bench/opinfo_sweep.py (the table, a full
run, JSON). For every covered OpInfo and each of its sample inputs (float32, and int64 where the
OpInfo has int64 samples), a tiny module calling `op(sample.input, *sample.args, **sample.kwargs)`
is lowered with `lower_to_trt(backend="onnxruntime", require_full=True, min_block_size=1)`, run,
and compared with eager PyTorch. Each sample ends as one of:

  passed        the lowered module ran and matched eager
  refused       a capability check (or the splitter's dtype check) refused a node, with a reason
  failed        wrong answer ("wrong"), or ConversionError, EngineBuildError, ONNX Runtime error,
                any other exception ("crash")
  uncapturable  torch.export cannot capture the sample (CaptureError), or the captured program
                run by PyTorch itself already differs from eager (a decomposition bug) - not counted
  not_covered   the captured graph holds an op with no converter at all (or no op) - not counted
  skipped       eager PyTorch raises on the sample, or its output is random (two eager runs
                differ), complex, sparse or not tensors                          - not counted

Pass rate = passed / (passed + failed): refusals are principled "no", not answers.

Which OpInfos are covered. An OpInfo is covered when at least one of its samples is: its
captured graph (after trt_lower's decompositions) has at least one node and a converter for every
node. That is decided by capturing the samples; to avoid capturing all ~700 OpInfos, a cheap
eager pre-filter picks the candidates: run the float32 samples eagerly under a dispatch mode
recording the ATen overloads they reach, and keep the OpInfo if (a) its name / aten_name / an
alias names a packet that has a converter, or (b) every recorded overload has a converter, is
decomposed at capture (trt_lower's decomposition table), or is one export drops. The pre-filter
only narrows what is captured; coverage itself is always read from the captured graph.
(`exhaustive=True`, bench --exhaustive, skips the pre-filter, to check it.)

Comparison. Floating outputs compare with the looser of rtol=1e-4/atol=1e-5 and the loosest
float32 tolerance the OpInfo declares for CPU tests (toleranceOverride / precisionOverride in its
decorators): those are tolerances between two CPU implementations, like ours. Integer and bool
outputs compare exactly; NaNs compare equal; dtypes and shapes must match. Two things torch
leaves unspecified are not compared: the contents of torch.empty and kin (UNSPECIFIED_VALUES:
shape and dtype only), and which index topk/sort/kthvalue/median/mode return among equal values
(_TIED_INDICES: the indices must select the same input elements as eager's).

Batching. A capture costs ~0.5 s of fixed overhead (run_decompositions), so samples are lowered
in batches of `batch_size` (across OpInfos and dtypes): one module whose child `s{k}` runs sample
k, lowered with require_full=False; every node's sample is known (inputs by position, nodes by
nn_module_stack). A sample with a node that has no converter or that a capability refuses is
classified from the captured graph (the splitter's own oracle, `unsupported_reason`); a sample
with a node that fell back for another reason (a converter or engine failure), or with a wrong
answer, is lowered again alone with require_full=True, and only that lowering marks a sample
failed or uncapturable. A batch that raises is split (the samples the error names go alone, else
halves). A sample whose graph has an unconvertible node with a non-tensor result (.item()'s
scalar, which the splitter would take for a size) is classified right after the batch's capture
and the batch lowered without it. lower_to_trt's retries are bounded by the node count, so a
converter that keeps failing ends as a crash, not a hang. `batch_size=1` lowers every sample
alone, as the corpus is defined.
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import operator
import re
import traceback
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence, cast

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_unflatten

import converters
import trt_lower
from converters.core.target import DEFAULT, TrtTarget
from splitter.support import unsupported_reason
from trt_lower.capture import aten_graph as capture
from trt_lower.capture.decompositions import decomposition_table

DEFAULT_RTOL = 1e-4
DEFAULT_ATOL = 1e-5
DEFAULT_DTYPES = (torch.float32, torch.int64)
COUNTED = ("passed", "refused", "failed")
OUTCOMES = COUNTED + ("uncapturable", "not_covered", "skipped")

aten = torch.ops.aten
# Overloads export removes or rewrites on its own, so they never reach a converter.
_DROPPED_BY_EXPORT = frozenset({aten.lift_fresh.default, aten.detach.default, aten.alias.default})


@dataclass
class SampleResult:
    op: str
    dtype: str
    index: int
    outcome: str
    detail: str = ""
    kind: str = ""  # for failed: "wrong" (mismatch) or "crash" (an exception)


@dataclass
class OpRow:
    op: str
    samples: int = 0  # counted ones: passed + refused + failed
    passed: int = 0
    refused: int = 0
    failed: int = 0
    uncapturable: int = 0
    not_covered: int = 0
    skipped: int = 0
    refusals: dict[str, int] = field(default_factory=dict)

    @property
    def pass_rate(self) -> float | None:
        n = self.passed + self.failed
        return self.passed / n if n else None


# -- the corpus ------------------------------------------------------------------------------
def op_db() -> list[Any]:
    from torch.testing._internal.common_methods_invocations import op_db as db

    return list(db)


def full_name(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def select(ops: Iterable[Any], patterns: Sequence[str] | None) -> list[Any]:
    """OpInfos whose name or full name matches one of `patterns` (fnmatch), all if none given."""
    ops = list(ops)
    if not patterns:
        return ops
    return [o for o in ops if any(fnmatch.fnmatchcase(n, p) for p in patterns for n in (o.name, full_name(o)))]


def tolerances(op: Any) -> tuple[float, float]:
    """(rtol, atol) for float outputs: ours, loosened to the OpInfo's float32 CPU overrides."""
    from torch.testing._internal.common_device_type import precisionOverride, toleranceOverride

    rtol, atol = DEFAULT_RTOL, DEFAULT_ATOL
    for info in op.decorators:
        if getattr(info, "device_type", None) not in (None, "cpu"):
            continue
        if getattr(info, "cls_name", None) == "TestConsistency" or "mps" in (getattr(info, "test_name", "") or ""):
            continue  # the MPS suite's comparisons
        for dec in getattr(info, "decorators", [info]):
            if isinstance(dec, toleranceOverride) and torch.float32 in dec.d:
                rtol, atol = max(rtol, dec.d[torch.float32].rtol), max(atol, dec.d[torch.float32].atol)
            elif isinstance(dec, precisionOverride) and torch.float32 in dec.d:
                atol = max(atol, float(dec.d[torch.float32]))
    return rtol, atol


# -- one sample as a module --------------------------------------------------------------------
_Call = tuple[Any, tuple[Any, ...], dict[str, Any]]  # a sample's (input, args, kwargs)


class _SampleModule(torch.nn.Module):
    """op(input, *args, **kwargs) with the sample's tensors as forward inputs, the rest constant."""

    def __init__(self, fn: Callable[..., Any], leaves: list[Any], spec: Any) -> None:
        super().__init__()
        self.fn = fn
        self.slots = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
        # The tensors are forward's arguments, not held here (they would become constants).
        self.leaves = [None if isinstance(x, torch.Tensor) else x for x in leaves]
        self.spec = spec

    def arguments(self, tensors: Sequence[torch.Tensor]) -> _Call:
        leaves = list(self.leaves)
        for slot, t in zip(self.slots, tensors):
            leaves[slot] = t
        return cast(_Call, tree_unflatten(leaves, self.spec))  # `spec` is the flattened (input, args, kwargs)

    def forward(self, *tensors: torch.Tensor) -> Any:
        inp, args, kwargs = self.arguments(tensors)
        return self.fn(inp, *args, **kwargs)


@dataclass
class _Prepared:
    key: int  # unique in the sweep: the batch child s{key} runs it
    op: str
    dtype: str
    index: int  # in the OpInfo's samples of this dtype
    module: _SampleModule
    tensors: list[torch.Tensor]
    expected: Any
    rtol: float
    atol: float
    values: bool  # False: only shapes and dtypes are specified (torch.empty and kin)


class _Batch(torch.nn.Module):
    """Children s{key} each run one sample; forward takes all their tensors in a row."""

    def __init__(self, samples: Sequence[_Prepared]) -> None:
        super().__init__()
        self.counts = []
        for p in samples:
            setattr(self, f"s{p.key}", p.module)
            self.counts.append((f"s{p.key}", len(p.tensors)))

    def forward(self, *tensors: torch.Tensor) -> tuple[Any, ...]:
        outs, at = [], 0
        for name, n in self.counts:
            outs.append(getattr(self, name)(*tensors[at : at + n]))
            at += n
        return tuple(outs)


def _clones(tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    return [t.detach().clone() for t in tensors]


def _leaves(out: Any) -> list[Any]:
    return tree_flatten(out)[0]


def _same(actual: Any, expected: Any, rtol: float, atol: float, values: bool = True) -> str | None:
    """None if `actual` matches `expected`, else what differs."""
    a, e = _leaves(actual), _leaves(expected)
    if len(a) != len(e):
        return f"{len(a)} outputs, expected {len(e)}"
    for i, (x, y) in enumerate(zip(a, e)):
        where = f"output {i}: " if len(e) > 1 else ""
        if isinstance(y, torch.Tensor):
            if not isinstance(x, torch.Tensor):
                return f"{where}got {type(x).__name__}, expected a tensor"
            if not values:
                x, y = torch.zeros_like(x), torch.zeros_like(y)
            exact = not (y.dtype.is_floating_point or y.dtype.is_complex)
            try:
                torch.testing.assert_close(x, y, rtol=0 if exact else rtol, atol=0 if exact else atol, equal_nan=True)
            except AssertionError as err:
                return where + " ".join(str(err).split())[:400]
        elif x != y:
            return f"{where}got {x!r}, expected {y!r}"
    return None


def _arg(args: Sequence[Any], kwargs: dict[str, Any], i: int, name: str, default: Any) -> Any:
    return args[i] if len(args) > i else kwargs.get(name, default)


# OpInfos whose index output is unspecified among equal values (torch documents no tie order):
# name -> (args, kwargs) -> (which output holds indices, dim, keepdim). Their indices are
# checked by what they select: input.gather(dim, indices) must equal what eager's select.
_TIED_INDICES: dict[str, Callable[[Sequence[Any], dict[str, Any]], tuple[int, int, bool] | None]] = {
    "topk": lambda a, k: (1, _arg(a, k, 1, "dim", -1), True),
    "kthvalue": lambda a, k: (1, _arg(a, k, 1, "dim", -1), bool(_arg(a, k, 2, "keepdim", False))),
    "sort": lambda a, k: (1, a[0] if a and isinstance(a[0], int) else k.get("dim", -1), True),
    "argsort": lambda a, k: (0, a[0] if a and isinstance(a[0], int) else k.get("dim", -1), True),
    "median": lambda a, k: (
        (1, _arg(a, k, 0, "dim", 0), bool(_arg(a, k, 1, "keepdim", False))) if a or "dim" in k else None
    ),
    "nanmedian": lambda a, k: (
        (1, _arg(a, k, 0, "dim", 0), bool(_arg(a, k, 1, "keepdim", False))) if a or "dim" in k else None
    ),
    "mode": lambda a, k: (1, _arg(a, k, 0, "dim", -1), bool(_arg(a, k, 1, "keepdim", False))),
}


def _selected(x: torch.Tensor, dim: int, index: torch.Tensor, keepdim: bool) -> torch.Tensor:
    if x.dim() == 0:
        return x.expand(index.shape)
    return x.gather(dim, index if keepdim else index.unsqueeze(dim))


def _check(p: _Prepared, actual: Any) -> str | None:
    """None if the lowered sample's `actual` output is right."""
    tied = _TIED_INDICES.get(p.op)
    inp, args, kwargs = p.module.arguments(p.tensors)
    spec = tied(args, kwargs) if tied is not None and isinstance(inp, torch.Tensor) else None
    if spec is None:
        return _same(actual, p.expected, p.rtol, p.atol, p.values)
    at, dim, keepdim = spec
    a, e = list(_leaves(actual)), list(_leaves(p.expected))
    if (
        len(a) != len(e)
        or not isinstance(a[at], torch.Tensor)
        or a[at].shape != e[at].shape
        or a[at].dtype != e[at].dtype
    ):
        return _same(actual, p.expected, p.rtol, p.atol, p.values)
    try:
        a[at], e[at] = _selected(inp, dim, a[at], keepdim), _selected(inp, dim, e[at], keepdim)
    except (RuntimeError, IndexError) as err:  # an index out of range
        return f"output {at} (indices): {err}"
    return _same(a, e, p.rtol, p.atol, p.values)


# OpInfos whose outputs have unspecified contents: only shape and dtype are compared.
UNSPECIFIED_VALUES = frozenset(
    {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided"}
)


class _Recorder(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch's class is untyped
    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.ops: set[Any] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops.add(func)
        return func(*args, **(kwargs or {}))


def _prepare(
    op: Any, dtype: torch.dtype, max_samples: int | None, keys: Iterator[int], recorder: _Recorder | None = None
) -> tuple[list[_Prepared], list[SampleResult]]:
    """The OpInfo's first `max_samples` samples with their eager results; skips as results."""
    name, dname = full_name(op), str(dtype).removeprefix("torch.")
    rtol, atol = tolerances(op)
    prepared: list[_Prepared] = []
    skipped: list[SampleResult] = []
    torch.manual_seed(0)
    try:
        samples = op.sample_inputs("cpu", dtype, requires_grad=False)
        for i, sample in enumerate(samples):
            if max_samples is not None and i >= max_samples:
                break
            leaves, spec = tree_flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))
            tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
            module = _SampleModule(op, leaves, spec)
            values = op.name not in UNSPECIFIED_VALUES
            try:
                with recorder if recorder is not None else contextlib.nullcontext():
                    expected = module(*_clones(tensors))
                again = module(*_clones(tensors))
            except Exception as e:
                skipped.append(SampleResult(name, dname, i, "skipped", f"eager raises {type(e).__name__}"))
                continue
            out = _leaves(expected)
            if not out or not all(isinstance(x, (torch.Tensor, int, float, bool)) for x in out):
                skipped.append(SampleResult(name, dname, i, "skipped", "output is not tensors"))
            elif _same(again, expected, 0.0, 0.0, values) is not None:
                skipped.append(SampleResult(name, dname, i, "skipped", "random output (two eager runs differ)"))
            elif any(
                x.is_complex() or x.layout != torch.strided
                for x in tensors + [t for t in out if isinstance(t, torch.Tensor)]
            ):
                skipped.append(SampleResult(name, dname, i, "skipped", "complex or sparse tensors"))
            else:
                prepared.append(_Prepared(next(keys), name, dname, i, module, tensors, expected, rtol, atol, values))
    except Exception as e:  # the OpInfo's sample generator itself
        skipped.append(SampleResult(name, dname, -1, "skipped", f"sample_inputs raises {type(e).__name__}: {e}"))
    return prepared, skipped


# -- coverage pre-filter -----------------------------------------------------------------------
def _packet_names() -> set[str]:
    return {op.overloadpacket.__name__ for op in converters.supported_ops()}


def _named_by_converter(op: Any) -> bool:
    names = {op.name, op.aten_name or "", *(getattr(a, "name", "") for a in op.aliases)}
    names |= {n.split(".")[-1] for n in list(names)}
    return bool(names & _packet_names())


def _reaches_only_convertible(recorded: set[Any]) -> bool:
    supported, table = converters.supported_ops(), decomposition_table()
    return bool(recorded) and all(o in supported or o in table or o in _DROPPED_BY_EXPORT for o in recorded)


# -- lowering ----------------------------------------------------------------------------------
class _Screened(Exception):
    """Raised right after a batch's capture: some sample has an op with no converter that the
    splitter would not keep eager (an int/float result such as .item()'s, which it treats as a
    size), so those samples are classified from the graph and the rest lowered without them."""

    def __init__(self, verdicts: dict[int, tuple[str, str]]) -> None:
        super().__init__("samples to take out first")
        self.verdicts = verdicts


class _Stuck(RuntimeError):
    """lower_to_trt went on retrying conversions past one retry per node."""


def _unconvertible_scalar(node: torch.fx.Node) -> bool:
    return (
        node.op == "call_function"
        and node.target is not operator.getitem
        and converters.lookup(node.target) is None
        and not isinstance(node.meta.get("val"), torch.Tensor)
    )


@contextlib.contextmanager
def _watch(group: Sequence[_Prepared]) -> Iterator[list[Any]]:
    """Within: the programs lower_to_trt captures are recorded (so a refusal needs no second
    capture), a batch is screened (_Screened), and conversion retries are bounded (_Stuck)."""
    import trt_lower.api as api

    programs: list[Any] = []
    # api's own import of convert, patched where lower_to_trt looks it up (not re-exported).
    export, convert = capture.export, api.convert  # type: ignore[attr-defined]
    budget = [0]

    def spy(*args: Any, **kwargs: Any) -> Any:
        program = export(*args, **kwargs)
        programs.append(program)
        budget[0] = len(program.graph.nodes) + 3
        if len(group) > 1 and any(_unconvertible_scalar(n) for n in program.graph.nodes):
            gm = capture.graph_module(program)  # without export's asserts (no converter either)
            if any(_unconvertible_scalar(n) for n in gm.graph.nodes):
                verdicts = _graph_verdicts(gm, group)
                if verdicts is not None and any(kind != "ok" for kind, _ in verdicts.values()):
                    raise _Screened(verdicts)
        return program

    def bounded(*args: Any, **kwargs: Any) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise _Stuck("lower_to_trt keeps retrying the conversion (a retry per node exceeded)")
        return convert(*args, **kwargs)

    capture.export = spy
    api.convert = bounded  # type: ignore[attr-defined]  # called once per conversion attempt
    try:
        yield programs
    finally:
        capture.export = export
        api.convert = convert  # type: ignore[attr-defined]


def _owners(gm: torch.fx.GraphModule, group: Sequence[_Prepared]) -> dict[torch.fx.Node, int]:
    """FX node -> key of the sample it belongs to: inputs by position, other nodes by the batch
    child (s{key}) in their nn_module_stack, or else (export's copy_ back into a mutated input)
    by the first of their inputs that has an owner."""
    slots = [p.key for p in group for _ in p.tensors]
    owners: dict[torch.fx.Node, int] = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) == len(slots):
        owners.update(zip(placeholders, slots))
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        for path, _ in (node.meta.get("nn_module_stack") or {}).values():
            head = str(path).split(".")[0]
            if head.startswith("s") and head[1:].isdigit():
                owners[node] = int(head[1:])
                break
        else:
            owner = next((owners[a] for a in node.all_input_nodes if a in owners), None)
            if owner is not None:
                owners[node] = owner
    return owners


def _graph_verdicts(gm: torch.fx.GraphModule, group: Sequence[_Prepared]) -> dict[int, tuple[str, str]] | None:
    """Per sample key: ("not_covered" | "refused", reason) or ("ok", ""); None if a node can't be
    traced to its sample."""
    keys = [p.key for p in group]
    owners = _owners(gm, group) if len(keys) > 1 else {}
    missing: dict[int, str] = {}
    refused: dict[int, str] = {}
    has_node: set[int] = set()
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        k = owners.get(node) if len(keys) > 1 else keys[0]
        if k not in keys:
            return None
        has_node.add(k)
        if converters.lookup(node.target) is None:
            missing.setdefault(k, f"no converter for {node.target}")
            continue
        reason = unsupported_reason(node, TrtTarget(DEFAULT), frozenset())
        if reason is not None:
            refused.setdefault(k, f"{node.target}: {reason}")
    verdict = {}
    for k in keys:
        if k in missing:
            verdict[k] = ("not_covered", missing[k])
        elif k in refused:
            verdict[k] = ("refused", refused[k])
        elif k in has_node:
            verdict[k] = ("ok", "")
        else:
            verdict[k] = ("not_covered", "no op in the captured graph")
    return verdict


def _crash(e: BaseException) -> str:
    frame = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    at = f" (at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno})" if frame else ""
    return f"{type(e).__name__}: {' '.join(str(e).split())[:300]}{at}"


class Sweep:
    """Runs the samples of OpInfos. `results` holds every sample of the covered OpInfos,
    `covered` their names, `uncovered` the candidates none of whose samples was covered."""

    def __init__(
        self,
        *,
        dtypes: Sequence[torch.dtype] = DEFAULT_DTYPES,
        max_samples: int | None = 8,
        batch_size: int = 48,
        exhaustive: bool = False,
    ) -> None:
        self.dtypes = tuple(dtypes)
        self.max_samples = max_samples
        self.batch_size = max(1, batch_size)
        self.exhaustive = exhaustive
        self.results: list[SampleResult] = []
        self.covered: list[str] = []
        self.uncovered: list[str] = []
        self.lowerings = 0  # lower_to_trt calls: what the sweep's time goes to
        self.splits: dict[str, int] = {}  # why batches were halved
        self._keys = iter(range(1 << 62))
        self._done: dict[int, SampleResult] = {}

    def run(self, ops: Iterable[Any], progress: Callable[[str], None] | None = None) -> None:
        """Prepare every candidate OpInfo's samples, lower them in batches, sort out coverage."""
        pending: list[_Prepared] = []
        per_op: dict[str, tuple[list[SampleResult], list[_Prepared]]] = {}
        for op in ops:
            skipped, prepared = self._prepare_op(op)
            if skipped or prepared:
                per_op[full_name(op)] = (skipped, prepared)
                pending += prepared
        for at in range(0, len(pending), self.batch_size):
            self._lower(pending[at : at + self.batch_size])
            if progress is not None:
                progress(
                    f"{min(at + self.batch_size, len(pending))}/{len(pending)} samples, {self.lowerings} lowerings"
                )
        for name, (skipped, prepared) in per_op.items():
            results = skipped + [self._done[p.key] for p in prepared]
            if any(r.outcome in COUNTED for r in results):
                self.covered.append(name)
                self.results += sorted(results, key=lambda r: (r.dtype, r.index))
            elif prepared:
                self.uncovered.append(name)

    def _prepare_op(self, op: Any) -> tuple[list[SampleResult], list[_Prepared]]:
        supported = op.supported_dtypes("cpu")
        if torch.float32 not in supported:
            return [], []
        recorder = _Recorder()
        skipped, prepared = [], []
        for dtype in self.dtypes:
            if dtype not in supported:
                continue
            p, s = _prepare(op, dtype, self.max_samples, self._keys, recorder if dtype == torch.float32 else None)
            if (
                dtype == torch.float32
                and not self.exhaustive
                and not (_named_by_converter(op) or _reaches_only_convertible(recorder.ops))
            ):
                return [], []
            skipped += s
            prepared += p
        return skipped, prepared

    def _result(self, p: _Prepared, outcome: str, detail: str = "", kind: str = "") -> None:
        self._done[p.key] = SampleResult(p.op, p.dtype, p.index, outcome, detail, kind)

    def _retry(
        self,
        group: list[_Prepared],
        why: str,
        error: BaseException | None = None,
        gm: torch.fx.GraphModule | None = None,
    ) -> None:
        """A batch went wrong: lower the samples the error names alone and the others together,
        or, when it names none, each half."""
        self.splits[why] = self.splits.get(why, 0) + 1
        culprits = _culprits(error, gm, group) if error is not None and gm is not None else set()
        if culprits and len(culprits) < len(group):
            for p in group:
                if p.key in culprits:
                    self._lower([p])
            return self._lower([p for p in group if p.key not in culprits])
        half = len(group) // 2
        self._lower(group[:half])
        self._lower(group[half:])

    def _lower(self, group: list[_Prepared]) -> None:
        """Lower `group`. A sample alone is lowered as the corpus defines it (require_full=True),
        and only that decides that it failed or is uncapturable. A batch is lowered letting
        refused nodes fall back to eager (so one capture serves every sample): a sample with a
        node the graph shows refused or without converter is classified from the graph, one
        with a node that fell back for any other reason (a converter or engine failure) is
        lowered alone, and the others' outputs are compared."""
        if not group:
            return
        solo = len(group) == 1
        module = _Batch(group)
        inputs = [t for p in group for t in _clones(p.tensors)]
        self.lowerings += 1
        with _watch(group) as programs:
            try:
                lowered = trt_lower.lower_to_trt(
                    module, inputs, backend="onnxruntime", require_full=solo, min_block_size=1
                )
            except _Screened as e:
                for p in group:
                    if e.verdicts[p.key][0] != "ok":
                        self._result(p, *e.verdicts[p.key])
                return self._lower([p for p in group if e.verdicts[p.key][0] == "ok"])
            except trt_lower.CaptureError as e:
                if not solo:
                    return self._retry(group, "capture")
                return self._result(group[0], "uncapturable", " ".join(str(e).split())[:300])
            except trt_lower.UnsupportedOpsError as e:  # solo only
                verdicts = _graph_verdicts(capture.graph_module(programs[-1]), group) if programs else None
                kind, reason = verdicts[group[0].key] if verdicts else ("ok", "")
                if kind == "ok":  # lower_to_trt refused what the capability checks accept
                    return self._result(group[0], "failed", f"refused, but no node is: {_crash(e)}", "crash")
                return self._result(group[0], kind, reason)
            except Exception as e:  # ConversionError, EngineBuildError, ONNX Runtime, anything
                gm = capture.graph_module(programs[-1]) if programs else None
                if not solo:
                    return self._retry(group, type(e).__name__, e, gm)
                verdicts = _graph_verdicts(gm, group) if gm is not None else None
                if verdicts is not None and verdicts[group[0].key][0] == "not_covered":
                    # An op without converter that the splitter put in an engine anyway.
                    kind, reason = verdicts[group[0].key]
                    return self._result(group[0], kind, f"{reason} (lowering raised {_crash(e)})")
                return self._result(group[0], "failed", _crash(e), "crash")
        gm = capture.graph_module(programs[-1])
        verdicts = _graph_verdicts(gm, group)
        if verdicts is None:  # solo: never (every node is the sample's)
            return self._retry(group, "node not traced to a sample")
        fell_back = {f.node for f in lowered.report.fallbacks}
        owners = _owners(gm, group) if fell_back else {}
        fallen = {owners.get(n) for n in gm.graph.nodes if n.name in fell_back}
        if None in fallen:
            return self._retry(group, "fallback not traced to a sample")
        ok = [p for p in group if verdicts[p.key][0] == "ok"]
        for p in group:
            if verdicts[p.key][0] != "ok":
                self._result(p, *verdicts[p.key])
        # A node that fell back though no capability refused it: a converter or engine failure.
        again = [p for p in ok if p.key in fallen]
        compared = [p for p in ok if p.key not in fallen]
        if not compared:
            for p in again:
                self._lower([p])
            return None
        try:
            with torch.no_grad():
                actual = lowered(*inputs)
        except Exception as e:
            if not solo:
                return self._retry(ok, "running", e, gm)
            return self._result(group[0], "failed", f"running: {_crash(e)}", "crash")
        outputs = {p.key: out for p, out in zip(group, actual)}
        for p in compared:
            out = outputs[p.key]
            try:
                diff = _check(p, out)
            except Exception as e:  # the comparison itself, e.g. outputs of another structure
                diff = f"comparing: {_crash(e)}"
            if diff is None:
                self._result(p, "passed")
            elif not solo:
                again.append(p)  # a wrong answer counts only when the sample alone gives it too
            elif _captured_wrong(programs[-1], inputs, p):
                self._result(p, "uncapturable", f"the captured program itself differs from eager: {diff}")
            else:
                self._result(p, "failed", diff, "wrong")
        for p in again:
            self._lower([p])


def _captured_wrong(program: Any, inputs: Sequence[torch.Tensor], p: _Prepared) -> bool:
    """Does the captured (and decomposed) program, run by PyTorch, already disagree with eager?
    Then capture changed the result (a PyTorch decomposition bug), not a converter."""
    try:
        with torch.no_grad():
            out = program.module()(*_clones(inputs))
        return _check(p, out[0]) is not None
    except Exception:
        return False


def _culprits(error: BaseException, gm: torch.fx.GraphModule, group: Sequence[_Prepared]) -> set[int]:
    """The samples whose nodes `error` names (ConversionError.node_name, EngineBuildError.nodes,
    'node/OnnxOp' names in ONNX Runtime's messages)."""
    names = set(getattr(error, "nodes", None) or ())
    if getattr(error, "node_name", None):
        names.add(error.node_name)  # type: ignore[attr-defined]
    names |= set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)/[A-Za-z]", str(error)))
    owners = _owners(gm, group)
    return {owners[node] for node in gm.graph.nodes if node.name in names and node in owners}


# -- reporting ---------------------------------------------------------------------------------
def rows(results: Iterable[SampleResult]) -> list[OpRow]:
    by_op: dict[str, OpRow] = {}
    for r in results:
        row = by_op.setdefault(r.op, OpRow(r.op))
        setattr(row, r.outcome, getattr(row, r.outcome) + 1)
        if r.outcome in COUNTED:
            row.samples += 1
        if r.outcome == "refused":
            row.refusals[r.detail] = row.refusals.get(r.detail, 0) + 1
    return sorted(by_op.values(), key=lambda row: row.op)


def totals(table: Sequence[OpRow]) -> OpRow:
    total = OpRow("TOTAL")
    for row in table:
        for f in ("samples", "passed", "refused", "failed", "uncapturable", "not_covered", "skipped"):
            setattr(total, f, getattr(total, f) + getattr(row, f))
    return total


def format_table(table: Sequence[OpRow]) -> str:
    def rate(row: OpRow) -> str:
        return "-" if row.pass_rate is None else f"{100 * row.pass_rate:.1f}%"

    width = max([len(r.op) for r in table] + [8])
    head = (
        f"{'op':<{width}}  {'samples':>7} {'passed':>6} {'refused':>7} {'failed':>6} {'pass rate':>9}"
        f"   {'uncapt.':>7} {'no conv.':>8} {'skipped':>7}"
    )
    lines = [head, "-" * len(head)]
    total = totals(table)
    for row in [*table, total]:
        if row is total:
            lines.append("-" * len(head))
        lines.append(
            f"{row.op:<{width}}  {row.samples:>7} {row.passed:>6} {row.refused:>7} {row.failed:>6} "
            f"{rate(row):>9}   {row.uncapturable:>7} {row.not_covered:>8} {row.skipped:>7}"
        )
    return "\n".join(lines)


def to_json(results: Sequence[SampleResult], table: Sequence[OpRow]) -> dict[str, Any]:
    total = totals(table)
    return {
        "pass_rate": total.pass_rate,
        "totals": {**asdict(total), "pass_rate": total.pass_rate},
        "ops": [{**asdict(r), "pass_rate": r.pass_rate} for r in table],
        "samples": [asdict(r) for r in results],
    }


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence the lowering's fallback warnings and torch's export chatter during a sweep."""
    loggers = [logging.getLogger(n) for n in ("trt_lower", "torch", "torch._dynamo", "torch.export")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def sweep(ops: Iterable[Any] | None = None, *, progress: Callable[[str], None] | None = None, **options: Any) -> Sweep:
    """Run the sweep over `ops` (default: all of op_db); options go to Sweep."""
    runner = Sweep(**options)
    with quiet():
        runner.run(op_db() if ops is None else ops, progress)
    return runner
