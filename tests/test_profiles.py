"""Several optimization profiles per engine (lower_to_trt's `profiles`): the user's profiles checked,
each call run on the tightest profile that holds it and refused outside all of them, on ONNX
Runtime and on the TensorRT double (one engine built with exactly those profiles, one execution
context per profile in use), saved and loaded in a fresh process."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

import trt_lower
from trt_lower import EngineInputError, TensorSpec
from trt_lower.runtime.profiles import ProfileChoice
from trt_lower.values.signature import TensorSig

ROOT = Path(__file__).resolve().parent.parent
WIDE = TensorSpec((1, 8), (16, 8), (64, 8))
BUCKETS = [TensorSpec((1, 8), (2, 8), (4, 8)), TensorSpec((16, 8), (32, 8), (64, 8))]


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x))) * 2.0


def _lower(backend: str, **kwargs: Any) -> tuple[torch.nn.Module, trt_lower.LoweredModule]:
    model = Mlp().eval()
    return model, trt_lower.lower_to_trt(model, WIDE, profiles=BUCKETS, backend=backend, verify=False, **kwargs)


def _check_calls(model: torch.nn.Module, lowered: torch.nn.Module, batches: tuple[int, ...] = (1, 4, 16, 64)) -> None:
    with torch.no_grad():
        for batch in batches:
            x = torch.randn(batch, 8)
            torch.testing.assert_close(lowered(x), model(x))


def _refuses_batch_8(lowered: torch.nn.Module) -> None:
    # Inside the range `inputs` declares (the input guard passes it), in neither profile.
    with pytest.raises(
        EngineInputError, match=r"'x' \(8, 8\) fits none.*profile 0: 'x' \(1\.\.4, 8\); profile 1: 'x' \(16\.\.64, 8\)"
    ):
        lowered(torch.randn(8, 8))


def test_two_profiles_on_onnxruntime_run_each_and_refuse_between() -> None:
    model, lowered = _lower("onnxruntime")
    _check_calls(model, lowered)
    _refuses_batch_8(lowered)
    assert isinstance(EngineInputError("x"), ValueError)
    assert lowered.report.engines[0].profiles == ["'x' (1..4, 8)", "'x' (16..64, 8)"]
    assert "profile 1: 'x' (16..64, 8)" in str(lowered.report)


def test_a_profile_may_fix_a_dim_the_range_leaves_dynamic() -> None:
    """A profile of one size in a dynamic dim (a decode step's one token) has that size, not the
    declared range: batch 2 fits only the second profile."""
    model = Mlp().eval()
    one = [TensorSpec((1, 8), (1, 8), (1, 8)), TensorSpec((16, 8), (32, 8), (64, 8))]
    lowered = trt_lower.lower_to_trt(model, WIDE, profiles=one, backend="onnxruntime", verify=False)
    assert lowered.report.engines[0].profiles == ["'x' (1, 8)", "'x' (16..64, 8)"]
    _check_calls(model, lowered, (1, 16))
    with pytest.raises(EngineInputError, match=r"'x' \(2, 8\) fits none"):
        lowered(torch.randn(2, 8))


def test_one_range_has_no_profiles_and_runs_between() -> None:
    """Without `profiles`, batch 8 runs: the refusal above is the profiles'."""
    model = Mlp().eval()
    lowered = trt_lower.lower_to_trt(model, WIDE, backend="onnxruntime", verify=False)
    _check_calls(model, lowered, (8,))
    assert lowered.report.engines[0].profiles == []


@pytest.mark.parametrize(
    "profiles, message",
    [
        ([], r"profiles must be a non-empty list"),
        (
            [TensorSpec((1, 8), (2, 8), (128, 8))],
            r"profiles\[0\] inputs\[0\] dim 0: 1\.\.128 is outside the input's range 1\.\.64",
        ),
        (
            [BUCKETS[0], TensorSpec((2, 4), (2, 4), (4, 4))],
            r"profiles\[1\] inputs\[0\] dim 1: 4\.\.4 is outside the input's range 8\.\.8",
        ),
        (
            [TensorSpec((1, 8), (2, 8), (4, 8), torch.float16)],
            r"profiles\[0\] inputs\[0\] is .* float16.*keeps rank and dtype",
        ),
        ([(BUCKETS[0], BUCKETS[1])], r"profiles\[0\] must have the structure of inputs and kwargs"),
        ([{"input": BUCKETS[0]}], r"profiles\[0\] takes the keys 'inputs' and 'kwargs', got \['input'\]"),
        ([0.5], r"profiles\[0\] must be a tensor or a tuple"),
        ([BUCKETS[0]], r"the opt shapes of inputs and kwargs \(inputs\[0\] \(16, 8\)\) lie in no profile"),
    ],
)
def test_bad_profiles_are_refused_by_name(profiles: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        trt_lower.lower_to_trt(Mlp().eval(), WIDE, profiles=profiles, backend="onnxruntime", verify=False)


def test_a_profile_may_be_a_dict_with_its_inputs_and_kwargs() -> None:
    model = Mlp().eval()
    lowered = trt_lower.lower_to_trt(
        model, (WIDE,), profiles=[{"inputs": (BUCKETS[0],)}, {"inputs": [BUCKETS[1]], "kwargs": {}}], verify=False
    )
    _check_calls(model, lowered)
    _refuses_batch_8(lowered)


class Masked(torch.nn.Module):
    """Keyword input beside the positional one, and a size computed from the batch (`cat`, kept
    eager) in front of the engine."""

    def __init__(self) -> None:
        super().__init__()
        self.mlp = Mlp()

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.cat([x, x * mask]))


def test_profiles_of_keyword_inputs_and_of_sizes_computed_from_them() -> None:
    model = Masked().eval()
    profiles = [{"inputs": (bucket,), "kwargs": {"mask": bucket}} for bucket in BUCKETS]
    lowered = trt_lower.lower_to_trt(
        model, (WIDE,), kwargs={"mask": WIDE}, profiles=profiles, fallback_ops=["aten.cat.default"], verify=False
    )
    engine: Any = lowered.engine_0
    assert engine.inputs[0].profiles == (((2, 8), (4, 8), (8, 8)), ((32, 8), (64, 8), (128, 8)))  # 2 * batch
    with torch.no_grad():
        for batch in (2, 33):
            x, mask = torch.randn(batch, 8), torch.randn(batch, 8)
            torch.testing.assert_close(lowered(x, mask=mask), model(x, mask=mask))
    with pytest.raises(EngineInputError, match=r"profile 0: '\w+' \(2\.\.8, 8\); profile 1: '\w+' \(32\.\.128, 8\)"):
        lowered(torch.randn(8, 8), mask=torch.randn(8, 8))


class Pooled(torch.nn.Module):
    """The batch summed away (eagerly) before the engine."""

    def __init__(self) -> None:
        super().__init__()
        self.mlp = Mlp()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(x.sum(0, keepdim=True))


def test_an_engine_after_the_dims_that_differ_has_one_profile(trt_double: ModuleType) -> None:
    model = Pooled().eval()
    lowered = trt_lower.lower_to_trt(
        model, WIDE, profiles=BUCKETS, backend="tensorrt", fallback_ops=["aten.sum.dim_IntList"], verify=False
    )
    engine: Any = lowered.engine_0
    assert engine.inputs[0].profiles == () and engine.inputs[0].min_shape == (1, 8)
    assert len(trt_double.state.last_build.profiles) == 1
    assert lowered.report.engines[0].profiles == []
    _check_calls(model, lowered, (3, 8, 40))  # batch 8 reaches no engine that tells the profiles apart


def _sig(*ranges: tuple[int, int, int]) -> TensorSig:
    profiles = tuple(((lo,), (opt,), (hi,)) for lo, opt, hi in ranges)
    low, high = min(r[0] for r in ranges), max(r[2] for r in ranges)
    return TensorSig("x", "x", torch.float32, (low,), (low,), (high,), profiles)


def test_the_tightest_profile_wins_then_the_nearest_opt() -> None:
    choice = ProfileChoice("engine_0: ", [_sig((1, 32, 64), (1, 2, 4), (3, 3, 6))])
    assert choice(((2,),)) == 1  # 1..4 and 1..64 hold it: 1..4 spans fewer sizes
    assert choice(((3,),)) == 2  # 1..4 and 3..6 span 4 sizes each: opt 3 is nearer than opt 2
    assert choice(((5,),)) == 2
    assert choice(((40,),)) == 0
    with pytest.raises(EngineInputError, match=r"'x' \(65,\) fits none"):
        choice(((65,),))


# -- the TensorRT double ---------------------------------------------------------------------------
def test_on_the_double_one_engine_has_exactly_the_profiles(trt_double: ModuleType, tmp_path: Path) -> None:
    model, lowered = _lower("tensorrt")
    assert trt_double.state.builds == 1
    assert trt_double.state.last_build.profiles == [{"x": ((1, 8), (2, 8), (4, 8))}, {"x": ((16, 8), (32, 8), (64, 8))}]
    created = trt_double.state.contexts_created  # the one made at load, which serves profile 0
    _check_calls(model, lowered, (1, 3, 20, 64, 2, 16))
    assert [profile for profile, _ in trt_double.state.tuned] == [0, 0, 1, 1, 0, 1]
    assert trt_double.state.contexts_created == created + 1  # one context per profile in use
    _refuses_batch_8(lowered)

    trt_lower.save(lowered, tmp_path / "m.trtl")
    loaded = trt_lower.load(tmp_path / "m.trtl", backend="tensorrt")
    assert trt_double.state.builds == 1  # the file's plan, with both profiles
    _check_calls(model, loaded)
    _refuses_batch_8(loaded)


def test_cuda_graphs_capture_each_profile_on_its_own_context(trt_double: ModuleType) -> None:
    model, lowered = _lower("tensorrt", cuda_graphs=True)
    _check_calls(model, lowered, (3, 40, 3, 40))  # captured, then replayed
    # Each shape captured once (a warm-up run, then the recorded one), on its profile; replays enqueue nothing.
    assert [profile for profile, _ in trt_double.state.tuned] == [0, 0, 1, 1]
    _refuses_batch_8(lowered)


def _engine_of_two_profiles(double: ModuleType) -> Any:
    builder = importlib.import_module("trt_lower.engine.trt_builder")
    options = importlib.import_module("trt_lower.engine.build_options")
    onnx_bytes = _dynamic_relu()
    profiles = [
        [options.InputProfile("x", (1, 3), (2, 3), (4, 3))],
        [options.InputProfile("x", (8, 3), (8, 3), (16, 3))],
    ]
    plan, _ = builder.build_plan(onnx_bytes, profiles, options.BuildOptions(), b"")
    logger = importlib.import_module("trt_lower.runtime.trt_logger").LOGGER
    return double.Runtime(logger).deserialize_cuda_engine(plan), logger


def _dynamic_relu() -> bytes:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu/Relu")],
        "engine_0",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


@pytest.mark.parametrize("trt_double", ["10.13.0"], indirect=True)
def test_the_double_checks_shapes_against_the_active_profile(trt_double: ModuleType) -> None:
    engine, logger = _engine_of_two_profiles(trt_double)
    assert engine.num_optimization_profiles == 2
    assert [list(d) for d in engine.get_tensor_profile_shape("x", 1)] == [[8, 3], [8, 3], [16, 3]]
    with pytest.raises(ValueError, match="no profile 2"):
        engine.get_tensor_profile_shape("x", 2)
    context = engine.create_execution_context()
    assert context.active_optimization_profile == 0
    assert not context.set_input_shape("x", (8, 3))  # profile 0 is 1..4
    assert "outside the optimization profile" in logger.take_errors()
    assert context.set_input_shape("x", (2, 3))
    assert not context.set_optimization_profile_async(2, 0)
    assert "profile 2 is not in [0, 2)" in logger.take_errors()
    assert context.set_optimization_profile_async(1, 0)
    assert context.active_optimization_profile == 1
    assert context.set_tensor_address("x", 4096) and context.set_tensor_address("y", 8192)  # never read
    assert not context.execute_async_v3(0)  # switching dropped the shapes set on profile 0
    assert "input shapes not set" in logger.take_errors()
    assert context.set_input_shape("x", (8, 3))
    # 10.x shares profiles between contexts.
    other = engine.create_execution_context()
    assert other.set_optimization_profile_async(1, 0) and other.set_input_shape("x", (16, 3))


@pytest.mark.parametrize("trt_double", ["8.6.1"], indirect=True)
def test_before_10_an_unshared_profile_serves_one_context(
    trt_double: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The builder shares profiles on 8.6 (PROFILE_SHARING_0806): without it, a profile is one context's.
    monkeypatch.setattr(trt_double.IBuilderConfig, "set_preview_feature", lambda self, feature, enable: None)
    engine, logger = _engine_of_two_profiles(trt_double)
    first, second = engine.create_execution_context(), engine.create_execution_context()
    assert first.set_optimization_profile_async(1, 0)
    assert not second.set_optimization_profile_async(1, 0)
    assert "profile 1 has been chosen by another" in logger.take_errors()
    assert second.set_input_shape("x", (2, 3))  # profile 0 is free


def test_an_engine_of_other_profiles_does_not_load(trt_double: ModuleType) -> None:
    engine_module = importlib.import_module("trt_lower.runtime.trt_module")
    _, lowered = _lower("tensorrt")
    engine: Any = lowered.engine_0
    one_range = tuple(
        TensorSig(s.name, s.source, s.dtype, s.min_shape, s.opt_shape, s.max_shape) for s in engine.inputs
    )
    with pytest.raises(engine_module.PlanLoadError, match="2 optimization profiles, the segment 1"):
        engine_module.TRTEngineModule("engine_0", engine.plan, one_range, engine.outputs, False)


# -- a fresh process -------------------------------------------------------------------------------
LOAD = textwrap.dedent(
    """
    import sys, torch, trt_lower
    lowered = trt_lower.load(sys.argv[1])
    x = torch.load(sys.argv[2])
    torch.save([lowered(t) for t in x], sys.argv[3])
    try:
        lowered(torch.randn(8, 8))
    except ValueError as e:
        print(e)
    """
)


def test_saved_and_loaded_in_a_fresh_process(tmp_path: Path) -> None:
    model, lowered = _lower("onnxruntime")
    trt_lower.save(lowered, tmp_path / "m.trtl")
    x = [torch.randn(b, 8) for b in (3, 48)]
    torch.save(x, tmp_path / "x.pt")
    done = subprocess.run(
        [sys.executable, "-c", LOAD, str(tmp_path / "m.trtl"), str(tmp_path / "x.pt"), str(tmp_path / "out.pt")],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "profile 0: 'x' (1..4, 8); profile 1: 'x' (16..64, 8)" in done.stdout
    with torch.no_grad():
        for got, t in zip(torch.load(tmp_path / "out.pt"), x):
            torch.testing.assert_close(got, model(t))


def _profiles_edited(edit: Any) -> Any:
    def change(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
        edit(manifest["engines"][0]["inputs"][0])

    return change


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda sig: sig["profiles"][1]["max"].__setitem__(0, 65),
            r"field 'engines\[0\].inputs\[0\].profiles\[1\]'.* is outside the input's range",
        ),
        (
            lambda sig: sig["profiles"][0]["min"].__setitem__(0, 3),
            r"field 'engines\[0\].inputs\[0\].profiles\[0\]': min \[3, 8\] <= opt \[2, 8\]",
        ),
        (
            lambda sig: sig.__setitem__("profiles", sig["profiles"] * 40),
            r"field 'engines\[0\].inputs\[0\].profiles' lists more than 64",
        ),
    ],
)
def test_a_tampered_profile_is_refused_by_field(tmp_path: Path, edit: Any, message: str) -> None:
    from artifact_tamper import tamper

    _, lowered = _lower("onnxruntime")
    trt_lower.save(lowered, tmp_path / "m.trtl")
    with pytest.raises(trt_lower.ArtifactError, match=message):
        trt_lower.load(
            tamper(tmp_path / "m.trtl", tmp_path / "evil.trtl", _profiles_edited(edit)), backend="onnxruntime"
        )


def test_manifest_inputs_of_one_engine_agree_on_their_profiles() -> None:
    """An engine's inputs list one range per profile each: a tampered manifest where they differ
    would leave the runtime's choice to drop profiles silently."""
    from trt_lower.deploy.manifest import FieldError, sigs

    two = [{"min": [1], "opt": [2], "max": [4]}, {"min": [5], "opt": [6], "max": [8]}]
    a = {"name": "a", "source": "a", "dtype": "float32", "min": [1], "opt": [2], "max": [8], "profiles": two}
    b = {**a, "name": "b", "source": "b", "profiles": two[:1]}
    assert len(sigs({"inputs": [a, {**b, "profiles": two}]}, "inputs", "engines[0]")) == 2
    with pytest.raises(FieldError, match=r"'engines\[0\].inputs': its entries list different numbers of optimization"):
        sigs({"inputs": [a, b]}, "inputs", "engines[0]")


def test_an_artifact_of_one_profile_loads_as_before(tmp_path: Path) -> None:
    from artifact_tamper import tamper

    model, lowered = _lower("onnxruntime")
    trt_lower.save(lowered, tmp_path / "m.trtl")
    old = tamper(tmp_path / "m.trtl", tmp_path / "old.trtl", _profiles_edited(lambda sig: sig.pop("profiles")))
    _check_calls(model, trt_lower.load(old, backend="onnxruntime"), (8,))


# -- Triton ----------------------------------------------------------------------------------------
def test_triton_batching_across_a_gap_between_profiles_is_refused(tmp_path: Path) -> None:
    from trt_lower.triton import export_model_repository

    _, lowered = _lower("onnxruntime")
    with pytest.raises(
        ValueError, match=r"dynamic_batching=True: .* a batch of 5, which no optimization profile of engine_0"
    ):
        export_model_repository(lowered, tmp_path, "mlp", max_batch_size=64, platform="python")
    covered = trt_lower.lower_to_trt(
        Mlp().eval(), WIDE, profiles=[BUCKETS[0], TensorSpec((4, 8), (32, 8), (64, 8))], verify=False
    )
    assert export_model_repository(covered, tmp_path, "covered", max_batch_size=64, platform="python")


def test_a_tensorrt_plan_lists_its_profiles_for_triton(
    trt_double: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2
    from trt_double.device import HostDevice

    from trt_lower.triton import export_model_repository

    monkeypatch.setattr(HostDevice, "identity", lambda self: "NVIDIA H100 sm_90")
    _, lowered = _lower("tensorrt")
    exported = export_model_repository(lowered, tmp_path, "mlp", max_batch_size=64, dynamic_batching=False)
    assert exported.platform == "tensorrt_plan", exported.reason
    config = text_format.Parse((exported.path / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
    assert list(config.instance_group[0].profile) == ["0", "1"]  # else Triton uses profile 0 alone
    assert config.max_batch_size == 64 and [list(t.dims) for t in config.input] == [[8]]
    assert not config.HasField("dynamic_batching")


@pytest.mark.serving
def test_served_through_triton_with_both_profiles(tmp_path: Path) -> None:
    pytest.importorskip("tritonclient.http")
    from triton_serving import client, infer, serving
    from tritonclient.utils import InferenceServerException

    from trt_lower.triton import export_model_repository

    model, lowered = _lower("onnxruntime")
    repo = tmp_path / "repo"
    export_model_repository(lowered, repo, "mlp", max_batch_size=64, dynamic_batching=False, platform="python")
    with serving(repo, tmp_path / "tritonserver.log") as server:
        for protocol in ("http", "grpc"):
            with client(server, protocol) as c:
                for batch in (3, 40):  # one call from each profile
                    x = torch.randn(batch, 8)
                    reply = infer(c, protocol, "mlp", {"x": x.numpy()})
                    with torch.no_grad():
                        torch.testing.assert_close(
                            torch.tensor(reply.as_numpy("output")), model(x), rtol=1e-4, atol=1e-4
                        )
                with pytest.raises(InferenceServerException, match=r"fits none of its optimization profiles"):
                    infer(c, protocol, "mlp", {"x": torch.randn(8, 8).numpy()})


def test_update_weights_checks_the_module_at_shapes_a_profile_holds() -> None:
    """Tracing makes a dynamic size of 1 (the opt here) a 2, which lies between these profiles:
    update_weights checks the new weights on a call the module runs (the opt shapes), not on that."""
    torch.manual_seed(0)
    model, new = Mlp().eval(), Mlp().eval()
    one = [TensorSpec((1, 8), (1, 8), (1, 8)), TensorSpec((16, 8), (32, 8), (64, 8))]
    spec = TensorSpec((1, 8), (1, 8), (64, 8))
    lowered = trt_lower.lower_to_trt(model, spec, profiles=one, backend="onnxruntime", verify=False)
    lowered.update_weights(new)
    _check_calls(new, lowered, (1, 16))
