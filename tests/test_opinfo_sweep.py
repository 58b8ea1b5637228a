"""PyTorch's OpInfo samples as an independent corpus for the converters (issue 3, item 2).

Every covered OpInfo's first TRT_LOWER_OPINFO_SAMPLES (default 8) samples per dtype (float32,
int64) are lowered with require_full=True, run on ONNX Runtime and compared with eager; what
"covered", "refused" and the tolerances mean is in bench/opinfo_corpus.py, shared with
bench/opinfo_sweep.py (the per-op table, a full run: --full).
"""

from __future__ import annotations

import math
import os
from typing import Any

import opinfo_corpus as corpus
import pytest
import torch
import torch.nn.functional as F
from harness import Fn, check_onnx
from support_audit import SupportAudit
from torch.utils._python_dispatch import TorchDispatchMode

import trt_lower
from trt_lower.runtime import bindings

MAX_SAMPLES = int(os.environ.get("TRT_LOWER_OPINFO_SAMPLES", "8")) or None
# The capped run counted 3,640 passes and 408 refusals (bench/README.md): a pass that silently
# turns into a refusal shows as fewer passes or more refusals than these bounds.
MIN_PASSED = 3600
MAX_REFUSED = 450


@pytest.fixture(scope="module")
def sweep(support_audit: SupportAudit) -> corpus.Sweep:
    """The sweep; the suite-wide ONNX audit's findings during it are kept on it as `violations`
    (a sample whose ONNX breaks the TensorRT table already counts as crashed, so they are
    asserted here, not at the session's end)."""
    before = support_audit.take()
    run = corpus.sweep(max_samples=MAX_SAMPLES)
    run.violations = support_audit.take()  # type: ignore[attr-defined]
    support_audit.found += before
    return run


def _listing(results: list[corpus.SampleResult]) -> str:
    return "\n".join(f"  {r.op} [{r.dtype} #{r.index}] {r.kind}: {r.detail}" for r in results)


def test_no_wrong_answers_and_refusals_stay_refusals(sweep: corpus.Sweep) -> None:
    """Every non-refused sample matches eager: one wrong answer fails. Refusals (with a reason)
    are counted apart, against bounds when the run is the suite's capped one."""
    table = corpus.rows(sweep.results)
    total = corpus.totals(table)
    failed = [r for r in sweep.results if r.outcome == "failed"]
    assert total.passed > 0
    assert not failed, f"{len(failed)} OpInfo sample(s) gave a wrong answer or crashed:\n" + _listing(failed)
    if MAX_SAMPLES == 8:
        assert total.passed >= MIN_PASSED and total.refused <= MAX_REFUSED, (
            f"{total.passed} passed (floor {MIN_PASSED}), {total.refused} refused (ceiling {MAX_REFUSED})\n"
            + corpus.format_table(table)
        )


def test_no_sample_crashes(sweep: corpus.Sweep) -> None:
    """Lowering either works or refuses with a reason: no ConversionError, ONNX Runtime error or
    other exception (a converter that can't handle its arguments must say so in its capability)."""
    assert all(r.outcome in corpus.OUTCOMES for r in sweep.results)
    crashes = [r for r in sweep.results if r.outcome == "failed" and r.kind == "crash"]
    violations = sweep.violations  # type: ignore[attr-defined]
    assert not crashes and not violations, (
        f"{len(crashes)} sample(s) crashed:\n"
        + _listing(crashes)
        + "\nemitted ONNX the targeted TensorRT would reject:\n"
        + "\n".join(violations)
    )


def test_refusals_give_reasons(sweep: corpus.Sweep) -> None:
    silent = [r for r in sweep.results if r.outcome == "refused" and not r.detail.split(":", 1)[-1].strip()]
    assert not silent, _listing(silent)


def test_sweep_reaches_the_converters(sweep: corpus.Sweep) -> None:
    """The corpus is not trivially small (a broken pre-filter or capture would empty it)."""
    assert len(sweep.covered) >= 150, sorted(sweep.covered)
    assert corpus.totals(corpus.rows(sweep.results)).passed >= 1000


