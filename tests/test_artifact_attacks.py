"""A saved artifact is untrusted input: files an attacker wrote (tests/artifact_tamper.py writes
them, checksums matching) are refused with an ArtifactError naming the file and the field, and
nothing from them runs, reads a file, or exhausts memory or time. Each test is an attack a rule of
the reader (trt_lower/deploy/) stops."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import safetensors.torch
import torch
from artifact_tamper import edit_onnx, node, tamper
from onnx import TensorProto, helper, numpy_helper
from test_pipeline import Sandwich

import trt_lower
from trt_lower.deploy import graph_json
from trt_lower.engine import ort_session
from trt_lower.runtime.conditions import SizeConditions

ROOT = Path(__file__).resolve().parent.parent


class Keyed(torch.nn.Module):
    """Keyword inputs; an eager Linear (addmm kept eager) reading weights by attribute; an engine."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, *, scale: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x) * scale) + 1.0


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, torch.Tensor, torch.Tensor]:
    x, scale = torch.randn(2, 8), torch.randn(1)
    lowered = trt_lower.lower_to_trt(
        Keyed().eval(),
        (x,),
        kwargs={"scale": scale},
        backend="onnxruntime",
        fallback_ops=["aten.addmm.default"],
        min_block_size=1,
    )
    assert lowered.report.engines and any(n.op == "get_attr" for n in lowered.graph.nodes)
    path = tmp_path_factory.mktemp("keyed") / "keyed.trtl"
    trt_lower.save(lowered, path)
    return path, x, scale


@pytest.fixture(scope="module")
def sandwich_call(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, torch.Tensor]:
    """A model of positional inputs, an eager op between two engines."""
    path, x = tmp_path_factory.mktemp("sandwich") / "s.trtl", torch.randn(2, 3, 8, 8)
    trt_lower.save(trt_lower.lower_to_trt(Sandwich().eval(), (x,), backend="onnxruntime"), path)
    return path, x


@pytest.fixture(scope="module")
def sandwich(sandwich_call: tuple[Path, torch.Tensor]) -> Path:
    return sandwich_call[0]


# -- planted identifiers: text from the file that FX would write into forward's code ----------------
# Each payload is valid Python where FX writes it (it creates ./pwned when run) and is refused.
OPEN = "open('pwned', 'w')"
QUOTED = 'open("pwned", "w")'  # inside getattr(self, "...") (no dot: FX splits targets on dots)


def _rename_weight(manifest: dict[str, Any], members: dict[str, bytes], new: str) -> None:
    weights = safetensors.torch.load(members["weights.safetensors"])
    read = node(manifest, "get_attr")
    weights[new] = weights.pop(read["target"])
    read["target"] = new
    members["weights.safetensors"] = safetensors.torch.save(weights)


def _rename_engine(manifest: dict[str, Any], members: dict[str, bytes], new: str) -> None:
    call = node(manifest, "call_module", 1)  # the first is the input guard
    old = call["target"]
    call["target"] = new
    next(e for e in manifest["engines"] if e["name"] == old)["name"] = new


PLANTS = {  # where: (the model it is planted in, the change)
    "forward's argument name": ("sandwich_call", lambda m, _: m["graph"]["pytree"]["args"].__setitem__(0, f"x={OPEN}")),
    "placeholder target": (
        "sandwich_call",
        lambda m, _: node(m, "placeholder").update(target=f"self.__dict__[str({OPEN})]"),
    ),
    "keyword name of a node": (
        "keyed",
        lambda m, _: node(m, "call_function").update(kwargs={f"out={OPEN} and None, dim": 0}),
    ),
    "weight name": ("keyed", lambda m, w: _rename_weight(m, w, f'" + str({QUOTED}) + "')),
    "engine name": ("keyed", lambda m, w: _rename_engine(m, w, f'" + str({QUOTED}) + "')),
    "keyword key of the input spec": (
        "keyed",
        lambda m, _: m["graph"]["pytree"]["in_spec"]["children"][1]["keys"].__setitem__(0, f"scale':{OPEN},'s"),
    ),
    "node name": ("keyed", lambda m, _: node(m, "call_function").update(name=f"a = {OPEN}; b")),
}


