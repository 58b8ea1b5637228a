"""Differential fuzzing: random small torch programs, each lowered (ONNX Runtime, min_block_size=1)
and compared with eager PyTorch.

A program is straight-line torch code over 1-3 inputs (random shapes that broadcast, float32 /
int32 / int64 / bool), each line one op drawn from the table below on values made so far:
elementwise ops with broadcasting, constants, casts, reductions, views and reshapes, matmul,
concatenation, multi-output ops (topk, max, split, chunk, var_mean), torch.nn.functional layers
(normalization, padding, pooling, conv1d, interpolation, activations), and several outputs. Each
candidate line runs eagerly as it is drawn (on the program's real inputs); lines torch rejects
are redrawn, so every program is valid torch. Inputs are multiples of 1/8 so that sums and
products are exact in float32 and a comparison cannot flip on rounding; a quarter of the float
inputs also hold NaN and +-Inf.

A second fuzzer builds graphs of layers (linear, conv with constant weights), activations, views
and arithmetic that return random intermediates, views of them, inputs and the same value twice, in
nested tuples, lists and dicts; six such graphs are lowered as one module (one capture for six).

Both fail not only on a wrong answer or an error but on any node that runs eagerly because its
converter failed or its engine could not be built: such a fallback hides a converter bug behind a
warning.

Profiles (hypothesis settings): `ci` (the default: derandomized, 300 examples) and `local`
(random, 3000 examples): `TRT_LOWER_FUZZ=local pytest tests/test_fuzz.py`; the structural fuzzer
runs a sixth as many examples, of six graphs each (300 graphs in CI). A failure prints the
program's code and the seed of its inputs; `reproduce(code, shapes, seed)` reruns it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import trt_lower

settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=300,
    deadline=None,
    print_blob=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "local",
    max_examples=3000,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = settings.get_profile(os.environ.get("TRT_LOWER_FUZZ", "ci"))

DTYPES = [torch.float32, torch.float32, torch.float32, torch.int64, torch.int32, torch.bool]
DTYPE_NAMES = {
    torch.float32: "torch.float32",
    torch.int64: "torch.int64",
    torch.int32: "torch.int32",
    torch.bool: "torch.bool",
}
MAX_LINES = 8
NAN, INF = float("nan"), float("inf")


def make_input(shape: tuple[int, ...], dtype: torch.dtype, generator: torch.Generator) -> torch.Tensor:
    """Multiples of 1/8 in [-4, 4] (integers in [-8, 8], bools at random); one float input in
    four also holds NaN, +Inf and -Inf where the draw hit -32, 31 and 32."""
    whole = torch.randint(-32, 33, shape, generator=generator)
    if dtype == torch.bool:
        return whole > 0
    if not dtype.is_floating_point:
        return (whole // 4).to(dtype)
    x = (whole / 8).to(dtype)
    if torch.randint(4, (), generator=generator) == 0:
        x[whole == -32], x[whole == 31], x[whole == 32] = NAN, INF, -INF
    return x


@dataclass
class Program:
    shapes: list[tuple[int, ...]]
    dtypes: list[torch.dtype]
    seed: int
    lines: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    returns: str | None = None  # what the program returns, where not the tuple of `outputs`

    @property
    def code(self) -> str:
        args = ", ".join(f"x{i}" for i in range(len(self.shapes)))
        body = "".join(f"    {line}\n" for line in self.lines)
        return f"def program({args}):\n{body}    return {self.returns or '(' + ', '.join(self.outputs) + ',)'}\n"

    def inputs(self) -> tuple[torch.Tensor, ...]:
        generator = torch.Generator().manual_seed(self.seed)
        return tuple(make_input(s, d, generator) for s, d in zip(self.shapes, self.dtypes))

    def describe(self) -> str:
        shapes = ", ".join(f"{s} {DTYPE_NAMES[d]}" for s, d in zip(self.shapes, self.dtypes))
        return (
            f"{self.code}inputs: {shapes}; seed={self.seed}\n"
            f"rerun: reproduce({self.code!r}, {self.shapes!r}, {[DTYPE_NAMES[d] for d in self.dtypes]}, {self.seed})"
        )


def compile_program(code: str) -> Callable[..., Any]:
    scope: dict[str, Any] = {"torch": torch}
    exec(code, scope)  # the program is our own generated code
    return scope["program"]  # type: ignore[no-any-return]


class Module(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: torch.Tensor) -> Any:
        return self.fn(*args)


# -- the op table: each draws one line's right-hand side from the values so far -----------------
Draw = Callable[..., Any]
Values = dict[str, torch.Tensor]


def _pick(draw: Draw, values: Values, where: Callable[[torch.Tensor], bool] = lambda t: True) -> str | None:
    names = [n for n, t in values.items() if where(t)]
    return draw(st.sampled_from(names)) if names else None


def _dim(draw: Draw, t: torch.Tensor) -> int:
    return draw(st.integers(-t.dim(), t.dim() - 1)) if t.dim() else 0


def _float(t: torch.Tensor) -> bool:
    return t.is_floating_point()


def _as_float(name: str, t: torch.Tensor) -> str:
    return name if _float(t) else f"{name}.float()"


def unary(draw: Draw, v: Values) -> str | None:
    a = _pick(draw, v)
    assert a is not None
    op = draw(
        st.sampled_from(
            [
                "relu",
                "sigmoid",
                "tanh",
                "exp",
                "neg",
                "abs",
                "sin",
                "floor",
                "sqrt",
                "sign",
                "reciprocal",
                "square",
                "erf",
                "log1p",
                "ceil",
                "round",
            ]
        )
    )
    if op in ("neg", "abs", "square") and v[a].dtype != torch.bool:
        return f"torch.{op}({a})"
    return f"torch.{op}({_as_float(a, v[a])})"


def binary(draw: Draw, v: Values) -> str | None:
    a = _pick(draw, v, lambda t: t.dtype != torch.bool)
    if a is None:
        return None
    b = _pick(draw, v, lambda t: t.dtype != torch.bool)
    assert b is not None  # a is one
    op = draw(
        st.sampled_from(
            [
                "+",
                "-",
                "*",
                "/",
                "torch.maximum",
                "torch.minimum",
                "torch.atan2",
                "torch.hypot",
                "torch.fmod",
                "torch.remainder",
                "//",
                "torch.pow",
                "torch.clamp",
            ]
        )
    )
    if op in ("torch.atan2", "torch.hypot"):
        return f"{op}({_as_float(a, v[a])}, {_as_float(b, v[b])})"
    if op in ("torch.fmod", "torch.remainder", "//"):  # by a nonzero constant: integer x % 0 is an error
        by = draw(st.sampled_from(["3", "-2", "1.5"]))
        return f"({a} // {by})" if op == "//" else f"{op}({a}, {by})"
    if op == "torch.pow":
        return f"torch.pow({a}, {draw(st.sampled_from(['2', '3', '0.5', '-1']))})"
    if op == "torch.clamp":
        low, high = draw(st.sampled_from(["-1", "0", "None"])), draw(st.sampled_from(["2", "0.5"]))
        return f"torch.clamp({a}, min={low}, max={high})"
    return f"({a} {op} {b})" if len(op) == 1 else f"{op}({a}, {b})"


def compare(draw: Draw, v: Values) -> str | None:
    a, b = _pick(draw, v), _pick(draw, v)
    op = draw(st.sampled_from(["<", "<=", ">", "==", "!="]))
    return f"({a} {op} {b})"


def logical(draw: Draw, v: Values) -> str | None:
    a, b = _pick(draw, v, lambda t: t.dtype == torch.bool), _pick(draw, v, lambda t: t.dtype == torch.bool)
    if a is None:
        return None
    op = draw(st.sampled_from(["torch.logical_and", "torch.logical_or", "torch.logical_xor"]))
    return f"torch.logical_not({a})" if draw(st.booleans()) else f"{op}({a}, {b})"


def where(draw: Draw, v: Values) -> str | None:
    c = _pick(draw, v, lambda t: t.dtype == torch.bool)
    if c is None:
        return None
    a = _pick(draw, v)
    b = _pick(draw, v) if draw(st.booleans()) else draw(st.sampled_from(["0.0", "1", "-2.5"]))
    if draw(st.booleans()):
        return f"{a}.masked_fill({c}, {draw(st.sampled_from(['0', '-1', '2']))})"
    return f"torch.where({c}, {a}, {b})"


def constant(draw: Draw, v: Values) -> str | None:
    a = _pick(draw, v, lambda t: t.dtype != torch.bool)
    if a is None:
        return None
    t = v[a]
    if t.dim() and draw(st.booleans()):  # a constant tensor along the last dim (or broadcast from 1)
        n = draw(st.sampled_from([t.shape[-1], 1]))
        values = draw(st.lists(st.integers(-16, 16), min_size=n, max_size=n))
        floats = [x / 4 for x in values] if _float(t) else values
        const = f"torch.tensor({floats})"
    else:
        const = draw(st.sampled_from(["2", "0.5", "-1.25", "3"]))
    op = draw(st.sampled_from(["+", "-", "*", "/"]))
    return f"({a} {op} {const})" if draw(st.booleans()) else f"({const} {op} {a})"


def cast(draw: Draw, v: Values) -> str | None:
    a = _pick(draw, v)
    assert a is not None
    to = draw(st.sampled_from(sorted(set(DTYPE_NAMES.values()))))
    if _float(v[a]) and to != "torch.float32":  # NaN/Inf to an integer is undefined: make them finite
        return f"torch.nan_to_num({a}.clamp(-64, 64)).to({to})"
    return f"{a}.to({to})"


def reduce(draw: Draw, v: Values) -> str | None:
    a = _pick(draw, v, lambda t: t.dim() > 0)
    if a is None:
        return None
    t, keep = v[a], draw(st.booleans())
    d = _dim(draw, t)
    op = draw(
        st.sampled_from(
            [
                "sum",
                "mean",
                "amax",
                "amin",
                "prod",
                "argmax",
                "argmin",
                "softmax",
                "log_softmax",
                "cumsum",
                "all",
                "any",
                "logsumexp",
                "norm",
            ]
        )
    )
    if op in ("mean", "softmax", "log_softmax", "logsumexp", "norm"):
        x = _as_float(a, t)
        if op in ("softmax", "log_softmax"):
            return f"torch.{op}({x}, {d})"
        if op == "norm":
            return f"torch.linalg.vector_norm({x}, dim={d}, keepdim={keep})"
        return f"torch.{op}({x}, {d}, keepdim={keep})"
    if op == "cumsum":
        return f"torch.cumsum({a}, {d})"
    if op in ("argmax", "argmin", "all", "any"):
        return f"torch.{op}({a}, {d}, keepdim={keep})"
    if op == "sum" and draw(st.booleans()):
        return f"{a}.sum()"
    return f"torch.{op}({a}, {d}, keepdim={keep})"


def view(draw: Draw, v: Values) -> str | None:
    a = _pick(draw, v)
    assert a is not None
    t = v[a]
    r = t.dim()
    choices = ["unsqueeze", "flatten", "reshape"]
    if r >= 1:
        choices += ["slice", "narrow", "flip", "index", "index_select", "expand"]
    if r >= 2:
        choices += ["transpose", "permute", "squeeze_view"]
    op = draw(st.sampled_from(choices))
    if op == "unsqueeze":
        return f"{a}.unsqueeze({draw(st.integers(-r - 1, r))})"
    if op == "flatten":
        return f"{a}.flatten()"
    if op == "reshape":  # merge two neighbouring dims, or split one into (1, n)
        shape = list(t.shape)
        if r >= 2 and draw(st.booleans()):
            i = draw(st.integers(0, r - 2))
            shape[i : i + 2] = [shape[i] * shape[i + 1]]
        else:
            i = draw(st.integers(0, max(r - 1, 0)))
            shape[i : i + 1] = [1, shape[i]] if r else [1]
        if shape and draw(st.booleans()):
            shape[draw(st.integers(0, len(shape) - 1))] = -1
        return f"{a}.reshape({tuple(shape)})"
    d = _dim(draw, t)
    if op == "slice":
        return f"{a}[{'..., ' if draw(st.booleans()) else ''}{draw(st.sampled_from(['::2', '1:', ':-1', '1::2']))}]"
    if op == "narrow":
        size = t.shape[d]
        start = draw(st.integers(0, size - 1))
        return f"{a}.narrow({d}, {start}, {draw(st.integers(1, size - start))})"
    if op == "flip":
        return f"{a}.flip({d})"
    if op == "index":
        return f"{a}.select({d}, {draw(st.integers(-t.shape[d], t.shape[d] - 1))})"
    if op == "index_select":
        picks = draw(st.lists(st.integers(0, t.shape[d] - 1), min_size=1, max_size=3))
        return f"torch.index_select({a}, {d}, torch.tensor({picks}))"
    if op == "expand":
        return f"{a}.unsqueeze(0).expand(2, *{a}.shape)"
    if op == "transpose":
        return f"{a}.transpose({d}, {_dim(draw, t)})"
    if op == "permute":
        return f"{a}.permute({tuple(draw(st.permutations(range(r))))})"
    return f"{a}[:, None].squeeze(1)"


def matmul(draw: Draw, v: Values) -> str | None:
    a = _pick(draw, v, lambda t: t.dim() >= 2 and _float(t))
    if a is None:
        return None
    t = v[a]
    if draw(st.booleans()):
        n = draw(st.integers(1, 3))
        w = [[(i * 3 + j) % 5 / 4 - 0.5 for j in range(n)] for i in range(t.shape[-1])]
        return f"({a} @ torch.tensor({w}))"
    return f"torch.matmul({a}, {a}.transpose(-1, -2))"


def join(draw: Draw, v: Values) -> str | None:
    a = _pick(draw, v, lambda t: t.dim() > 0)
    if a is None:
        return None
    t = v[a]
    same = [n for n, u in v.items() if u.shape == t.shape and u.dtype == t.dtype]
    b = draw(st.sampled_from(same))
    if draw(st.booleans()):
        return f"torch.cat([{a}, {b}], {_dim(draw, t)})"
    return f"torch.stack([{a}, {b}], {draw(st.integers(-t.dim() - 1, t.dim()))})"


def multi(draw: Draw, v: Values) -> str | None:
    """Ops with several outputs; their index outputs stay unused (ties make any order right)."""
    a = _pick(draw, v, lambda t: t.dim() > 0 and t.dtype != torch.bool)
    if a is None:
        return None
    t = v[a]
    d = _dim(draw, t)
    op = draw(st.sampled_from(["topk", "max", "split", "chunk", "var_mean", "sort", "min"]))
    if op == "topk":
        return f"torch.topk({a}, {draw(st.integers(1, t.shape[d]))}, {d}, largest={draw(st.booleans())}).values"
    if op in ("max", "min"):
        return f"torch.{op}({a}, {d}, keepdim={draw(st.booleans())}).values"
    if op == "sort":
        return f"torch.sort({a}, {d}, descending={draw(st.booleans())}).values"
    if op == "var_mean":
        return f"torch.var_mean({_as_float(a, t)}, {d})"
    if op == "split":
        return f"torch.split({a}, {draw(st.integers(1, max(t.shape[d], 1)))}, {d})"
    return f"torch.chunk({a}, {draw(st.integers(1, 3))}, {d})"


def nn(draw: Draw, v: Values) -> str | None:
    """torch.nn.functional layers on float values of rank 3 (N, C, L) or any rank for the rest."""
    a = _pick(draw, v, lambda t: _float(t) and t.dim() > 0)
    if a is None:
        return None
    t = v[a]
    op = draw(
        st.sampled_from(
            [
                "gelu",
                "layer_norm",
                "pad",
                "hardswish",
                "leaky_relu",
                "elu",
                "silu",
                "softplus",
                "pool",
                "conv1d",
                "interpolate",
                "normalize",
            ]
        )
    )
    if op == "layer_norm":
        return f"torch.nn.functional.layer_norm({a}, ({t.shape[-1]},))"
    if op == "pad":
        return (
            f"torch.nn.functional.pad({a}, {tuple(draw(st.lists(st.integers(0, 2), min_size=2, max_size=2)))}, "
            f"value={draw(st.sampled_from(['0.0', '-1.5']))})"
        )
    if op == "normalize":
        return f"torch.nn.functional.normalize({a}, dim={_dim(draw, t)})"
    if op in ("pool", "conv1d", "interpolate") and t.dim() != 3:
        return None
    if op == "pool":
        kind = draw(st.sampled_from(["max_pool1d", "avg_pool1d"]))
        k = draw(st.integers(1, t.shape[-1]))
        stride, ceil = draw(st.integers(1, 2)), draw(st.booleans())
        return f"torch.nn.functional.{kind}({a}, {k}, stride={stride}, ceil_mode={ceil})"
    if op == "conv1d":
        out, k = draw(st.integers(1, 3)), draw(st.integers(1, t.shape[-1]))
        w = [[[(i + 2 * j + 3 * m) % 5 / 4 - 0.5 for m in range(k)] for j in range(t.shape[1])] for i in range(out)]
        return f"torch.nn.functional.conv1d({a}, torch.tensor({w}), padding={draw(st.integers(0, k - 1))})"
    if op == "interpolate":
        mode = draw(st.sampled_from(["nearest", "linear"]))
        return f"torch.nn.functional.interpolate({a}, scale_factor=2, mode={mode!r})"
    return f"torch.nn.functional.{op}({a})"


OPS = [unary, binary, compare, logical, where, constant, cast, reduce, view, matmul, join, multi, nn]


def _draw_line(draw: Draw, ops: Sequence[Callable[..., str | None]], values: Values) -> tuple[str, Any] | None:
    """One line's expression and its eager value (a tensor or a tuple of them, 512 elements at
    most each), drawn from `ops` over `values`; a line torch rejects is drawn again, five times."""
    for _attempt in range(5):
        expr = draw(st.sampled_from(ops))(draw, values)
        if expr is None:
            continue
        try:
            result = eval(expr, {"torch": torch}, dict(values))  # noqa: S307 (our own generated code)
        except (RuntimeError, IndexError, ValueError, TypeError):
            continue  # torch rejects this line: draw another
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        if results and all(r.numel() <= 512 for r in results):
            return expr, result
    return None


@st.composite
def programs(draw: Draw) -> Program:
    rank = draw(st.integers(0, 3))
    base = [draw(st.integers(1, 4)) for _ in range(rank)]
    shapes = []
    for _ in range(draw(st.integers(1, 3))):  # each broadcasts to `base`
        drop = draw(st.integers(0, rank))
        shapes.append(
            tuple(d if draw(st.booleans()) else 1 for d in base[drop:]) if draw(st.booleans()) else tuple(base)
        )
    dtypes = [draw(st.sampled_from(DTYPES)) for _ in shapes]
    program = Program(shapes, dtypes, draw(st.integers(0, 2**31 - 1)))
    values: Values = {f"x{i}": t for i, t in enumerate(program.inputs())}
    for k in range(draw(st.integers(1, MAX_LINES))):
        line = _draw_line(draw, OPS, values)
        if line is None:
            continue
        expr, result = line
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        names = [f"v{k}_{j}" for j in range(len(results))]
        unpack = "," if len(names) == 1 and isinstance(result, (tuple, list)) else ""  # a 1-tuple
        program.lines.append(f"{', '.join(names)}{unpack} = {expr}")
        values.update(zip(names, results))
    made = [n for n in values if n.startswith("v")] or list(values)
    extra = draw(st.lists(st.sampled_from(made), max_size=2, unique=True))
    program.outputs = list(dict.fromkeys([made[-1], *extra]))
    return program


def broken(report: trt_lower.LoweringReport) -> list[str]:
    """The eager fallbacks a converter or an engine build failed into (bugs, not refusals)."""
    return [
        f"{f.node}: {f.reason}"
        for f in report.fallbacks
        if "could not build" in f.reason or re.match(r"converter for \S+ failed", f.reason)
    ]


def check(code: str, inputs: tuple[torch.Tensor, ...], description: str) -> None:
    """Lower the program and compare with eager; a failure prints `description` (code and seed).
    A node that runs eagerly because its converter or its engine's build failed is a failure too."""
    fn = compile_program(code)
    expected = fn(*inputs)
    try:
        lowered = trt_lower.lower_to_trt(Module(fn), inputs, backend="onnxruntime", min_block_size=1)
        failures = broken(lowered.report)
        assert not failures, "converter/build failures behind fallbacks:\n" + "\n".join(failures)
        actual = lowered(*inputs)
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4, equal_nan=True)
    except Exception as e:
        raise AssertionError(f"lowered program fails ({type(e).__name__}: {e})\n{description}") from e


