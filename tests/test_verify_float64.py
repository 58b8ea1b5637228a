"""What the float64 reference (trt_lower/verify/float64.py) costs, without changing it: a selection
widens the rows it reads, not its table, and only the magnitudes something reads are computed;
the reference stays bit for bit what widening every input first gives, whatever else is kept."""

from __future__ import annotations

import functools
from typing import Any, Callable

import pytest
import torch

from trt_lower.verify import float64
from trt_lower.verify.float64 import Reference, run_float64, widened
from trt_lower.verify.nodes import Node


class Embedded(torch.nn.Module):
    """A table read by an embedding, an index_select and a gather; sums of products after them."""

    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Embedding(4096, 32)
        self.inner = torch.nn.Linear(32, 32)
        self.norm = torch.nn.LayerNorm(32)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = self.table(ids)
        picked = self.table.weight.index_select(0, ids.flatten())
        rows = self.table.weight.gather(0, ids.reshape(-1, 1).expand(-1, 32))
        return self.norm(self.inner(h) + h), (picked * 2).sum(-1) - 1, rows.mean(-1) + h.sum()


def _graph() -> tuple[Embedded, list[Node], Callable[[Node], Any], list[Node]]:
    """The model, its captured nodes, each input's eager value, and its outputs' nodes."""
    torch.manual_seed(0)
    model, ids = Embedded().eval(), torch.randint(0, 4096, (2, 8))
    gm = torch.export.export(model, (ids,)).module()
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]

    def given(a: Node) -> Any:
        return ids if a.op == "placeholder" else functools.reduce(getattr, str(a.target).split("."), gm)

    return model, nodes, given, list(gm.graph.output_node().args[0])  # type: ignore[arg-type]


def _assert_identical(found: dict[Node, Any], expected: dict[Node, Any]) -> None:
    assert found.keys() == expected.keys()
    for node, reference in expected.items():
        assert isinstance(reference, Reference) and isinstance(found[node], Reference)
        assert reference.value.dtype == torch.float64
        assert torch.equal(found[node].value, reference.value), node
        assert torch.equal(found[node].magnitude, reference.magnitude), node


def test_a_selection_widens_the_rows_it_reads_not_its_table(monkeypatch: pytest.MonkeyPatch) -> None:
    model, nodes, given, outputs = _graph()
    sizes: list[int] = []
    real = float64._widen

    def counted(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dtype == torch.float32:
            sizes.append(value.numel())
        return real(value)

    monkeypatch.setattr(float64, "_widen", counted)
    found = run_float64(nodes, given, outputs)
    monkeypatch.undo()
    assert sizes and max(sizes) < model.table.weight.numel() // 100  # 16 rows of 4096, a 32x32 weight
    _assert_identical(found, run_float64(nodes, lambda a: widened(given(a)), outputs))


def test_a_reference_does_not_depend_on_what_else_is_kept() -> None:
    """The sum of `picked * 2`, less one, carries its terms' magnitudes through three ops: kept
    alone, it must still get them (not the size of a value in between)."""
    _, nodes, given, outputs = _graph()
    everything = run_float64(nodes, given, nodes)
    _assert_identical(run_float64(nodes, given, outputs), {n: everything[n] for n in outputs})
