"""The allocation budget of a loaded graph's eager nodes (trt_lower/deploy/allocations.py): sizes a
tampered file computes at run time, from the inputs' sizes or values, are checked before anything
is allocated; models that allocate from their shapes legitimately still run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from artifact_tamper import node, tamper

import trt_lower
from trt_lower.deploy import allocations


class Padded(torch.nn.Module):
    """Eager allocations sized by the input's dims: zeros of its shape, an arange of its rows, a
    repeat and an expand, between engines."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(x) + 1.0
        rows = torch.arange(y.shape[0], dtype=y.dtype).unsqueeze(1)
        z = y.new_zeros(y.shape) + rows + y.repeat(1, 2)[:, : y.shape[1]] + rows.expand(y.shape)
        return torch.sigmoid(z) * 2.0


EAGER = [
    "aten.arange.default",
    "aten.arange.start",
    "aten.new_zeros.default",
    "aten.repeat.default",
    "aten.expand.default",
    "aten.zeros.default",
]
SPEC = trt_lower.TensorSpec((1, 4), (3, 4), (8, 4))


@pytest.fixture(scope="module")
def padded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lowered = trt_lower.lower_to_trt(Padded().eval(), (SPEC,), backend="onnxruntime", fallback_ops=EAGER)
    assert lowered.report.engines and lowered.report.fallbacks
    path = tmp_path_factory.mktemp("padded") / "padded.trtl"
    trt_lower.save(lowered, path)
    return path


def test_legitimate_allocations_from_shapes_run_under_the_default_budget(padded: Path, tmp_path: Path) -> None:
    loaded = trt_lower.load(padded, backend="onnxruntime")
    checked = {n.name: str(n.target) for n in loaded.graph.nodes if n.name in loaded.call_checks}
    assert {t.rpartition(".")[0] for t in checked.values()} >= {"aten.new_zeros", "aten.repeat", "aten.expand"}
    for rows in (1, 5, 8):
        x = torch.randn(rows, 4)
        torch.testing.assert_close(loaded(x), Padded()(x))
    # The graph keeps its operators (the checks are in the generated code only): it saves as it loaded.
    trt_lower.save(loaded, tmp_path / "again.trtl")
    assert trt_lower.load(tmp_path / "again.trtl", backend="onnxruntime").call_checks.keys() == checked.keys()


