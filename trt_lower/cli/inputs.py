"""Model inputs from the command line: `--input SHAPE[:DTYPE]` once per forward argument,
`--dynamic INPUT.DIM=MIN..MAX` ranges over them, `--verify-input SHAPE[:DTYPE]` the sample that
verification runs where the inputs are ranges. torch is imported when inputs are made, not when the
parser is built."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING, Sequence

from trt_lower.cli.dispatch import UsageError

if TYPE_CHECKING:
    import torch

    from trt_lower.values.spec import TensorSpec

_SHAPE = re.compile(r"^(\d+(?:x\d+)*)?(?::([a-z0-9]+))?$")
_DYNAMIC = re.compile(r"^(\d+)\.(\d+)=(\d+)\.\.(\d+)$")
_SHAPE_HELP = "SHAPE[:DTYPE] per forward argument, in order, e.g. 1x3x224x224:float32 or 2x128:int64"


def add_input(p: argparse.ArgumentParser, default: str = "") -> None:
    """`--input SHAPE[:DTYPE]`, once per forward argument, as every command taking inputs spells it;
    `default`: what the command uses without it."""
    p.add_argument(
        "--input",
        action="append",
        metavar="SHAPE[:DTYPE]",
        help=_SHAPE_HELP + (f" (default: {default})" if default else ""),
    )


def parse(text: str, option: str = "--input") -> tuple[tuple[int, ...], torch.dtype]:
    """'1x3x224x224:float32' (dtype defaults to float32; '' or ':int64' is a scalar)."""
    import torch

    match = _SHAPE.match(text)
    dtype = getattr(torch, match[2] or "float32", None) if match else None
    if match is None or not isinstance(dtype, torch.dtype):
        raise UsageError(f"{option} {text!r}: expected SHAPE[:DTYPE], e.g. 1x3x224x224:float32 or 2x128:int64")
    return tuple(int(d) for d in match[1].split("x")) if match[1] else (), dtype


def example(shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """A random tensor; integers in {0, 1} (valid indices of any embedding table)."""
    import torch

    if dtype.is_floating_point:
        return torch.randn(tuple(shape)).to(dtype)
    return torch.randint(0, 2, tuple(shape)).to(dtype)


def _ranges(
    dynamic: list[str], parsed: list[tuple[tuple[int, ...], torch.dtype]]
) -> dict[int, dict[int, tuple[int, int]]]:
    ranges: dict[int, dict[int, tuple[int, int]]] = {}
    for text in dynamic:
        match = _DYNAMIC.match(text)
        if match is None:
            raise UsageError(f"--dynamic {text!r}: expected INPUT.DIM=MIN..MAX, e.g. 0.0=1..32")
        index, dim, low, high = (int(g) for g in match.groups())
        if index >= len(parsed) or dim >= len(parsed[index][0]):
            raise UsageError(f"--dynamic {text!r}: there is no input {index} with a dim {dim}")
        ranges.setdefault(index, {})[dim] = (low, high)
    return ranges


def specs(inputs: list[str], dynamic: list[str]) -> list[TensorSpec]:
    """One spec per --input (static), with --dynamic INPUT.DIM=MIN..MAX ranges (opt: the --input size)."""
    from trt_lower.values.spec import TensorSpec

    parsed = [parse(text) for text in inputs]
    ranges = _ranges(dynamic, parsed)
    made = []
    for index, (shape, dtype) in enumerate(parsed):
        dims = ranges.get(index, {})
        lows = [dims.get(i, (d, d))[0] for i, d in enumerate(shape)]
        highs = [dims.get(i, (d, d))[1] for i, d in enumerate(shape)]
        try:
            made.append(TensorSpec(lows, shape, highs, dtype))
        except ValueError as e:
            raise UsageError(f"input {index}: {e}") from None
    return made


def samples(texts: list[str], count: int) -> list[torch.Tensor]:
    """Random tensors of the shapes `--verify-input` gives, one per forward argument (`count`)."""
    if len(texts) != count:
        raise UsageError(f"--verify-input: give one per forward argument, as --input: {count}, not {len(texts)}")
    return [example(*parse(text, "--verify-input")) for text in texts]