def reproduce(code: str, shapes: list[tuple[int, ...]], dtypes: list[str], seed: int) -> None:
    """Rerun one failing program from what a failure printed."""
    program = Program(shapes, [getattr(torch, d.removeprefix("torch.")) for d in dtypes], seed)
    check(code, program.inputs(), code)


@settings(PROFILE)
@given(programs())
def test_random_programs_lower_to_what_eager_computes(program: Program) -> None:
    note(program.describe())
    check(program.code, program.inputs(), program.describe())


# -- structure: layers over intermediates that are also returned, in any structure --------------
# A program of linear/conv layers (constant weights, as a module's), activations, views and
# arithmetic over float inputs, returning random intermediates, views of them, inputs and the
# same value twice, in tuples, lists and dicts nested up to two deep.


def _weights(rows: int, cols: int, salt: int) -> list[list[float]]:
    """Multiples of 1/8 in [-1, 1): with inputs in multiples of 1/8, sums of products stay exact."""
    return [[((i * 7 + j * 3 + salt) % 16 - 8) / 8 for j in range(cols)] for i in range(rows)]


def _latest(draw: Draw, v: Values, where: Callable[[torch.Tensor], bool]) -> str | None:
    """A value, the latest made first (hypothesis draws the first choice most): layers chain."""
    names = [n for n, t in reversed(v.items()) if where(t)]
    return draw(st.sampled_from(names)) if names else None


