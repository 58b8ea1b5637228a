"""Ops that read or write at indices from data raise where eager PyTorch raises (an index out of
range, negative ones where eager refuses them), naming the op and the index, on ONNX Runtime and
on TensorRT (the double), with the indices tested inside the engine (capture/index_checks.py)."""

from __future__ import annotations

import operator
import re
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, ClassVar

import pytest
import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree
from harness import Fn, engine_ops, lower_and_compare

import trt_lower
from splitter.index_check import IndexOutOfRangeError, check_indices

aten = torch.ops.aten
torch.manual_seed(0)
TABLE = torch.randn(10, 4)
X = torch.randn(3, 5)


def _ids(*values: int) -> torch.Tensor:
    return torch.tensor(values)


# Fn calls its inputs args_0, args_1, ...
# name -> (function, in-range inputs, the op under test, (bad inputs, what the error names)...)
CASES: dict[
    str, tuple[Callable[..., Any], tuple[torch.Tensor, ...], Any, list[tuple[tuple[torch.Tensor, ...], str]]]
] = {
    "embedding": (
        lambda i: F.embedding(i, TABLE),
        (_ids(0, 9, 3),),
        aten.embedding.default,
        [((_ids(0, 10, 3),), "input 'args_0'"), ((_ids(0, -1, 3),), "outside [0, 10)")],
    ),
    "embedding_bag": (
        lambda i, o: F.embedding_bag(i, TABLE, o, mode="sum"),
        (_ids(1, 9, 2, 0), _ids(0, 2)),
        aten.embedding_bag.padding_idx,
        [((_ids(1, 9, 12, 0), _ids(0, 2)), "input 'args_0'")],
    ),
    "index_select": (
        lambda x, j: x.index_select(1, j),
        (X, _ids(4, 0)),
        aten.index_select.default,
        [((X, _ids(5, 0)), "input 'args_1'"), ((X, _ids(-1, 0)), "outside [0, 5)")],
    ),
    "gather": (
        lambda x, j: torch.gather(x, 1, j),
        (X, torch.tensor([[4], [0], [2]])),
        aten.gather.default,
        [((X, torch.tensor([[4], [5], [2]])), "input 'args_1'"), ((X, torch.tensor([[4], [-1], [2]])), "[0, 5)")],
    ),
    "index": (
        lambda x, i, j: x[i, j],
        (X, _ids(2, -3), _ids(-5, 4)),
        aten.index.Tensor,
        [((X, _ids(2, 3), _ids(0, 4)), "input 'args_1'"), ((X, _ids(2, 0), _ids(-6, 4)), "outside [-5, 5)")],
    ),
    "index_put": (
        lambda x, i, v: x.index_put((i,), v),
        (X, _ids(2, -1), torch.ones(2, 5)),
        aten.index_put.default,
        [((X, _ids(3, 0), torch.ones(2, 5)), "input 'args_1'")],
    ),
    "scatter": (
        lambda x, j: x.scatter(1, j, 7.0),
        (X, torch.tensor([[4], [0], [2]])),
        aten.scatter.value,
        [((X, torch.tensor([[4], [0], [5]])), "input 'args_1'")],
    ),
    "index_copy": (
        lambda x, i, s: x.index_copy(0, i, s),
        (X, _ids(2, 0), torch.ones(2, 5)),
        aten.index_copy.default,
        [((X, _ids(2, 3), torch.ones(2, 5)), "input 'args_1'")],
    ),
    "index_fill": (
        lambda x, j: x.index_fill(1, j, 2.0),
        (X, _ids(-5, 4)),
        aten.index_fill.int_Scalar,
        [((X, _ids(-6, 4)), "input 'args_1'")],
    ),
}


def _eager_calls(lowered: trt_lower.LoweredModule) -> set[object]:
    """What the lowered graph calls outside its engines (and the input guard)."""
    return {n.target for n in lowered.graph.nodes if n.op == "call_function"} - {operator.getitem}


@pytest.mark.parametrize("name", CASES)
def test_out_of_range_indices_raise_as_eager_naming_the_input(name: str) -> None:
    fn, good, op, bad = CASES[name]
    lowered = lower_and_compare(fn, good, ops=[op])
    assert _eager_calls(lowered) == {check_indices}  # the indices' test runs in the engine
    for inputs, named in bad:
        with pytest.raises((IndexError, RuntimeError)):
            fn(*inputs)  # eager refuses it
        with pytest.raises(IndexError, match=re.escape(named)) as error:
            lowered(*inputs)
        assert isinstance(error.value, IndexOutOfRangeError) and isinstance(error.value, ValueError)
        assert str(op.name()).split("::")[1] in str(error.value)  # the op is named
    torch.testing.assert_close(lowered(*good), fn(*good))  # still answers after a refusal


def test_indices_computed_inside_the_engine_are_checked_there() -> None:
    """ids + 3 is computed in the engine and never leaves it: the engine tests it and clamps it
    before the Gather, and the check names the computed index."""
    fn = lambda i: F.embedding(i + 3, TABLE).relu()  # noqa: E731
    lowered = lower_and_compare(fn, (_ids(0, 6),), ops=[aten.add.Tensor, aten.embedding.default])
    assert len(lowered.report.engines) == 1 and _eager_calls(lowered) == {check_indices}
    with pytest.raises(IndexError, match=r"index 'add' holds an index outside \[0, 10\)"):
        lowered(_ids(0, 7))
    with pytest.raises(IndexError, match="index 'add'"):
        lowered(_ids(-4, 0))