# Samples the sweep found converters getting wrong (some beyond the CI cap of 8 per OpInfo).
aten = torch.ops.aten
REGRESSIONS = {
    "addmm-empty-inner-dim": (
        lambda b, x, y: torch.addmm(b, x, y, beta=0.2, alpha=0.6),
        lambda: (torch.randn(5, 10), torch.randn(5, 0), torch.randn(0, 10)),
    ),
    "softmax-0d": (lambda x: torch.softmax(x, 0), lambda: (torch.tensor(1.5),)),
    "log-softmax-0d": (lambda x: torch.log_softmax(x, 0), lambda: (torch.tensor(1.5),)),
    "conv-transpose-output-padding-past-stride": (
        lambda x, w, b: F.conv_transpose2d(
            x, w, b, stride=(3, 2), padding=(1, 2), output_padding=(2, 3), groups=2, dilation=(4, 4)
        ),
        lambda: (torch.randn(2, 2, 4, 4), torch.randn(2, 2, 4, 5), torch.randn(4)),
    ),
    "conv-transpose-output-padding-within-padding": (
        lambda x, w: F.conv_transpose1d(x, w, stride=1, padding=3, output_padding=2, dilation=3),
        lambda: (torch.randn(1, 2, 6), torch.randn(2, 3, 3)),
    ),
    "gather-from-0d": (lambda x, i: torch.gather(x, 0, i), lambda: (torch.tensor(2.0), torch.tensor([0, 0]))),
    "index-select-from-0d": (lambda x, i: torch.index_select(x, 0, i), lambda: (torch.tensor(2.0), torch.tensor([0]))),
    "mean-of-nothing": (lambda x: x.mean(0), lambda: (torch.randn(0, 5),)),
    "var-mean-of-nothing": (lambda x: torch.var_mean(x, 0, correction=0), lambda: (torch.randn(0, 5),)),
    "vector-norm-0d": (lambda x: torch.linalg.vector_norm(x, 2), lambda: (torch.tensor(-3.0),)),
    "amax-nan": (lambda x: x.amax(0), lambda: (torch.tensor([[float("nan"), 1.0], [2.0, float("nan")], [0.0, 3.0]]),)),
    "amin-nan": (lambda x: x.amin(-1), lambda: (torch.tensor([[float("nan"), 1.0], [2.0, float("nan")], [0.0, 3.0]]),)),
    "logit-crossed-eps": (lambda x: torch.logit(x, 0.6), lambda: (torch.rand(4, 5),)),
    "prelu-0d": (lambda x, w: F.prelu(x, w), lambda: (torch.tensor(-2.0), torch.tensor([0.25]))),
    "pixel-shuffle-int": (lambda x: F.pixel_shuffle(x, 2), lambda: (torch.randint(-9, 9, (1, 8, 2, 3)),)),
    "pixel-unshuffle-empty": (lambda x: F.pixel_unshuffle(x, 1), lambda: (torch.randn(1, 1, 1, 0),)),
    "cat-all-empty": (lambda x, y: torch.cat([x, y]), lambda: (torch.randn(0), torch.randn(0))),
    "cat-skips-legacy-empty": (lambda x, y: torch.cat([x, y], 1), lambda: (torch.randn(0), torch.randn(2, 3))),
    # From the full sweep (beyond the CI cap): overflow-free hypot, NaN as the argmax/argmin.
    "hypot-extremes": (
        torch.hypot,
        lambda: (
            torch.tensor([3.4e38, 1.0, 3.4e38, -3.4e38, 1.0, math.inf, -math.inf, 0.0, 3.0]),
            torch.tensor([1.0, 3.4e38, 3.4e38, 1.0, -3.4e38, math.nan, math.nan, 0.0, 4.0]),
        ),
    ),
    "argmax-nan": (
        lambda x: (x.argmax(0, keepdim=True), x.argmax(-1), x.argmax()),
        lambda: (torch.tensor([[math.nan, 1.0, 2.0], [3.0, math.nan, math.nan], [0.0, 5.0, -1.0]]),),
    ),
    "argmin-nan": (
        lambda x: (x.argmin(0), x.argmin(-1, keepdim=True), x.argmin()),
        lambda: (torch.tensor([[math.nan, 1.0, 2.0], [3.0, math.nan, math.nan], [0.0, 5.0, -1.0]]),),
    ),
    # ONNX Runtime's MaxPool kernel drops a ceil_mode window in the padding, its shape inference
    # keeps it: with another pool's buffer to reuse, the run failed.
    "max-pool3d-ceil-window-in-padding-beside-another-pool": (
        lambda x, y: (F.max_pool3d(x, (3, 2, 3), 2, 1), F.max_pool3d(y, (3, 2, 3), None, 1, ceil_mode=True)),
        lambda: (torch.randn(2, 3, 6, 5), torch.randn(2, 3, 6, 5)),
    ),
    # Were refused as float-only; rounding an integer is the identity, clamping one is Max/Min.
    "floor-int": (torch.floor, lambda: (torch.randint(-9, 9, (5,)),)),
    "round-int": (torch.round, lambda: (torch.randint(-9, 9, (5,)),)),
    "trunc-int": (torch.trunc, lambda: (torch.randint(-9, 9, (5,)),)),
    "hardtanh-int": (lambda x: F.hardtanh(x, -2, 3), lambda: (torch.randint(-9, 9, (5,)),)),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_found_by_the_sweep(name: str) -> None:
    fn, make_inputs = REGRESSIONS[name]
    module, inputs = Fn(fn), make_inputs()
    lowered = trt_lower.lower_to_trt(module, inputs, backend="onnxruntime", require_full=True, min_block_size=1)
    check_onnx(lowered)
    with torch.no_grad():
        torch.testing.assert_close(lowered(*inputs), module(*inputs), rtol=1e-4, atol=1e-5, equal_nan=True)


class _Calls(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch's class is untyped
    """Records every functional ATen call with one tensor output that a sample makes."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.calls: list[tuple[torch._ops.OpOverload, tuple[Any, ...], dict[str, Any]]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        schema = func._schema
        if func.namespace == "aten" and not schema.is_mutable and len(schema.returns) == 1:
            self.calls.append((func, args, kwargs or {}))
        return func(*args, **(kwargs or {}))


def _node(op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.fx.Node:
    """A graph node calling `op`, its tensor arguments placeholders carrying them as example values."""
    graph = torch.fx.Graph()

    def placeholder(value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        node = graph.placeholder(f"t{len(graph.nodes)}")
        node.meta["val"] = value
        return node

    args, kwargs = torch.utils._pytree.tree_map(placeholder, (args, kwargs))
    return graph.call_function(op, args, kwargs)


def test_eager_op_bindings_compute_what_their_overloads_compute_on_every_opinfo_sample() -> None:
    """runtime/bindings.py's proof against PyTorch's own samples: every ATen call the float32
    OpInfo samples make (4 per OpInfo) that gets a binding gives, through the binding, the
    OpOverload's result on the real arguments: values, dtype, shape and strides."""
    bound = set()
    for info in corpus.op_db():
        try:
            samples = list(info.sample_inputs("cpu", torch.float32))[:4]
        except Exception:  # an OpInfo whose samples need what this build lacks
            continue
        for sample in samples:
            recorder = _Calls()
            try:
                with recorder:
                    info(sample.input, *sample.args, **sample.kwargs)
            except Exception:  # the sample is an error case
                continue
            for op, args, kwargs in recorder.calls:
                fn = bindings.binding(_node(op, args, kwargs))
                if fn is None:
                    continue
                bound.add(op)
                torch.manual_seed(0)
                want = op(*args, **kwargs)
                torch.manual_seed(0)
                got = fn(*args, **kwargs)
                values = op.overloadpacket.__name__ not in corpus.UNSPECIFIED_VALUES
                assert got.stride() == want.stride() and corpus._same(got, want, 0.0, 0.0, values) is None, op
    assert len(bound) >= 300, len(bound)  # the corpus reached the bindings