def linear(draw: Draw, v: Values) -> str | None:
    a = _latest(draw, v, lambda t: _float(t) and t.dim() >= 1 and t.shape[-1] <= 16)
    if a is None:
        return None
    out, salt = draw(st.integers(1, 6)), draw(st.integers(0, 15))
    bias = f", torch.tensor({_weights(1, out, salt + 1)[0]})" if draw(st.sampled_from([True, False])) else ""
    return f"torch.nn.functional.linear({a}, torch.tensor({_weights(out, v[a].shape[-1], salt)}){bias})"


def conv(draw: Draw, v: Values) -> str | None:
    a = _latest(draw, v, lambda t: _float(t) and t.dim() == 4 and t.shape[1] <= 8)
    if a is None:
        return None
    out, k = draw(st.integers(1, 4)), draw(st.sampled_from([1, 3]))
    w = [
        [[[(i + 2 * j + 3 * m + n) % 5 / 4 - 0.5 for n in range(k)] for m in range(k)] for j in range(v[a].shape[1])]
        for i in range(out)
    ]
    return f"torch.nn.functional.conv2d({a}, torch.tensor({w}), padding={k // 2})"


def head(draw: Draw, v: Values) -> str | None:
    """What a CNN's head does to its feature map: pool, flatten."""
    a = _latest(draw, v, lambda t: _float(t) and t.dim() == 4)
    if a is None:
        return None
    return str(
        draw(
            st.sampled_from(
                [
                    f"torch.flatten(torch.nn.functional.adaptive_avg_pool2d({a}, 1), 1)",
                    f"{a}.mean((2, 3))",
                    f"{a}.flatten(1)",
                    f"torch.nn.functional.max_pool2d({a}, 2)",
                ]
            )
        )
    )