def _planted(*extra: dict[str, Any]) -> Any:
    """A change inserting `extra` nodes before the first eager call; their `x` is the input."""

    def plant(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
        nodes, first = manifest["graph"]["nodes"], node(manifest, "placeholder")["name"]
        at = nodes.index(node(manifest, "call_function"))
        nodes[at:at] = [dict(n, args=[_input(a, first) for a in n["args"]]) for n in extra]

    return plant


def _input(value: Any, name: str) -> Any:
    if isinstance(value, list):
        return [_input(v, name) for v in value]
    return {"node": name} if value == {"node": "x"} else value


def _call(name: str, target: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"name": name, "op": "call_function", "target": target, "args": list(args), "kwargs": kwargs}


def _ref(name: str) -> dict[str, str]:
    return {"node": name}


# x.sum().item(), as an int: the input's values pick the size.
ITEM = [
    _call("total", "aten.sum.default", _ref("x")),
    _call("whole", "aten._to_copy.default", _ref("total"), dtype={"dtype": "int64"}),
    _call("count", "aten.item.default", _ref("whole")),
]


def _loaded(padded: Path, tmp_path: Path, *extra: dict[str, Any], **load: Any) -> Any:
    evil = tamper(padded, tmp_path / "evil.trtl", _planted(*extra))
    return trt_lower.load(evil, backend="onnxruntime", **load)


def test_a_size_from_the_inputs_values_is_refused_before_it_allocates(padded: Path, tmp_path: Path) -> None:
    """zeros(x.sum().item() * 2**40): passes every check at load, refused at the call, naming the
    node, its operator and the size, before the kernel runs."""
    loaded = _loaded(
        padded,
        tmp_path,
        *ITEM,
        _call("huge", "operator.mul", _ref("count"), 2**40),
        _call("big", "aten.zeros.default", [_ref("huge")]),
    )
    with pytest.raises(
        trt_lower.EagerAllocationError,
        match=r"node 'big' \(aten.zeros.default\) would allocate 211106232532992 bytes in one call, over the "
        r"eager allocation budget of 2147483648 bytes",
    ):
        loaded(torch.full((3, 4), 4.0))  # sum 48: 48 * 2**40 float32 elements


def test_a_budget_set_low_refuses_a_small_real_allocation(padded: Path, tmp_path: Path) -> None:
    """The same attack at a size the process could allocate: the budget, not the allocator, stops it."""
    plant = (*ITEM, _call("small", "aten.zeros.default", [_ref("count"), 1024]))
    loaded = _loaded(padded, tmp_path, *plant, max_eager_allocation=2**20)
    loaded(torch.full((2, 4), 8.0))  # 64 x 1024 float32: 256 KiB
    with pytest.raises(trt_lower.EagerAllocationError, match=r"node 'small' .* 1048576 bytes"):
        loaded(torch.full((2, 4), 64.0))  # 512 x 1024 float32: 2 MiB


@pytest.mark.parametrize(
    "plant",
    [
        [
            _call("rows", "aten.sym_size.int", _ref("x"), 0),
            _call("grown", "aten.repeat.default", _ref("x"), [_ref("rows"), 4096]),
        ],
        [
            _call("rows", "aten.sym_size.int", _ref("x"), 0),
            _call("grown", "aten.new_ones.default", _ref("x"), [_ref("rows"), 2**17]),
        ],
        [*ITEM, _call("grown", "aten.arange.default", _ref("count"))],
        [*ITEM, _call("grown", "aten.expand.default", _ref("x"), [_ref("count"), -1, -1])],
        [*ITEM, _call("grown", "aten.one_hot.default", _ref("whole"))],
        [_call("grown", "aten.upsample_nearest2d.vec", _ref("x4"), None, [256.0, 256.0])],
    ],
    ids=["repeat", "new_ones", "arange", "expand", "one_hot", "upsample_scale"],
)
def test_each_operator_sized_at_run_time_meets_the_budget(padded: Path, tmp_path: Path, plant: list[Any]) -> None:
    unsqueezed = [_call("x4", "aten.view.default", _ref("x"), [1, 1, -1, 4])]
    loaded = _loaded(padded, tmp_path, *unsqueezed, *plant, max_eager_allocation=2**20)
    with pytest.raises(trt_lower.EagerAllocationError, match=r"node 'grown' \(aten\.\w+\.\w+\) would allocate"):
        loaded(torch.full((8, 4), 2.0**13))


def test_a_padding_computed_at_run_time_gets_the_bound_of_a_literal_one(padded: Path, tmp_path: Path) -> None:
    plant = (*ITEM, _call("padded_x", "aten.constant_pad_nd.default", _ref("x"), [0, _ref("count")]))
    loaded = _loaded(padded, tmp_path, *plant)
    loaded(torch.full((2, 4), 1.0))
    with pytest.raises(trt_lower.EagerAllocationError, match=r"node 'padded_x' .* more than 4096"):
        loaded(torch.full((2, 4), 2.0**10))


def test_integer_arithmetic_beyond_64_bits_is_refused_naming_the_node(padded: Path, tmp_path: Path) -> None:
    """Squaring a run-time size again and again: each result past 2**63 raises, so no chain of
    operators makes an integer that costs more than a few words."""
    rows = _call("rows", "aten.sym_size.int", _ref("x"), 0)
    squares = [_call("sq0", "operator.mul", _ref("rows"), 2**61)]
    squares += [_call(f"sq{i}", "operator.mul", _ref(f"sq{i - 1}"), _ref(f"sq{i - 1}")) for i in (1, 2, 3)]
    loaded = _loaded(padded, tmp_path, rows, *squares)
    with pytest.raises(
        trt_lower.EagerAllocationError, match=r"node 'sq1' \(operator.mul\) computes an integer of 127 bits"
    ):
        loaded(torch.randn(4, 4))


def test_the_budget_is_checked_when_given() -> None:
    for bad in (0, -1, 2.0**31, True, "2GiB"):
        with pytest.raises(ValueError, match="max_eager_allocation must be a positive int of bytes"):
            trt_lower.load("unused.trtl", max_eager_allocation=bad)  # type: ignore[arg-type]


def test_the_default_budget_is_what_the_largest_literal_size_makes() -> None:
    from trt_lower.deploy.operators import MAX_ELEMENTS

    assert allocations.DEFAULT_MAX_EAGER_ALLOCATION == MAX_ELEMENTS * 8


def test_a_literal_histogram_count_is_bounded_at_load(padded: Path, tmp_path: Path) -> None:
    plant = _call("bins", "aten.histc.default", _ref("x"), 2**40)
    with pytest.raises(
        trt_lower.ArtifactError, match=r"node 'bins' calls aten.histc.default .* over 268435456 elements"
    ):
        _loaded(padded, tmp_path, plant)


aten = torch.ops.aten
X, IDS, IMAGE = torch.randn(2, 3), torch.tensor([[1, 4], [0, 2]]), torch.randn(1, 2, 4, 5)
CALLS = [
    (aten.zeros.default, ([3, 5],), {}),
    (aten.new_zeros.default, (X, [3, 5]), {"dtype": torch.float64}),
    (aten.new_full.default, (X, [2, 7], 1.0), {}),
    (aten.full.default, ([2, 3], 1), {}),
    (aten.randint.low, (0, 5, [4, 4]), {}),
    (aten.arange.start_step, (2, 30, 3), {}),
    (aten.arange.default, (17,), {"dtype": torch.float16}),
    (aten.eye.m, (3, 7), {}),
    (aten.eye.default, (4,), {}),
    (aten.linspace.default, (0, 1, 11), {}),
    (aten.randperm.default, (9,), {}),
    (aten.histc.default, (X, 13), {}),
    (aten.one_hot.default, (IDS, 6), {}),
    (aten.one_hot.default, (IDS,), {}),
    (aten.repeat.default, (X, [2, 1, 3]), {}),
    (aten.tile.default, (X, [2]), {}),
    (aten.upsample_nearest2d.vec, (IMAGE, None, [2.0, 3.0]), {}),
    (aten.upsample_bilinear2d.default, (IMAGE, [5, 7], False), {}),
    (aten._adaptive_avg_pool2d.default, (IMAGE, [2, 3]), {}),
]


@pytest.mark.parametrize("op, args, kwargs", CALLS, ids=[f"{c[0]}-{i}" for i, c in enumerate(CALLS)])
def test_the_budget_counts_the_bytes_the_operator_makes(op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Each check's count is the output's own: a budget of exactly its bytes passes, one byte less refuses."""
    out = op(*args, **kwargs)
    size = out.numel() * out.element_size()
    allocations.budgeted("n", op, size)(op)(*args, **kwargs)
    with pytest.raises(trt_lower.EagerAllocationError, match=f"would allocate {size} bytes"):
        allocations.budgeted("n", op, size - 1)(op)(*args, **kwargs)


def test_a_transformers_model_with_an_eager_mask_runs_under_the_default_budget(tmp_path: Path) -> None:
    """BERT's attention mask and position ids made eagerly from the sequence length (dynamic)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, vocab_size=100
    )
    model = transformers.BertModel(config).eval()
    spec = trt_lower.TensorSpec((1, 2), (2, 8), (4, 16), dtype=torch.int64)
    eager = ["aten.expand.default", "aten.arange.default", "aten.arange.start", "aten.ones.default"]
    trt_lower.save(
        trt_lower.lower_to_trt(model, (spec,), backend="onnxruntime", fallback_ops=eager), tmp_path / "b.trtl"
    )
    loaded = trt_lower.load(tmp_path / "b.trtl", backend="onnxruntime")
    assert {str(n.target) for n in loaded.graph.nodes if n.name in loaded.call_checks} >= {
        "aten.expand.default",
        "aten.arange.default",
    }
    for shape in ((1, 2), (3, 11), (4, 16)):
        ids = torch.randint(0, 100, shape)
        with torch.no_grad():
            expected = model(ids).last_hidden_state
        torch.testing.assert_close(loaded(ids).last_hidden_state, expected, rtol=1e-4, atol=1e-4)


def test_a_size_that_is_no_int_is_refused_naming_the_node(padded: Path, tmp_path: Path) -> None:
    plant = (_call("total", "aten.sum.default", _ref("x")), _call("count", "aten.item.default", _ref("total")))
    loaded = _loaded(padded, tmp_path, *plant, _call("floats", "aten.zeros.default", [_ref("count"), 4]))
    with pytest.raises(
        trt_lower.EagerAllocationError, match=r"node 'floats' \(aten.zeros.default\) is passed a size that is no int"
    ):
        loaded(torch.full((2, 4), 0.5))