def test_the_bound_follows_a_dynamic_size() -> None:
    """x's width varies within its range: an index is checked against this call's width."""
    fn = lambda x, j: x.index_select(1, j) * 2  # noqa: E731
    spec = trt_lower.TensorSpec((3, 2), (3, 6), (3, 8))
    lowered = trt_lower.lower_to_trt(Fn(fn), (spec, _ids(1, 0)), backend="onnxruntime", min_block_size=1)
    assert aten.index_select.default.__str__() in engine_ops(lowered)
    x = torch.randn(3, 4)
    torch.testing.assert_close(lowered(x, _ids(3, 0)), fn(x, _ids(3, 0)))
    with pytest.raises(IndexError, match=r"input 'args_1' holds an index outside \[0, args_0.shape\[1\]\)"):
        lowered(x, _ids(4, 0))  # within the range's largest width, beyond this call's


def test_constant_indices_in_range_are_not_checked() -> None:
    positions = torch.tensor([0, 2, 4])

    class Picks(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("positions", positions)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.index_select(1, self.positions) + 1

    lowered = lower_and_compare(Picks(), (X,), ops=[aten.index_select.default])
    assert not _eager_calls(lowered)


class Tagger(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed, self.head = torch.nn.Embedding(10, 4), torch.nn.Linear(4, 2)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(ids))


def test_tensorrt_engines_never_see_an_index_out_of_range(trt_double: ModuleType) -> None:
    """On the TensorRT double (whose Gather fails on an index out of range, as a GPU's read out
    of bounds would): the engine runs on clamped indices and the check raises, naming the input."""
    model = Tagger().eval()
    ids = torch.tensor([[1, 9, 0]])
    lowered = trt_lower.lower_to_trt(model, (ids,), backend="tensorrt", min_block_size=1)
    assert type(lowered.engine_0).__name__ == "TRTEngineModule"
    with torch.no_grad():
        torch.testing.assert_close(lowered(ids), model(ids))
        executions = trt_double.state.executions
        for bad in (torch.tensor([[1, 10, 0]]), torch.tensor([[-1, 9, 0]])):
            with pytest.raises(IndexError, match=r"input 'ids' holds an index outside \[0, 10\)"):
                lowered(bad)
        assert trt_double.state.executions == executions + 2  # the engine ran, on in-range indices
        torch.testing.assert_close(lowered(ids), model(ids))


def test_a_loaded_artifact_checks_its_indices(tmp_path: Path) -> None:
    model = Tagger().eval()
    lowered = trt_lower.lower_to_trt(model, (torch.tensor([[1, 9, 0]]),), backend="onnxruntime", min_block_size=1)
    trt_lower.save(lowered, tmp_path / "m.trtl")
    loaded = trt_lower.load(tmp_path / "m.trtl")
    with pytest.raises(IndexError, match=r"input 'ids' holds an index outside \[0, 10\)"):
        loaded(torch.tensor([[1, 10, 0]]))


# What a device-to-host read of a tensor goes through.
_HOST_READS = {"__bool__", "__int__", "__float__", "__index__", "__array__", "item", "tolist", "cpu", "numpy"}


class OnGpu(torch.Tensor):
    """A tensor that says it is on a GPU (held on the CPU): each read back to the host, a copy
    and a wait for the GPU there, is counted, as are device asserts."""

    host_reads: ClassVar[list[str]] = []
    asserts: ClassVar[list[str]] = []

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return True

    @classmethod
    def __torch_function__(
        cls, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        if getattr(func, "__name__", "") in _HOST_READS:
            cls.host_reads.append(func.__name__)
        if func is torch._assert_async:
            cls.asserts.append(args[1])
        return super().__torch_function__(func, types, args, kwargs or {})  # type: ignore[no-untyped-call]


class OutputsOnGpu(torch.nn.Module):
    """An engine whose outputs are on a GPU."""

    def __init__(self, engine: torch.nn.Module) -> None:
        super().__init__()
        self.engine = engine

    def forward(self, *args: torch.Tensor) -> Any:
        return pytree.tree_map_only(torch.Tensor, lambda t: t.as_subclass(OnGpu), self.engine(*args))


def test_on_a_gpu_a_call_reads_nothing_back_for_its_index_checks() -> None:
    """The CUDA path of a lowered call (its engine's outputs, the index test's among them, on a
    GPU): the test becomes a device assert and no call reads anything back to the host; on the
    CPU an index out of range raises IndexOutOfRangeError as before."""
    model, ids, bad = Tagger().eval(), torch.tensor([[1, 9, 0]]), torch.tensor([[1, 10, 0]])
    lowered = trt_lower.lower_to_trt(model, (ids,), backend="onnxruntime", min_block_size=1)
    assert _eager_calls(lowered) == {check_indices}
    with pytest.raises(IndexOutOfRangeError, match=r"input 'ids' holds an index outside \[0, 10\)"):
        lowered(bad)
    lowered.replace_engines({"engine_0": OutputsOnGpu(lowered.get_submodule("engine_0"))})
    OnGpu.host_reads.clear()
    OnGpu.asserts.clear()
    with torch.no_grad():
        outs = [lowered(ids) for _ in range(3)]
        assert OnGpu.host_reads == [] and len(OnGpu.asserts) == 3
        torch.testing.assert_close(outs[-1].as_subclass(torch.Tensor), model(ids))
        # Here the assert fails at once; on a GPU, at the next call that synchronizes.
        with pytest.raises(RuntimeError, match=r"input 'ids' holds an index outside \[0, 10\)"):
            lowered(bad)