def alias(draw: Draw, v: Values) -> str | None:
    """Ops that make no new values: a copy, a same-shape view, a transpose."""
    a = _pick(draw, v, _float)
    assert a is not None
    ops = [f"{a}.clone()", f"{a}.contiguous()", f"{a}.view({tuple(v[a].shape)})", f"{a}.detach()"]
    if v[a].dim() == 2:
        ops.append(f"{a}.t()")
    return str(draw(st.sampled_from(ops)))


def activation(draw: Draw, v: Values) -> str | None:
    a = _latest(draw, v, _float)
    return f"torch.{draw(st.sampled_from(['relu', 'sigmoid', 'tanh', 'neg']))}({a})"


STRUCTURE_OPS = [activation, linear, linear, alias, conv, head, view, binary, constant]


def _returned(draw: Draw, values: Values, read: list[str], depth: int) -> str:
    """A leaf (a value, or a view of one; half of them values other lines read, as a classifier's
    features) or, above depth 0, a tuple, list or dict of returns."""
    kind = draw(st.sampled_from(["leaf", "leaf", "tuple", "list", "dict"] if depth else ["leaf"]))
    if kind == "leaf":
        name = draw(st.sampled_from(read if read and draw(st.booleans()) else list(values)[::-1]))
        t = values[name]
        # An empty leading dim has no [0]: its first rows, none (as many views, so the draws stay the same).
        first = f"{name}[0]" if t.dim() and t.shape[0] else f"{name}[:1]"
        views = [name, name, f"{name}.reshape(-1)"] + ([first, f"{name}.transpose(0, -1)"] if t.dim() else [])
        return str(draw(st.sampled_from(views)))
    items = [_returned(draw, values, read, depth - 1) for _ in range(draw(st.integers(1, 3)))]
    if kind == "dict":
        return "{" + ", ".join(f"'k{i}': {item}" for i, item in enumerate(items)) + "}"
    return f"({', '.join(items)},)" if kind == "tuple" else f"[{', '.join(items)}]"


