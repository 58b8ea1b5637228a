"""Whatever a model's forward names its arguments, lowering, save/load and the Triton export work:
the names travel into size conditions (runtime/conditions.py), guard errors and Triton configs.
Names FX renames (`input` -> `input_1`, `größe` -> `gr__e`), builtins the conditions call (`min`,
`max`, `abs`, `math`, `torch`), `self` (a name torch's generated code takes for the module) and
non-ASCII identifiers (`ﬁx`, read as `fix` by Python) are all among those drawn."""

from __future__ import annotations

import keyword
import unicodedata
from pathlib import Path

import pytest
import torch
from google.protobuf import text_format
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import trt_lower
from trt_lower.runtime.conditions import compile_condition
from trt_lower.triton import export_model_repository
from trt_lower.triton.backend import Runner

model_config_pb2 = pytest.importorskip("tritonclient.grpc.model_config_pb2")

SPECS = (trt_lower.TensorSpec((2, 4), (4, 8), (8, 8)), trt_lower.TensorSpec((1, 1), (2, 3), (8, 8), torch.int64))


def scatter_module(a: str, b: str) -> torch.nn.Module:
    """The issue's module, its arguments named `a` and `b`: under SPECS, torch.export captures it
    under the size condition `b.shape[0] <= a.shape[0]`."""
    namespace: dict[str, object] = {"torch": torch}
    exec(
        f"class Scatter(torch.nn.Module):\n"
        f"    def forward(this, {a}, {b}):\n"
        f"        return {a}.scatter(1, {b}, 1.0) * 2\n",
        namespace,
    )
    module: torch.nn.Module = namespace["Scatter"]()  # type: ignore[operator]
    return module


def _usable(name: str) -> bool:
    normal = unicodedata.normalize("NFKC", name)
    return normal.isidentifier() and not keyword.iskeyword(normal) and normal != "this"


NAMES = st.one_of(
    st.sampled_from(
        [
            "input",
            "len",
            "max",
            "min",
            "abs",
            "int",
            "math",
            "torch",
            "self",
            "inputs",
            "s0",
            "L",
            "inf",
            "getattr",
            "größe",
            "ﬁx",
            "Δ",
            "用户",
            "_",
        ]
    ),
    st.from_regex(r"[^\W\d]\w{0,5}", fullmatch=True).filter(_usable),
)


def _lowers_saves_and_serves(a: str, b: str, tmp_path: Path) -> None:
    model = scatter_module(a, b)
    lowered = trt_lower.lower_to_trt(model, SPECS, backend="onnxruntime", min_block_size=1, require_full=True)
    assert lowered.report.coverage == 1.0
    trt_lower.save(lowered, tmp_path / "m.trtl")
    loaded = trt_lower.load(tmp_path / "m.trtl")
    x, index = torch.randn(5, 6), torch.randint(0, 6, (3, 2))
    expected = model(x, index)
    for module in (lowered, loaded):
        torch.testing.assert_close(module(x, index), expected)
        # The size condition is read off the right inputs: more index rows than input rows break it.
        with pytest.raises(trt_lower.EngineInputError, match=r"break a condition .* <= "):
            module(x, torch.randint(0, 6, (6, 2)))
    exported = export_model_repository(lowered, tmp_path / "repo", "m")
    config = text_format.Parse((exported.path / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
    inputs, outputs = [t.name for t in config.input], [t.name for t in config.output]
    runner = Runner.from_artifact(str(exported.path / "1" / "model.trtl"), inputs, outputs, "cpu", batching=False)
    (reply,) = runner.run([dict(zip(inputs, (x, index)))])
    assert not isinstance(reply, Exception), reply
    torch.testing.assert_close(reply[outputs[0]], expected)


def test_forward_input_with_a_size_condition(tmp_path: Path) -> None:
    """`forward(self, input, index)`, as torch's own modules name it: FX calls the input `input_1`."""
    _lowers_saves_and_serves("input", "index", tmp_path)


@settings(
    max_examples=8,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(a="self", b="min")
@example(a="math", b="torch")
@example(a="max", b="abs")
@example(a="ﬁx", b="größe")
@given(a=NAMES, b=NAMES)
def test_any_argument_names(a: str, b: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    if unicodedata.normalize("NFKC", a) == unicodedata.normalize("NFKC", b):
        b = b + "_2"
    _lowers_saves_and_serves(a, b, tmp_path_factory.mktemp("names"))


def test_a_condition_reads_a_name_by_its_place() -> None:
    """Inputs named like the functions a condition calls: `min(...)` is the function, `min.shape`
    the input."""
    function = compile_condition(
        "min(min.shape[0], math.shape[0]) == math.floor(torch.sym_float(ﬁ.shape[0]) / 2)", ["min", "math", "fi"]
    )
    assert function(*(torch.empty(n) for n in (3, 4, 6))) and not function(*(torch.empty(n) for n in (3, 4, 8)))
    with pytest.raises(ValueError, match="'min.__class__' is not allowed"):
        compile_condition("min.__class__ == 1", ["min"])