@pytest.mark.parametrize("where", list(PLANTS))
def test_planted_identifiers_are_refused_and_never_run(
    request: pytest.FixtureRequest, where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fixture, change = PLANTS[where]
    path, *args = request.getfixturevalue(fixture)
    monkeypatch.chdir(tmp_path)  # the payload writes ./pwned
    evil = tamper(path, tmp_path / "evil.trtl", change)
    try:
        with pytest.raises(trt_lower.ArtifactError, match="evil.trtl: .*(not an identifier|has no argument)"):
            loaded = trt_lower.load(evil, backend="onnxruntime")
            loaded(*args[:1], **({"scale": args[1]} if fixture == "keyed" else {}))
    finally:
        assert not (tmp_path / "pwned").exists(), "the file's text ran as code"


def test_the_keyed_model_loads_untampered(keyed: tuple[Path, torch.Tensor, torch.Tensor]) -> None:
    path, x, scale = keyed
    torch.manual_seed(1)
    model = Keyed().eval()
    with zipfile.ZipFile(path) as z:
        weights = safetensors.torch.load(z.read("weights.safetensors"))
    model.lin.weight.data, model.lin.bias.data = (
        next(v for k, v in weights.items() if k.endswith(end)) for end in ("weight", "bias")
    )
    with torch.no_grad():
        torch.testing.assert_close(trt_lower.load(path, backend="onnxruntime")(x, scale=scale), model(x, scale=scale))


# -- planted operators ---------------------------------------------------------------------------------
OPS = {
    "a file-reading op": ("aten.from_file.default", ["/etc/hostname"], {"size": 4, "dtype": {"dtype": "uint8"}}),
    "an unchecked sparse constructor": (
        "aten._sparse_coo_tensor_with_dims_and_tensors.default",
        [1, 0, [4], {"node": "x"}, {"node": "x"}],
        {},
    ),
    "an in-place copy": ("aten.copy_.default", [{"node": "x"}, {"node": "x"}], {}),
    "a sparse layout": ("aten.empty.memory_format", [[4]], {"layout": {"layout": "sparse_coo"}}),
    "a C++ op of another library": ("profiler._record_function_enter_new.default", ["name", None], {}),
    # Allowed by origin before (#49): kernels that trust the integers and flags they are given.
    "a backward kernel writing at an unchecked index": (
        "aten.embedding_dense_backward.default",
        [{"node": "x"}, {"node": "x"}, 4, -1, True],
        {},
    ),
    "unsafe=True, reading past the input": ("aten.segment_reduce.default", [{"node": "x"}, "sum"], {"unsafe": True}),
    "a resize returning uninitialised memory": ("aten.resize.default", [{"node": "x"}, [64, 64]], {}),
    "a prim returning uninitialised memory": ("prims.empty_strided.default", [[64], [1]], {"dtype": None}),
    "an interpolation mode out of range": (
        "aten.grid_sampler_2d.default",
        [{"node": "x"}, {"node": "x"}, 7, 0, False],
        {},
    ),
    "a padding mode out of range": ("aten.grid_sampler_2d.default", [{"node": "x"}, {"node": "x"}, 0, 9, False], {}),
    "a size over the per-call budget": ("aten.ones.default", [[2**33]], {}),
    "a count over the per-call budget": ("aten.arange.start_step", [0, 1, 1e-12], {}),
    "a padding over the bound": ("aten.constant_pad_nd.default", [{"node": "x"}, [0, 2**20]], {}),
    "a string repeated by a Python operator": ("operator.mul", ["A", 8 * 2**30], {}),
    "a module's outputs repeated": ("operator.mul", [{"node": "MODULE"}, 2**40], {}),
    "a power spinning for minutes": ("operator.pow", [3, 10**9], {}),
    "an operator acting only by side effect": ("trt_lower_attack.side_effect.default", [{"node": "x"}], {}),
}


# The operators a converter maps that a loaded graph refuses all the same (a model that leaves one
# eager does not load): kernels that trust offsets, strides or a sorter from data, constructors
# of uninitialised memory, a generator argument. Every other one loads (prims and activations
# that carry no pointwise tag included).
REFUSED_CONVERTED = {
    "aten._embedding_bag.default",
    "aten._embedding_bag_forward_only.default",
    "aten.embedding_bag.padding_idx",
    "aten._grouped_mm.default",
    "aten.masked_scatter.default",
    "aten.searchsorted.Tensor",
    "aten.as_strided.default",
    "aten.empty_strided.default",
    "aten.rrelu.default",
}


def test_every_other_converted_operator_may_stay_eager_in_a_loaded_graph() -> None:
    import converters
    from trt_lower.deploy import operators

    ops = [op for op in converters.supported_ops() if isinstance(op, torch._ops.OpOverload)]
    assert {str(op) for op in ops if operators.refusal(op) is not None} == REFUSED_CONVERTED
    assert operators.refusal(torch.ops.aten.exp.float) is None  # numbers to numbers (shape arithmetic)


@torch.library.custom_op("trt_lower_attack::side_effect", mutates_args=())
def _side_effect(x: torch.Tensor) -> None:
    """A user's operator that returns nothing: a loaded graph could call it only for what it does."""


@pytest.mark.parametrize("what", list(OPS))
def test_planted_operators_are_refused_naming_the_node(sandwich: Path, tmp_path: Path, what: str) -> None:
    target, args, kwargs = OPS[what]

    def plant(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
        eager = node(manifest, "call_function")
        module = node(manifest, "call_module")["name"]  # the input guard's call: a tuple
        eager.update(
            target=target, args=[{"node": module} if a == {"node": "MODULE"} else a for a in args], kwargs=kwargs
        )
        for n in manifest["graph"]["nodes"]:  # the first placeholder is `x`
            if n["op"] == "placeholder":
                n["name"] = n["target"] = "x"
                break

    with pytest.raises(trt_lower.ArtifactError, match=r"evil.trtl: node '\w+'(:| calls)"):
        trt_lower.load(tamper(sandwich, tmp_path / "evil.trtl", plant), backend="onnxruntime")


def test_uninitialised_memory_is_zero_filled(sandwich: Path, tmp_path: Path) -> None:
    """`empty` returns what memory held before (a freed secret); a loaded graph calls `zeros`."""

    def plant(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
        names.append(node(manifest, "call_function")["name"])
        node(manifest, "call_function").update(
            target="aten.empty.memory_format", args=[[4]], kwargs={"memory_format": None}
        )

    names: list[str] = []
    loaded = trt_lower.load(tamper(sandwich, tmp_path / "evil.trtl", plant), backend="onnxruntime")
    planted = next(n for n in loaded.graph.nodes if n.name == names[0])
    assert planted.target is torch.ops.aten.zeros.default and planted.kwargs == {}


def test_legitimate_arguments_of_checked_operators_load(sandwich: Path, tmp_path: Path) -> None:
    """The bounds refuse only what is over them: sizes, modes and small powers models use load."""

    def plant(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
        nodes = manifest["graph"]["nodes"]
        at = nodes.index(node(manifest, "call_function"))
        nodes[at:at] = [
            {"name": "ones", "op": "call_function", "target": "aten.ones.default", "args": [[64, 64]], "kwargs": {}},
            {"name": "count", "op": "call_function", "target": "aten.arange.start", "args": [0, 128], "kwargs": {}},
            {"name": "square", "op": "call_function", "target": "operator.pow", "args": [7, 2], "kwargs": {}},
        ]

    loaded = trt_lower.load(tamper(sandwich, tmp_path / "fine.trtl", plant), backend="onnxruntime")
    assert {"ones", "count", "square"} <= {n.name for n in loaded.graph.nodes}


# -- ONNX external data outside the engine's own weights member --------------------------------------
def _external(tensor: TensorProto, location: str) -> None:
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    del tensor.external_data[:]
    for key, value in (("location", location), ("offset", "0"), ("length", "16")):
        tensor.external_data.add(key=key, value=value)


def _old_format(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
    """Format 2: each engine's ONNX self-contained, its first initializer pointing at a file."""
    manifest["format_version"] = 2
    for entry in manifest["engines"]:
        members.pop(entry.pop("onnx_data"))
        model = onnx.load_from_string(members[entry["onnx"]])
        del model.graph.initializer[:]  # (this model's weights no longer matter: it must be refused)
        model.graph.initializer.append(numpy_helper.from_array(torch.zeros(4).numpy(), "leak"))
        _external(model.graph.initializer[0], "secret.bin")
        members[entry["onnx"]] = model.SerializeToString()


def _constant_attribute(model: onnx.ModelProto) -> None:
    constant = helper.make_node("Constant", [], ["leaked"], value=numpy_helper.from_array(torch.zeros(4).numpy()))
    _external(constant.attribute[0].t, "secret.bin")
    model.graph.node.insert(0, constant)


def _subgraph_initializer(model: onnx.ModelProto) -> None:
    inner = helper.make_graph(
        [],
        "inner",
        [],
        [helper.make_tensor_value_info("leak", TensorProto.FLOAT, [4])],
        [numpy_helper.from_array(torch.zeros(4).numpy(), "leak")],
    )
    _external(inner.initializer[0], "secret.bin")
    branch = helper.make_node("If", ["cond"], ["leaked"], then_branch=inner, else_branch=inner)
    model.graph.node.insert(0, branch)


def _other_file(model: onnx.ModelProto) -> None:
    tensor = next(t for t in model.graph.initializer if t.data_location == TensorProto.EXTERNAL)
    next(e for e in tensor.external_data if e.key == "location").value = "../../secret.bin"


def _function_default(model: onnx.ModelProto) -> None:
    """A function whose default attribute is a tensor in a file: ONNX Runtime read it from the
    working directory, and the node calling the function returned it (a private key came back)."""
    default = helper.make_attribute("value", numpy_helper.from_array(torch.zeros(4).numpy()))
    _external(default.t, "secret.bin")
    constant = helper.make_node("Constant", [], ["out"])
    constant.attribute.add(name="value", type=onnx.AttributeProto.TENSOR, ref_attr_name="value")
    leak = helper.make_function("evil", "Leak", [], ["out"], [constant], [helper.make_opsetid("", 17)])
    leak.attribute_proto.append(default)
    model.functions.append(leak)
    model.opset_import.append(helper.make_opsetid("evil", 1))
    model.graph.node.insert(0, helper.make_node("Leak", [], ["leaked"], domain="evil"))


ROUTES = {
    "format 2, an initializer": _old_format,
    "format 3, an ONNX function's default attribute": edit_onnx("engines/engine_0.onnx", _function_default),
    "format 3, a Constant's tensor": edit_onnx("engines/engine_0.onnx", _constant_attribute),
    "format 3, a subgraph's initializer": edit_onnx("engines/engine_0.onnx", _subgraph_initializer),
    "format 3, an initializer naming another file": edit_onnx("engines/engine_0.onnx", _other_file),
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_external_data_outside_the_member_is_refused(
    keyed: tuple[Path, torch.Tensor, torch.Tensor], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, route: str
) -> None:
    path, x, scale = keyed
    (tmp_path / "secret.bin").write_bytes(b"S" * 16)
    monkeypatch.chdir(tmp_path)
    if route.endswith("another file"):  # this engine needs an external initializer: give it a bigger model's
        path = _big_engine_file(tmp_path)
    with pytest.raises(
        trt_lower.ArtifactError,
        match=r"evil.trtl: member 'engines/engine_0.onnx' (declares|.* names) "
        r"external data",
    ):
        trt_lower.load(tamper(path, tmp_path / "evil.trtl", ROUTES[route]), backend="onnxruntime")


def _big_engine_file(tmp_path: Path) -> Path:
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU()).eval()  # 16 KB of weights: external
    path = tmp_path / "big.trtl"
    trt_lower.save(trt_lower.lower_to_trt(model, (torch.randn(2, 64),), backend="onnxruntime", min_block_size=1), path)
    return path


# -- ONNX operators beyond what lowering writes, and tensors no input pays for -----------------------------
def _first_output_through(op: str, domain: str = "", **attributes: Any) -> Any:
    """An edit that passes the engine's first output through one `op` node of `domain`."""

    def edit(model: onnx.ModelProto) -> None:
        out = model.graph.output[0].name
        for n in model.graph.node:
            n.output[:] = [f"{o}_pre" if o == out else o for o in n.output]
        model.graph.node.append(helper.make_node(op, [f"{out}_pre"], [out], domain=domain, **attributes))
        if domain:
            model.opset_import.append(helper.make_opsetid(domain, 1))

    return edit


def _constant_of_shape(model: onnx.ModelProto) -> None:
    """A 32 GiB constant whatever the inputs: a shape from an initializer, its sum added to nothing."""
    model.graph.initializer.append(numpy_helper.from_array(np.array([2**31, 4], dtype=np.int64), "huge_shape"))
    model.graph.node.append(helper.make_node("ConstantOfShape", ["huge_shape"], ["huge"]))
    model.graph.node.append(helper.make_node("ReduceSum", ["huge"], ["huge_sum"], keepdims=0))


OPERATORS = {
    # ONNX Runtime's contrib ops loaded and ran: TensorRT's parser takes none of them.
    "a com.microsoft op": (
        edit_onnx("engines/engine_0.onnx", _first_output_through("Gelu", "com.microsoft")),
        "uses the op domain 'com.microsoft'",
    ),
    "a default-domain op no converter writes": (
        edit_onnx("engines/engine_0.onnx", _first_output_through("Bernoulli")),
        "uses the op 'Bernoulli'",
    ),
    "ConstantOfShape([2**31, 4])": (
        edit_onnx("engines/engine_0.onnx", _constant_of_shape),
        r"makes the tensor 'huge' of \[2147483648, 4\] \(34359738368 bytes, whatever the inputs\)",
    ),
}


@pytest.mark.parametrize("what", list(OPERATORS))
def test_onnx_beyond_what_lowering_writes_is_refused(sandwich: Path, tmp_path: Path, what: str) -> None:
    change, message = OPERATORS[what]
    with pytest.raises(trt_lower.ArtifactError, match=rf"evil.trtl: member 'engines/engine_0.onnx' {message}"):
        trt_lower.load(tamper(sandwich, tmp_path / "evil.trtl", change), backend="onnxruntime")


def test_onnx_functions_are_refused(sandwich: Path, tmp_path: Path) -> None:
    def function(model: onnx.ModelProto) -> None:
        body = [helper.make_node("Identity", ["x"], ["y"])]
        model.functions.append(helper.make_function("mine", "Same", ["x"], ["y"], body, [helper.make_opsetid("", 17)]))
        _first_output_through("Same", "mine")(model)

    with pytest.raises(
        trt_lower.ArtifactError, match=r"member 'engines/engine_0.onnx' declares ONNX functions \('Same'\)"
    ):
        trt_lower.load(
            tamper(sandwich, tmp_path / "evil.trtl", edit_onnx("engines/engine_0.onnx", function)),
            backend="onnxruntime",
        )


def test_engines_with_subgraphs_and_constants_load_back(tmp_path: Path) -> None:
    # The operator and size checks accept what lowering writes: an If (torch.cond) with its
    # subgraphs, constants, casts and reductions.
    class Branchy(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.cond(x.sum() > 0, lambda t: t.exp(), lambda t: t - 1.0, (x,))
            return torch.nn.functional.layer_norm(y.to(torch.float16).float(), (8,)) * torch.ones(8)

    x = torch.randn(2, 8)
    lowered = trt_lower.lower_to_trt(Branchy().eval(), (x,), backend="onnxruntime", min_block_size=1)
    trt_lower.save(lowered, tmp_path / "ok.trtl")
    with zipfile.ZipFile(tmp_path / "ok.trtl") as z:
        ops = {
            n.op_type for m in z.namelist() if m.endswith(".onnx") for n in onnx.load_from_string(z.read(m)).graph.node
        }
    assert "If" in ops
    torch.testing.assert_close(trt_lower.load(tmp_path / "ok.trtl", backend="onnxruntime")(x), lowered(x))


# -- engine outputs that disagree with the manifest ------------------------------------------------------
def _declared(dim: int) -> Any:
    def edit(model: onnx.ModelProto) -> None:
        model.graph.output[0].type.tensor_type.shape.dim[1].dim_value = dim

    return edit


def _manifest_says(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
    for key in ("min", "opt", "max"):
        manifest["engines"][0]["outputs"][0][key][-1] = 99


@pytest.mark.parametrize("change", [edit_onnx("engines/engine_0.onnx", _declared(99)), _manifest_says])
def test_an_engine_whose_outputs_disagree_with_the_manifest_is_refused(
    sandwich: Path, tmp_path: Path, change: Any
) -> None:
    with pytest.raises(trt_lower.ArtifactError, match=r"evil.trtl: member 'engines/engine_0.onnx' (declares|does not)"):
        trt_lower.load(tamper(sandwich, tmp_path / "evil.trtl", change), backend="onnxruntime")


# -- the container: zip bombs, format versions, deep JSON -----------------------------------------------
def test_a_compressed_manifest_is_refused_before_it_inflates(sandwich: Path, tmp_path: Path) -> None:
    """A zip bomb: a manifest padded with 256 MiB of spaces deflates to ~256 KB."""
    bomb = tamper(
        sandwich,
        tmp_path / "bomb.trtl",
        lambda m, w: None,
        compression=zipfile.ZIP_DEFLATED,
        manifest_text=lambda text: text[:-1] + " " * (256 << 20) + "}",
    )
    assert bomb.stat().st_size < 4 << 20
    tracemalloc.start()
    try:
        with pytest.raises(trt_lower.ArtifactError, match="bomb.trtl: member 'manifest.json' is compressed"):
            trt_lower.load(bomb, backend="onnxruntime")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20


def test_a_compressed_member_is_refused(sandwich: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(sandwich) as z:
        members = {n: z.read(n) for n in z.namelist()}
    evil = tmp_path / "evil.trtl"
    with zipfile.ZipFile(evil, "w") as z:
        for name, data in members.items():
            z.writestr(name, data, zipfile.ZIP_DEFLATED if name == "weights.safetensors" else zipfile.ZIP_STORED)
    with pytest.raises(trt_lower.ArtifactError, match="evil.trtl: member 'weights.safetensors' is compressed"):
        trt_lower.load(evil, backend="onnxruntime")


@pytest.mark.parametrize("version", [0, -7, True, "3", 3.0, None, 2**70])
def test_bad_format_versions_are_refused(sandwich: Path, tmp_path: Path, version: Any) -> None:
    evil = tamper(sandwich, tmp_path / "evil.trtl", lambda m, w: m.update(format_version=version))
    with pytest.raises(
        trt_lower.ArtifactError, match="evil.trtl: (field 'format_version' must be an int|has artifact format version)"
    ):
        trt_lower.load(evil, backend="onnxruntime")


def test_a_deeply_nested_manifest_is_refused(sandwich: Path, tmp_path: Path) -> None:
    deep = "[" * 200_000 + "]" * 200_000
    evil = tamper(
        sandwich,
        tmp_path / "evil.trtl",
        lambda m, w: None,
        manifest_text=lambda text: text[:-1] + f', "deep": {deep}}}',
    )
    with pytest.raises(trt_lower.ArtifactError, match="evil.trtl: (manifest.json is not JSON|manifest.json nests)"):
        trt_lower.load(evil, backend="onnxruntime")
    shallow = "[" * 100 + "]" * 100  # parses; still deeper than any graph needs
    evil = tamper(
        sandwich,
        tmp_path / "evil.trtl",
        lambda m, w: None,
        manifest_text=lambda text: text[:-1] + f', "deep": {shallow}}}',
    )
    with pytest.raises(trt_lower.ArtifactError, match="evil.trtl: manifest.json nests deeper than 64 levels"):
        trt_lower.load(evil, backend="onnxruntime")


# -- size conditions --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "condition, message",
    [
        ("x.shape[0] ** 99 > 0", "an exponent must be a constant"),
        ("2 ** 2 ** 2 ** 2 ** 2 ** 2 > x.shape[0]", "more than 2 powers"),
        ("x.shape[0] ** x.shape[1] > 0", "an exponent must be a constant"),
        ("(" * 300 + "x.shape[0]" + ")" * 300 + " > 0", "not an expression|nests deeper"),
        ("-" * 1900 + "x.shape[0] > 0", "not an expression|nests deeper"),
        ("x.shape[0] + " * 500 + "0 > 0", "characters long"),
        ("x.shape[0] % 2 == 1", "does not hold on the inputs' recorded shapes"),
    ],
)
def test_explosive_deep_or_false_conditions_are_refused_at_load(
    sandwich: Path, tmp_path: Path, condition: str, message: str
) -> None:
    evil = tamper(sandwich, tmp_path / "evil.trtl", lambda m, w: m.update(conditions=[condition]))
    with pytest.raises(trt_lower.ArtifactError, match=f"evil.trtl: field 'conditions'.*({message})"):
        trt_lower.load(evil, backend="onnxruntime")


def test_size_conditions_refuse_towers_of_powers_directly() -> None:
    with pytest.raises(ValueError, match="an exponent must be a constant"):
        SizeConditions(["x.shape[0] ** (2 ** 64) > 0"], ["x"])
    # Within the bounds: evaluated at once.
    SizeConditions(["(x.shape[0] ** 8) ** 8 > 0"], ["x"])([torch.empty(2**31 - 1, 0)])


# -- a causal LM's metadata ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def causal_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import transformers

    from trt_lower.llm import lower_causal_lm

    config = transformers.LlamaConfig(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=64,
        vocab_size=64,
        max_position_embeddings=32,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    path = tmp_path_factory.mktemp("llm") / "lm.trtl"
    trt_lower.save(lower_causal_lm(model, max_batch=2, max_length=16, backend="onnxruntime"), path)
    return path


def test_a_causal_lm_loads_untampered(causal_lm: Path) -> None:
    loaded = trt_lower.load(causal_lm, backend="onnxruntime")
    assert type(loaded).__name__ == "LoweredCausalLM" and loaded.max_length == 16


@pytest.mark.parametrize(
    "change, message",
    [
        ({"model_class": "evil_module.Model"}, "model_class 'evil_module.Model' is not a class of transformers"),
        ({"model_class": "transformers.configuration_utils.PretrainedConfig"}, "is not a transformers model class"),
        ({"max_length": 2**40}, "signatures say"),
        ({"cache": [[2**20, 2**20, 2**20]]}, "signatures say"),
        ({"max_batch": True}, "max_batch must be an int"),
        ({"dtype": "int64"}, "not a floating-point torch dtype"),
    ],
)
def test_causal_lm_metadata_is_checked_before_use(
    causal_lm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: dict[str, Any], message: str
) -> None:
    (tmp_path / "evil_module.py").write_text(f"open({str(tmp_path / 'pwned')!r}, 'w')\nclass Model: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    evil = tamper(causal_lm, tmp_path / "evil.trtl", lambda m, w: m["extra"].update(change))
    with pytest.raises(trt_lower.ArtifactError, match=f"evil.trtl: field 'extra': .*{message}"):
        trt_lower.load(evil, backend="onnxruntime")
    assert not (tmp_path / "pwned").exists() and "evil_module" not in sys.modules


def test_causal_lm_cache_bounded_by_memory_when_consistent(causal_lm: Path, tmp_path: Path) -> None:
    """Signatures and metadata agreeing on a cache no machine holds: refused, nothing allocated."""
    huge = 2**30

    def grow(manifest: dict[str, Any], members: dict[str, bytes]) -> None:
        manifest["extra"]["max_length"] = huge
        for sig in manifest["inputs"]:
            if len(sig["max"]) == 4:
                sig["max"][0] = huge  # the cache length (sequence-major buffers)
            elif len(sig["max"]) == 2:
                sig["max"][1] = huge

    evil = tamper(causal_lm, tmp_path / "evil.trtl", grow)
    with pytest.raises(
        trt_lower.ArtifactError, match="evil.trtl: field 'extra': the cache would take .* GiB; this machine has"
    ):
        trt_lower.load(evil, backend="onnxruntime")


def test_a_causal_lm_config_deeper_than_its_cache_is_refused(causal_lm: Path, tmp_path: Path) -> None:
    """The model's shell is built from the stored config: 100,000 layers there cost 77 s and 4 GB
    at load unless compared with the layers the step's signatures hold caches for."""
    evil = tamper(causal_lm, tmp_path / "evil.trtl", lambda m, _: m["extra"]["config"].update(num_hidden_layers=3000))
    with pytest.raises(trt_lower.ArtifactError, match="evil.trtl: field 'extra': config.num_hidden_layers is 3000"):
        trt_lower.load(evil, backend="onnxruntime")


# -- classes a stored output structure names ---------------------------------------------------------------
def test_an_output_class_is_looked_up_without_importing_its_module() -> None:
    """A ModelOutput of a model module nobody imported: a dict, and nothing imported (a 72 KB file
    naming one module per output imported 2,812 of them)."""
    import importlib.util

    module = next(
        m
        for m in ("transformers.models.bark.modeling_bark", "transformers.models.mimi.modeling_mimi")
        if m not in sys.modules and importlib.util.find_spec(m) is not None
    )
    stored = {"type": "ModelOutput", "class": f"{module}.SomeOutput", "keys": ["a"], "children": ["*"]}
    spec = graph_json.spec_from_json(stored)
    assert module not in sys.modules and spec.type is dict


CONTEXTS = {  # a cache's stored context, planted classes in it
    "a class built with the file's data on every call": {
        "_t": "seq",
        "p": "transformers.training_args:TrainingArguments",
        "v": ["/attacker/dir"],
    },
    "a class re-exported by transformers": {"_t": "obj", "p": "transformers.cache_utils:UserDict", "s": {}},
    "a class of a module nobody imported": {"_t": "type", "p": "transformers.models.bark.modeling_bark:BarkModel"},
}


@pytest.mark.parametrize("what", list(CONTEXTS))
def test_classes_planted_in_a_cache_context_are_refused(what: str) -> None:
    context = {"_t": "obj", "p": "transformers.cache_utils:DynamicCache", "s": {"layers": [CONTEXTS[what]]}}
    stored = {"type": "cache", "class": "transformers.cache_utils.DynamicCache", "context": context, "children": []}
    with pytest.raises(graph_json.GraphFormatError, match="(cache context names|malformed cache context tag)"):
        graph_json.spec_from_json(stored)


# -- counts and sizes from the file, bounded before use -------------------------------------------------------
def test_a_probe_count_is_compared_with_its_member_before_use(sandwich: Path, tmp_path: Path) -> None:
    """`"inputs": 2**40` made a list of 2**40 names (MemoryError at load)."""
    evil = tamper(sandwich, tmp_path / "evil.trtl", lambda m, _: m["probe"].update(inputs=2**40))
    with pytest.raises(trt_lower.ArtifactError, match="evil.trtl: .*not the 1099511627776 inputs"):
        trt_lower.load(evil, backend="onnxruntime")


def test_an_oversized_manifest_is_refused_before_it_is_parsed(sandwich: Path, tmp_path: Path) -> None:
    """Parsed JSON takes up to ~30 times its text: a 57 MB manifest cost 1.6 GB."""
    evil = tamper(sandwich, tmp_path / "evil.trtl", lambda m, _: m.update(padding="0" * (17 << 20)))
    tracemalloc.start()
    try:
        with pytest.raises(trt_lower.ArtifactError, match=r"evil.trtl: manifest.json is \d+ bytes; at most"):
            trt_lower.load(evil, backend="onnxruntime")
        assert tracemalloc.get_traced_memory()[1] < 64 << 20
    finally:
        tracemalloc.stop()


# -- a loaded module does not change with its file (#39) -----------------------------------------------------
def test_a_loaded_module_keeps_its_weights_when_the_file_is_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As for a segment past 1 GiB: ONNX Runtime reads the weights where load put them, uncopied.
    monkeypatch.setattr(ort_session, "SHARE_WEIGHTS_MIN_BYTES", 0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).eval()
    x = torch.randn(2, 64)
    path = tmp_path / "m.trtl"
    trt_lower.save(trt_lower.lower_to_trt(model, (x,), backend="onnxruntime", min_block_size=1), path)
    loaded = trt_lower.load(path, backend="onnxruntime")
    assert loaded.report.coverage == 1.0 and loaded.segments["engine_0"].onnx.weights  # weights beside the graph
    expected = loaded(x)
    with open(path, "r+b") as f:  # in place, same size: every byte of every weight changes
        f.write(bytes(path.stat().st_size))
    torch.testing.assert_close(loaded(x), expected, rtol=0, atol=0)


TRUNCATE = """
import os, sys, torch, trt_lower
path = sys.argv[1]
torch.manual_seed(0)
x = torch.randn(2, 64)
loaded = trt_lower.load(path, backend="onnxruntime")
expected = loaded(x)
os.truncate(path, 100)
torch.testing.assert_close(loaded(x), expected, rtol=0, atol=0)
trt_lower.save(loaded, path)  # re-saved onto its own path
torch.testing.assert_close(trt_lower.load(path, backend="onnxruntime")(x), expected, rtol=0, atol=0)
trt_lower.save(trt_lower.load(path, backend="onnxruntime"), path)
torch.testing.assert_close(trt_lower.load(path, backend="onnxruntime")(x), expected, rtol=0, atol=0)
print("ok")
"""


def test_truncating_the_file_or_saving_onto_it_leaves_the_loaded_module_running(tmp_path: Path) -> None:
    """In a process of its own: a module reading its file's pages would die of SIGBUS here."""
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).eval()
    path = tmp_path / "m.trtl"
    trt_lower.save(trt_lower.lower_to_trt(model, (torch.randn(2, 64),), backend="onnxruntime", min_block_size=1), path)
    done = subprocess.run([sys.executable, "-c", TRUNCATE, str(path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_names_that_make_no_valid_forward_are_refused(sandwich: Path, tmp_path: Path) -> None:
    """Identifiers each, yet no function: two arguments of one name (Python reads `ﬁx` as `fix`)."""
    evil = tamper(sandwich, tmp_path / "evil.trtl", lambda m, _: m["graph"]["pytree"]["args"].extend(["fix", "ﬁx"]))
    with pytest.raises(trt_lower.ArtifactError, match="evil.trtl: field 'graph' does not make a valid module"):
        trt_lower.load(evil, backend="onnxruntime")