@st.composite
def structured_programs(draw: Draw) -> Program:
    shapes = [
        tuple(draw(st.integers(1, 4)) for _ in range(draw(st.sampled_from([2, 4, 3]))))
        for _ in range(draw(st.integers(1, 2)))
    ]
    program = Program(shapes, [torch.float32] * len(shapes), draw(st.integers(0, 2**31 - 1)))
    values: Values = {f"x{i}": t for i, t in enumerate(program.inputs())}
    for k in range(draw(st.integers(3, MAX_LINES))):
        line = _draw_line(draw, STRUCTURE_OPS, values)
        if line is not None:
            program.lines.append(f"v{k} = {line[0]}")
            values[f"v{k}"] = line[1]
    # The last value as it is (its layers are no dead code), a value other lines read as it is (a
    # classifier's features beside its logits), then anything.
    last = list(values)[-1]
    read = [n for n in values if any(re.search(rf"\b{n}\b", line.split(" = ", 1)[1]) for line in program.lines)]
    features = f"{draw(st.sampled_from(read[::-1]))}, " if read else ""
    program.returns = f"({last}, {features}{_returned(draw, values, read, 2)})"
    return program


def together(programs: list[Program]) -> Program:
    """Several programs as one, each reading inputs of its own, their returns in one tuple: one
    capture for several graphs (torch.export's fixed cost is most of a small graph's lowering)."""
    whole = Program([], [], programs[0].seed)
    returns = []
    for j, program in enumerate(programs):
        first = len(whole.shapes)

        def rename(text: str) -> str:
            return re.sub(
                r"\b([xv])(\d+)\b", lambda m: f"x{int(m[2]) + first}" if m[1] == "x" else f"v{j}_{m[2]}", text
            )

        whole.shapes += program.shapes
        whole.dtypes += program.dtypes
        whole.lines += map(rename, program.lines)
        returns.append(rename(program.returns or f"({', '.join(program.outputs)},)"))
    whole.returns = f"({', '.join(returns)},)"
    return whole


GRAPHS_PER_MODEL = 6


@settings(PROFILE, max_examples=PROFILE.max_examples // GRAPHS_PER_MODEL)
@given(st.lists(structured_programs(), min_size=GRAPHS_PER_MODEL, max_size=GRAPHS_PER_MODEL).map(together))
def test_random_graphs_return_any_intermediates(program: Program) -> None:
    note(program.describe())
    check(program.code, program.inputs(), program.describe())
