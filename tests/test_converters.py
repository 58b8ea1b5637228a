"""One case (or more) per registered converter: the op runs inside an engine and matches eager.

`CASES` maps each ATen overload to the cases that produce it after capture. Calling the
overload explicitly (`aten.add.Scalar(x, 2)`) is how a case pins an overload that ordinary
Python code would not produce.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import pytest
import torch

import converters
from harness import lower_and_compare

aten = torch.ops.aten


@dataclass(frozen=True)
class Case:
    op: Any
    fn: Callable[..., Any]
    make_inputs: Callable[[], tuple[torch.Tensor, ...]]
    id: str = ""
    rtol: float | None = None
    atol: float | None = None


def r(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape).to(dtype)


def ri(*shape: int, high: int = 10) -> torch.Tensor:
    return torch.randint(-high, high, shape)


CASES: list[Case] = [
    Case(aten.add.Tensor, lambda x, y: x + y, lambda: (r(2, 3), r(2, 3))),
    Case(aten.add.Tensor, lambda x, y: torch.add(x, y, alpha=2), lambda: (ri(2, 3), ri(3)), id="int-alpha"),
    Case(aten.add.Scalar, lambda x: aten.add.Scalar(x, 2.5), lambda: (r(4),)),
    Case(aten.relu.default, torch.relu, lambda: (r(2, 8),)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.op}{'-' + c.id if c.id else ''}")
def test_converter(case: Case) -> None:
    lower_and_compare(case.fn, case.make_inputs(), ops=[case.op], rtol=case.rtol, atol=case.atol)


def test_every_converter_has_a_case() -> None:
    covered = {c.op for c in CASES}
    missing = sorted(str(op) for op in converters.supported_ops() - covered)
    assert not missing, f"converters without a test case: {missing}"
