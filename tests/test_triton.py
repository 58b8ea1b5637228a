"""Triton Inference Server: model repositories written by trt_lower, served by a real
tritonserver (from nvidia-pytriton) on 127.0.0.1 and queried with tritonclient."""

from __future__ import annotations

import concurrent.futures
import contextlib
import gzip
import http.client
import http.server as http_server
import json
import re
import socket
import subprocess
import sys
import threading
import time
from multiprocessing import shared_memory
from pathlib import Path
from typing import Any, Callable, Iterator
from unittest.mock import ANY

import numpy as np
import onnxruntime
import pytest
import torch
import torchvision
import trt_models
from google.protobuf import text_format
from harness import Fn

import trt_lower
from trt_lower.cli import commands as cli
from trt_lower.triton import TritonServer, export_model_repository
from trt_lower.triton.backend import Runner
from trt_lower.triton.config import ModelConfig
from trt_lower.triton.front import PENDING_REQUESTS, HttpFront, Refused, declared_bytes
from trt_lower.triton.server import free_ports
from trt_lower.triton.signature import ModelSignature, TritonTensor

pytest.importorskip("tritonclient.http")
pytest.importorskip("tritonclient.grpc")
import grpc  # noqa: E402
from triton_serving import INVALID, TIMEOUT_S, client, infer, serving  # noqa: E402
from tritonclient.grpc import model_config_pb2, service_pb2, service_pb2_grpc  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

pytestmark = pytest.mark.serving

BATCH = 8  # Triton's max_batch_size for both served models
TOL = {"rtol": 1e-4, "atol": 1e-4}


class Served:
    """A lowered model, its eager original and the name it is served under."""

    def __init__(self, name: str, eager: torch.nn.Module, lowered: trt_lower.LoweredModule) -> None:
        self.name, self.eager, self.lowered = name, eager, lowered

    def expected(self, x: np.ndarray) -> dict[str, torch.Tensor]:
        with torch.inference_mode():
            out = self.eager(torch.from_numpy(x))
        return {"output": out} if isinstance(out, torch.Tensor) else {k: v for k, v in out.items()}


@pytest.fixture(scope="module")
def resnet() -> Served:
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    spec = trt_lower.TensorSpec((1, 3, 64, 64), (2, 3, 64, 64), (BATCH, 3, 64, 64))
    lowered = trt_lower.lower_to_trt(model, (spec,), backend="onnxruntime")
    return Served("resnet18", model, lowered)


@pytest.fixture(scope="module")
def bert() -> Served:
    model, _ = trt_models.bert()
    spec = trt_lower.TensorSpec((1, 4), (4, 16), (BATCH, 32), dtype=torch.int64)
    lowered = trt_lower.lower_to_trt(model, (spec,), backend="onnxruntime")
    return Served("bert", model, lowered)


@pytest.fixture(scope="module")
def server(resnet: Served, bert: Served, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    """One server for the module, both models on the python backend with dynamic batching."""
    root = tmp_path_factory.mktemp("triton")
    for served in (resnet, bert):
        model = export_model_repository(
            served.lowered, root / "repo", served.name, max_batch_size=BATCH, platform="python"
        )
        assert model.platform == "python"
    with serving(root / "repo", root / "tritonserver.log") as server:
        yield server


def check(served: Served, output: Callable[[str], np.ndarray], x: np.ndarray) -> None:
    """Each output (`output(name)`, e.g. a reply's as_numpy) is what the eager model computes."""
    for name, want in served.expected(x).items():
        torch.testing.assert_close(torch.tensor(output(name)), want, **TOL, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_resnet18_answers_as_eager(server: TritonServer, resnet: Served, protocol: str) -> None:
    x = torch.randn(3, 3, 64, 64).numpy()
    with client(server, protocol) as c:
        check(resnet, infer(c, protocol, "resnet18", {"x": x}).as_numpy, x)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_bert_answers_as_eager_for_any_batch_and_length(server: TritonServer, bert: Served, protocol: str) -> None:
    with client(server, protocol) as c:
        for shape in [(1, 7), (5, 16), (BATCH, 32)]:
            ids = torch.randint(0, 500, shape).numpy()
            check(bert, infer(c, protocol, "bert", {"input_ids": ids}).as_numpy, ids)


def test_concurrent_clients_with_dynamic_batching(server: TritonServer, resnet: Served) -> None:
    """8 clients (half HTTP, half gRPC) send 25 requests each at once: every reply is the eager
    result of its own input, and the server counted every request."""
    clients, requests = 8, 25
    inputs = torch.randn(clients, requests, 1, 3, 64, 64).numpy()
    before = inference_count(server, "resnet18")

    def send(k: int) -> list[np.ndarray]:
        protocol = "http" if k % 2 else "grpc"
        with client(server, protocol) as c:
            return [infer(c, protocol, "resnet18", {"x": x}).as_numpy("output") for x in inputs[k]]

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        replies = list(pool.map(send, range(clients), timeout=TIMEOUT_S * 2))
    expected = resnet.expected(inputs.reshape(-1, 3, 64, 64))["output"]
    got = torch.from_numpy(np.concatenate([r for rs in replies for r in rs]))
    torch.testing.assert_close(got, expected, **TOL)
    deadline = time.monotonic() + TIMEOUT_S  # the server counts a request once it releases it
    while inference_count(server, "resnet18") - before < clients * requests and time.monotonic() < deadline:
        time.sleep(0.1)
    assert inference_count(server, "resnet18") - before == clients * requests


def inference_count(server: TritonServer, model: str) -> int:
    """The inferences `model` ran, from the server's metrics (statistics are no client's to read)."""
    connection = http.client.HTTPConnection(server.host, server.metrics_port, timeout=TIMEOUT_S)
    try:
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
    finally:
        connection.close()
    found = re.search(rf'^nv_inference_count{{model="{model}",version="1"}} (\d+)$', text, re.MULTILINE)
    assert found is not None, text[:2000]
    return int(found[1])


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_malformed_requests_get_an_error_and_the_server_keeps_serving(
    server: TritonServer, bert: Served, protocol: str
) -> None:
    ids = torch.randint(0, 500, (2, 8)).numpy()
    with client(server, protocol) as c:
        bad: list[tuple[str, Callable[[], object]]] = [
            (
                "unexpected shape for input 'x'",
                lambda: infer(c, protocol, "resnet18", {"x": np.zeros((1, 3, 32, 32), np.float32)}),
            ),
            (
                "data-type is 'FP32', but model 'bert' expects 'INT64'",
                lambda: infer(c, protocol, "bert", {"input_ids": ids.astype(np.float32)}),
            ),
            ("missing required input(s) ['input_ids']", lambda: infer(c, protocol, "bert", {})),
            # Within Triton's dims (-1) but beyond the lowered range: trt_lower's error, as the reply.
            (
                "input 'input_ids' was lowered for the range (1..8, 4..32) int64, got (1, 40)",
                lambda: infer(c, protocol, "bert", {"input_ids": np.zeros((1, 40), np.int64)}),
            ),
            # A token id outside the vocabulary: the embedding's index check, as the reply.
            (
                "IndexOutOfRangeError: aten.embedding.default 'embedding': input 'input_ids' holds an index outside "
                "[0, 500)",
                lambda: infer(c, protocol, "bert", {"input_ids": np.full((1, 8), -1, np.int64)}),
            ),
            (
                "input 'input_ids' holds an index outside [0, 500)",
                lambda: infer(c, protocol, "bert", {"input_ids": np.full((2, 8), 500, np.int64)}),
            ),
        ]
        for message, call in bad:
            with pytest.raises(InferenceServerException) as error:
                call()
            assert message in str(error.value)
            assert error.value.status() == INVALID[protocol], message  # the client's fault, not the server's
            check(bert, infer(c, protocol, "bert", {"input_ids": ids}).as_numpy, ids)


def post(
    host: str, port: int, path: str, body: bytes, headers: dict[str, str] | None = None, method: str = "POST"
) -> tuple[int, str]:
    """A raw HTTP request's status and text (tritonclient cannot declare a shape its data does not fill)."""
    connection = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        reply = connection.getresponse()
        return reply.status, reply.read().decode()
    finally:
        connection.close()


# Tokens a request declares: tritonserver 2.51 sizes a JSON input's buffer from the declared shape
# before any check, and this many aborted it (std::bad_alloc).
HUGE = 2**40


def test_a_request_declaring_a_huge_input_is_refused_and_the_server_answers_the_next(
    server: TritonServer, bert: Served
) -> None:
    """The front refuses it, compressed or not, as it refuses shapes not of the protocol; the
    server's own HTTP port answers only the front; the server keeps serving."""
    huge = json.dumps({"inputs": [{"name": "input_ids", "shape": [1, HUGE], "datatype": "INT64", "data": [1, 2]}]})
    refusals = [
        (huge.encode(), {}, f"the request's inputs declare {HUGE * 8} bytes; this server takes at most 67108864"),
        (gzip.compress(huge.encode()), {"Content-Encoding": "gzip"}, f"declare {HUGE * 8} bytes"),
        (b'{"inputs": [{"name": "input_ids", "shape": "-1", "datatype": "INT64"}]}', {}, "a 'shape' of non-negative"),
    ]
    for body, headers, message in refusals:
        status, text = post(server.host, server.http_port, "/v2/models/bert/infer", body, headers)
        assert status == 400 and message in json.loads(text)["error"], text
    assert server.process is not None
    behind = next(int(a.split("=")[1]) for a in server.process.args if str(a).startswith("--http-port="))
    status, text = post("127.0.0.1", behind, "/v2/models/bert/infer", huge.encode())
    assert status == 403 and "restricted" in text
    assert server.process.poll() is None
    ids = torch.randint(0, 500, (2, 8)).numpy()
    with client(server, "http") as c:
        check(bert, infer(c, "http", "bert", {"input_ids": ids}).as_numpy, ids)


def test_a_header_the_server_would_read_otherwise_is_refused(server: TritonServer, bert: Served) -> None:
    """Python's JSON parser keeps the last of two "shape" keys, tritonserver's the first: the
    front checked [1, 2] and the server allocated for [1, 2^40] (SIGABRT). A Content-Length of
    '²' or of 5,000 digits passed str.isdigit() and killed the front's handler (no answer)."""
    twice = (
        '{"inputs": [{"name": "input_ids", "shape": [1, %d], "shape": [1, 2], "datatype": "INT64", "data": [1, 2]}]}'
    )
    status, text = post(server.host, server.http_port, "/v2/models/bert/infer", (twice % HUGE).encode())
    assert status == 400 and "repeats the key 'shape'" in json.loads(text)["error"], text
    for headers in [
        "Content-Length: \u00b2",
        f"Content-Length: {'0' * 5000}2",
        "Inference-Header-Content-Length: \u00b2",
    ]:
        with socket.create_connection((server.host, server.http_port), timeout=TIMEOUT_S) as raw:
            raw.sendall(f"POST /v2/models/bert/infer HTTP/1.1\r\nHost: x\r\n{headers}\r\n\r\n{{}}".encode("latin-1"))
            assert raw.recv(4096).startswith(b"HTTP/1.1 400 "), headers
    assert server.process is not None and server.process.poll() is None
    ids = torch.randint(0, 500, (2, 8)).numpy()
    with client(server, "http") as c:
        check(bert, infer(c, "http", "bert", {"input_ids": ids}).as_numpy, ids)


def test_only_inference_health_and_metadata_reach_the_server(server: TritonServer) -> None:
    """Through the public HTTP port (with the front's secret added) and on gRPC, clients reached
    system shared-memory registration (the server then wrote outputs into another process's
    /dev/shm object), the repository, statistics and log settings. Metadata and model
    configurations stay readable: clients find a model's inputs there."""
    region = shared_memory.SharedMemory(create=True, size=64)
    try:
        register = json.dumps({"key": f"/{region.name}", "offset": 0, "byte_size": 64}).encode()
        for method, path, body in [
            ("POST", "/v2/systemsharedmemory/region/r/register", register),
            ("GET", "/v2/systemsharedmemory/status", b""),
            ("POST", "/v2/repository/index", b""),
            ("POST", "/v2/repository/models/bert/unload", b""),
            ("GET", "/v2/logging", b""),
            ("GET", "/v2/models/bert/stats", b""),
            ("PUT", "/v2/models/bert/infer", b""),
        ]:
            status, text = post(server.host, server.http_port, path, body, method=method)
            assert status == 403 and "is not served here" in json.loads(text)["error"], (path, text)
        with client(server, "grpc") as c:
            for call in [
                lambda: c.register_system_shared_memory("r", f"/{region.name}", 64),
                lambda: c.get_system_shared_memory_status(),
                lambda: c.get_model_repository_index(),
                lambda: c.get_log_settings(),
                lambda: c.get_inference_statistics("bert"),
            ]:
                with pytest.raises(InferenceServerException, match="This protocol is restricted"):
                    call()
    finally:
        region.close()
        region.unlink()
    for protocol in ("http", "grpc"):
        with client(server, protocol) as c:
            assert c.is_server_live() and c.is_server_ready() and c.is_model_ready("bert"), protocol
            assert c.is_model_ready("bert", "1"), protocol
            # Read-only: what a client needs to find a model's inputs.
            assert c.get_model_metadata("bert") and c.get_model_config("bert") and c.get_server_metadata(), protocol


def test_the_bodies_of_concurrent_requests_are_bounded_together(server: TritonServer, bert: Served) -> None:
    """Each within --max-input-size, requests at once grew the front without bound (12 concurrent
    60 MB bodies: 1.1 GB). Past PENDING_REQUESTS bodies of that size in flight, a request gets 503."""
    limit = server.max_input_size

    def probe(expected: int) -> None:  # a small request, until it gets `expected` (bounded)
        deadline = time.monotonic() + TIMEOUT_S
        while post(server.host, server.http_port, "/v2/models/bert/infer", b"{")[0] != expected:
            assert time.monotonic() < deadline, f"no {expected} within {TIMEOUT_S} s"
            time.sleep(0.05)

    with contextlib.ExitStack() as held:
        for _ in range(PENDING_REQUESTS):  # bodies declared in full, sent in part
            raw = held.enter_context(socket.create_connection((server.host, server.http_port), timeout=TIMEOUT_S))
            raw.sendall(f"POST /v2/models/bert/infer HTTP/1.1\r\nHost: x\r\nContent-Length: {limit}\r\n\r\n{{".encode())
        probe(503)
        status, text = post(server.host, server.http_port, "/v2/models/bert/infer", b"{")
        assert status == 503 and "the server is busy" in json.loads(text)["error"]
    probe(400)  # the bodies are given up with their connections: "{" reaches the JSON check again
    ids = torch.randint(0, 500, (2, 8)).numpy()
    with client(server, "http") as c:
        check(bert, infer(c, "http", "bert", {"input_ids": ids}).as_numpy, ids)


def test_grpc_checks_a_declared_shape_against_the_data_before_allocating(server: TritonServer) -> None:
    """Why gRPC needs no front: the same declaration there is refused by the server itself."""
    with grpc.insecure_channel(server.grpc_url) as channel:
        request = service_pb2.ModelInferRequest(model_name="bert")
        tensor = request.inputs.add(name="input_ids", datatype="INT64", shape=[1, HUGE])
        tensor.contents.int64_contents.extend([1, 2])
        with pytest.raises(grpc.RpcError) as error:
            service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request, timeout=TIMEOUT_S)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "byte size mismatch" in error.value.details()
    assert server.process is not None and server.process.poll() is None


class Upstream(http_server.BaseHTTPRequestHandler):
    """A stand-in for tritonserver's HTTP: answers 200 with what it received."""

    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, dict[str, str], bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.seen.append((self.path, dict(self.headers.items()), body))
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def front() -> Iterator[tuple[HttpFront, int]]:
    """A front (max_input_size 1000) on a free port before an Upstream; the port."""
    Upstream.seen = []
    with http_server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream) as upstream:
        thread = threading.Thread(target=upstream.serve_forever, daemon=True)
        thread.start()
        port = free_ports(1)[0]
        guard = HttpFront("127.0.0.1", port, upstream.server_address[1], max_input_size=1000)
        try:
            yield guard, port
        finally:
            guard.stop()
            upstream.shutdown()
            thread.join(timeout=10)


def test_the_front_bounds_bodies_and_declarations_before_passing_requests_on(front: tuple[HttpFront, int]) -> None:
    guard, port = front
    infer_path = "/v2/models/m/versions/1/infer"
    fits = json.dumps({"inputs": [{"name": "x", "shape": [2, 100], "datatype": "FP32", "data": [0] * 200}]}).encode()
    assert post("127.0.0.1", port, infer_path, fits, {"trt-lower-front": "forged"}) == (200, fits.decode())
    ((path, headers, body),) = Upstream.seen
    assert (path, body) == (infer_path, fits)
    groups = "shared-memory,model-repository,statistics,trace,logging"
    key = f"trt-lower-front={headers['trt-lower-front']}"
    assert f"--http-restricted-api=health,inference,metadata,model-config,{groups}:{key}" in guard.server_args()
    assert f"--grpc-restricted-protocol={groups}:{key}" in guard.server_args()
    assert headers["trt-lower-front"] != "forged"
    declared = json.dumps({"inputs": [{"name": "x", "shape": [2, 126], "datatype": "FP32"}]}).encode()
    bomb = gzip.compress(b" " * 5000 + fits)
    refused = [
        (declared, {}, 400, "the request's inputs declare 1008 bytes; this server takes at most 1000"),
        (b"x" * 1001, {}, 413, "the request's body has 1001 bytes; this server takes at most 1000"),
        (bomb, {"Content-Encoding": "gzip"}, 413, "the request's body decompresses past 1000 bytes"),
        (b"not gzip", {"Content-Encoding": "gzip"}, 400, "does not decompress"),
        (fits, {"Content-Encoding": "br"}, 415, "Content-Encoding 'br' is not taken"),
        (b"{", {}, 400, "the request's JSON header does not parse"),
        (fits, {"Inference-Header-Content-Length": "-1"}, 400, "Inference-Header-Content-Length '-1'"),
        (fits, {"Inference-Header-Content-Length": str(len(fits) + 1)}, 400, "past the end of the"),
        # Read otherwise by the server's parser: a repeated key, Python's NaN, UTF-16.
        (b'{"inputs": [], "inputs": []}', {}, 400, "repeats the key 'inputs'"),
        (b'{"inputs": [{"name": "x", "shape": [NaN], "datatype": "FP32"}]}', {}, 400, "holds NaN, which is not JSON"),
        (declared.decode().encode("utf-16"), {}, 400, "does not parse"),
    ]
    for body, extra, status, message in refused:
        got, text = post("127.0.0.1", port, infer_path, body, extra)
        assert got == status and message in json.loads(text)["error"], text
    # tritonserver takes these targets for the same model's inference too.
    for target in ("http://127.0.0.1/v2/models/m/infer", "/v2/models/m/infer?x=1", "/v2/models/m/versions/1/infer"):
        got, text = post("127.0.0.1", port, target, declared)
        assert got == 400 and "declare 1008 bytes" in text, (target, text)
    for headers, status in [
        ("Transfer-Encoding: chunked\r\n", 411),  # its headers only
        (
            f"Content-Length: {len(fits)}\r\nInference-Header-Content-Length: {len(fits)}\r\n"
            "Inference-Header-Content-Length: 9\r\n",
            400,
        ),
    ]:
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as raw:
            raw.sendall(f"POST {infer_path} HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode() + fits)
            assert raw.recv(4096).startswith(f"HTTP/1.1 {status} ".encode()), headers
    assert len(Upstream.seen) == 1  # none of them reached the server


@pytest.mark.parametrize(
    "header",
    [
        [],
        {"inputs": {}},
        {"inputs": [7]},
        {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, -1]}]},
        {"inputs": [{"name": "x", "datatype": "FP32", "shape": [True]}]},
        {"inputs": [{"name": "x", "shape": [1]}]},
        {"inputs": [{"datatype": "FP32", "shape": [1.0]}]},
    ],
)
def test_an_inference_header_not_of_the_protocol_is_refused(header: object) -> None:
    with pytest.raises(Refused):
        declared_bytes(header)


def test_the_front_answers_502_while_the_server_is_down() -> None:
    port, nothing = free_ports(2)
    guard = HttpFront("127.0.0.1", port, nothing)
    try:
        status, text = post("127.0.0.1", port, "/v2/health/ready", b"", method="GET")
    finally:
        guard.stop()
    assert status == 502 and "did not answer" in text


def test_runner_merges_requests_and_blames_only_the_bad_one(bert: Served) -> None:
    """The python backend's batching, without a server: requests of one sequence length run as
    one call; a request that fails gets its own error, the others their results."""
    calls = []

    def counted(*args: torch.Tensor) -> object:
        calls.append(args[0].shape)
        return bert.lowered(*args)

    runner = Runner(
        counted,
        ["input_ids"],
        ["last_hidden_state", "pooler_output"],  # type: ignore[arg-type]
        torch.device("cpu"),
        batching=True,
    )
    ids = [torch.randint(0, 500, s) for s in [(1, 8), (2, 8), (1, 12), (1, 99), (3, 8)]]
    replies = runner.run([{"input_ids": t} for t in ids])
    assert isinstance(replies[3], trt_lower.EngineInputError)
    for t, reply in zip(ids[:3] + ids[4:], replies[:3] + replies[4:]):
        assert isinstance(reply, dict)
        check(bert, lambda name: reply[name].numpy(), t.numpy())  # type: ignore[index]
    assert (6, 8) in calls and (1, 12) in calls


class MLP(torch.nn.Module):
    """Linear, ReLU, Linear, Sigmoid, Linear on x."""

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(width, 16),
            torch.nn.ReLU(),
            torch.nn.Linear(16, width),
            torch.nn.Sigmoid(),
            torch.nn.Linear(width, 4),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def parse_config(model_dir: Path) -> model_config_pb2.ModelConfig:
    return text_format.Parse((model_dir / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())


def test_whole_onnxruntime_model_becomes_an_onnxruntime_onnx_model(resnet: Served, tmp_path: Path) -> None:
    model = export_model_repository(resnet.lowered, tmp_path, "resnet18", max_batch_size=4, instances=2)
    assert model.platform == "onnxruntime_onnx", model.reason
    config = parse_config(model.path)
    assert config.platform == "onnxruntime_onnx" and config.max_batch_size == 4
    assert [(t.name, t.data_type, list(t.dims)) for t in config.input] == [
        ("x", model_config_pb2.TYPE_FP32, [3, 64, 64])
    ]
    assert [(t.name, list(t.dims)) for t in config.output] == [("output", [1000])]
    assert config.instance_group[0].kind == model_config_pb2.ModelInstanceGroup.KIND_CPU
    assert config.instance_group[0].count == 2
    assert config.dynamic_batching.max_queue_delay_microseconds > 0
    # model.onnx is self-contained and speaks the config's names.
    session = onnxruntime.InferenceSession(str(model.path / "1" / "model.onnx"))
    x = torch.randn(3, 3, 64, 64).numpy()
    (y,) = session.run(["output"], {"x": x})
    torch.testing.assert_close(torch.from_numpy(y), resnet.expected(x)["output"], **TOL)


def test_whole_tensorrt_model_becomes_a_tensorrt_plan_model(
    trt_double: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trt_double.device import HostDevice

    monkeypatch.setattr(HostDevice, "identity", lambda self: "NVIDIA H100 sm_90")
    model = MLP().eval()
    spec = trt_lower.TensorSpec((1, 8), (2, 8), (BATCH, 8))
    lowered = trt_lower.lower_to_trt(model, (spec,), backend="tensorrt")
    exported = export_model_repository(lowered, tmp_path, "mlp", max_batch_size=BATCH)
    assert exported.platform == "tensorrt_plan", exported.reason
    config = parse_config(exported.path)
    assert config.platform == "tensorrt_plan"
    assert dict(config.cc_model_filenames) == {"9.0": "model_sm90.plan"}
    assert (exported.path / "1" / "model_sm90.plan").read_bytes() == lowered.engine_0.plan
    assert config.instance_group[0].kind == model_config_pb2.ModelInstanceGroup.KIND_GPU
    # A plan's tensor names are the engine's.
    engine = lowered.engine_0
    assert [t.name for t in config.input] == [s.name for s in engine.inputs]
    assert [(t.name, list(t.dims)) for t in config.output] == [(engine.outputs[0].name, [4])]
    # Exported again on another kind of GPU: one plan per compute capability.
    monkeypatch.setattr(HostDevice, "identity", lambda self: "NVIDIA A100-SXM4-40GB sm_80")
    export_model_repository(lowered, tmp_path, "mlp", max_batch_size=BATCH)
    assert dict(parse_config(exported.path).cc_model_filenames) == {"9.0": "model_sm90.plan", "8.0": "model_sm80.plan"}


def test_partly_lowered_model_becomes_a_python_model(tmp_path: Path) -> None:
    lowered = trt_lower.lower_to_trt(
        MLP().eval(),
        (torch.randn(2, 8),),
        backend="onnxruntime",
        min_block_size=1,
        fallback_ops=["aten.sigmoid.default"],
    )
    exported = export_model_repository(lowered, tmp_path, "mlp")
    assert exported.platform == "python" and "fallback" in exported.reason
    config = parse_config(exported.path)
    assert config.backend == "python" and config.max_batch_size == 0
    assert [(t.name, list(t.dims)) for t in config.input] == [("x", [2, 8])]
    assert not config.HasField("dynamic_batching")
    assert sorted(p.name for p in (exported.path / "1").iterdir()) == ["model.py", "model.trtl"]
    assert set(config.parameters) == {"artifact", "python_path"}


def test_a_model_under_size_conditions_is_served_by_its_guard(tmp_path: Path) -> None:
    """Captured under `x.shape[0] % 2 == 0`, the engine alone computes the even branch for every
    batch: only the lowered module's guard refuses an odd one. Such a model is a python model
    (its engine was exported alone as the ONNX Runtime model, a silently wrong answer for odd
    batches), and batch sizes the conditions rule out cannot be Triton's."""
    model = Fn(lambda x: x * 2 + 1 if x.shape[0] % 2 == 0 else x - 1)
    spec = trt_lower.TensorSpec((1, 8), (4, 8), (8, 8))
    lowered = trt_lower.lower_to_trt(model, (spec,), backend="onnxruntime", min_block_size=1)
    assert len(lowered.report.engines) == 1 and not lowered.report.fallbacks
    exported = export_model_repository(lowered, tmp_path, "even")
    assert exported.platform == "python" and "(args_0.shape[0] % 2) == 0" in exported.reason
    with pytest.raises(
        ValueError,
        match=r"platform='onnxruntime_onnx' needs the whole model in one engine .* "
        r"size conditions",
    ):
        export_model_repository(lowered, tmp_path, "even", platform="onnxruntime_onnx")
    with pytest.raises(
        ValueError,
        match=r"max_batch_size=4: Triton may send a batch of 1, and input shapes "
        r"args_0 \(1, 8\) break a condition",
    ):
        export_model_repository(lowered, tmp_path, "even", max_batch_size=4)


def test_outputs_sized_by_the_data_or_empty_have_dim_minus_one(tmp_path: Path) -> None:
    """Triton takes dims >= 1 or -1. A mask's rows were probed with all-False masks (zeros), so
    their count never varied and was written as a static 0; an empty output's 0 likewise."""
    model = Fn(lambda x, m: (x[m] * 2, x[:0] + 1))
    x, m = torch.randn(6, 4), torch.tensor([True, False, True, True, False, False])
    lowered = trt_lower.lower_to_trt(model, (x, m), backend="onnxruntime", min_block_size=1)
    config = parse_config(export_model_repository(lowered, tmp_path, "masked").path)
    assert [list(t.dims) for t in config.output] == [[-1, 4], [-1, 4]]


def test_scalars_of_a_model_without_a_batch_dim_travel_as_one_element(tmp_path: Path) -> None:
    """Triton refuses an empty reshape where max_batch_size is 0 (it stopped the whole server):
    such a 0-d input or output is declared as [1], and the python model's Runner takes it back."""
    model = Fn(lambda x, s: ((x * s).sum(), x + 1))
    x, s = torch.randn(2, 3), torch.tensor(1.5)
    lowered = trt_lower.lower_to_trt(model, (x, s), backend="onnxruntime", min_block_size=1)
    exported = export_model_repository(lowered, tmp_path, "scalars")
    assert exported.platform == "python" and "0-d" in exported.reason
    text = (exported.path / "config.pbtxt").read_text()
    assert "reshape" not in text
    config = parse_config(exported.path)
    assert [list(t.dims) for t in (*config.input, *config.output)] == [[2, 3], [1], [1], [2, 3]]
    runner = Runner(
        lowered, [t.name for t in config.input], [t.name for t in config.output], torch.device("cpu"), batching=False
    )
    (reply,) = runner.run([dict(zip(runner.inputs, (x, s.reshape(1))))])
    assert not isinstance(reply, Exception), reply
    expected = model(x, s)
    torch.testing.assert_close(reply[config.output[0].name], expected[0].reshape(1))
    torch.testing.assert_close(reply[config.output[1].name], expected[1])


class SequenceFirst(torch.nn.Module):
    """nn.MultiheadAttention without batch_first: dim 0 is the sequence, and every output row
    attends to every other, although all shapes follow dim 0."""

    def __init__(self) -> None:
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attention(x, x, x, need_weights=False)[0]


def test_a_dim_0_whose_items_mix_is_no_batch_dim(tmp_path: Path) -> None:
    """Merging two requests along such a dim 0 would let each attend to the other: silently
    wrong answers. Export refuses it as a batch dim, saying why."""
    spec = trt_lower.TensorSpec((1, 2, 8), (4, 2, 8), (8, 2, 8))
    lowered = trt_lower.lower_to_trt(SequenceFirst().eval(), (spec,), backend="onnxruntime")
    with pytest.raises(
        ValueError,
        match=r"max_batch_size=4 needs a batch dim, but output 'output' of the first item "
        r"along dim 0 changes with the other items",
    ):
        export_model_repository(lowered, tmp_path, "seq_first", max_batch_size=4)
    assert export_model_repository(lowered, tmp_path, "seq_first").platform == "onnxruntime_onnx"


def test_batching_needs_a_dynamic_batch_dim(resnet: Served, tmp_path: Path) -> None:
    static = trt_lower.lower_to_trt(MLP().eval(), (torch.randn(2, 8),), backend="onnxruntime")
    with pytest.raises(
        ValueError,
        match=r"max_batch_size=4 needs a batch dim, but input 'x' was lowered for "
        r"\(2, 8\) float32, without a varying dim 0",
    ):
        export_model_repository(static, tmp_path, "linear", max_batch_size=4)
    with pytest.raises(
        ValueError, match=r"Triton sends batches of 1..16, but the model was lowered for batch sizes 1..8"
    ):
        export_model_repository(resnet.lowered, tmp_path, "resnet18", max_batch_size=16)
    with pytest.raises(ValueError, match=r"platform='tensorrt_plan' needs a model lowered with backend='tensorrt'"):
        export_model_repository(resnet.lowered, tmp_path, "resnet18", platform="tensorrt_plan")
    for bad in [{"platform": "torch"}, {"instances": 0}, {"max_batch_size": -1}, {"version": 0}]:
        with pytest.raises(ValueError, match=next(iter(bad))):
            export_model_repository(resnet.lowered, tmp_path, "resnet18", **bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name must be a model name"):
        export_model_repository(resnet.lowered, tmp_path, "a/b")
    assert not list(tmp_path.iterdir())


def test_a_name_in_config_pbtxt_stays_one_name() -> None:
    """A tensor name (a tampered artifact's manifest chooses them) with a quote, a backslash or a
    newline: each is one field of config.pbtxt, as given, not protobuf text of its own."""
    injected = 'x" data_type: TYPE_FP32 dims: [ 1 ] }, { name: "injected'
    names = [injected, "a\\", "line\nbreak", "naïve-name_2"]
    sig = ModelSignature(tuple(TritonTensor(n, torch.float32, (2,)) for n in names), (), None)
    config = ModelConfig("m", "python", sig, parameters={'say "hi"\\': 'x" } name: "other'})
    parsed = text_format.Parse(config.text(), model_config_pb2.ModelConfig())
    assert [t.name for t in parsed.input] == names
    assert parsed.name == "m" and dict(parsed.parameters) == {'say "hi"\\': ANY}
    assert parsed.parameters['say "hi"\\'].string_value == 'x" } name: "other'


def test_a_model_name_is_a_directory_of_its_own(tmp_path: Path) -> None:
    """'..' wrote the model into the repository's parent, '.' into the repository itself."""
    lowered = trt_lower.lower_to_trt(MLP().eval(), (torch.randn(2, 8),), backend="onnxruntime")
    trt_lower.save(lowered, tmp_path / "m.trtl")
    repo = tmp_path / "repo"
    for name in (".", ".."):
        with pytest.raises(ValueError, match=r"name must be a model name .*not '\.' or '\.\.'"):
            export_model_repository(lowered, repo, name)
        with pytest.raises(SystemExit, match="trt-lower triton: ValueError: name must be a model name"):
            cli.main(["triton", str(tmp_path / "m.trtl"), "--repo", str(repo), "--name", name])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.trtl"]
    assert parse_config(export_model_repository(lowered, repo, "my-model_2.v1").path).name == "my-model_2.v1"


def test_cli_exports_an_artifact(resnet: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trt_lower.save(resnet.lowered, tmp_path / "resnet18.trtl")
    code = cli.main(
        [
            "triton",
            str(tmp_path / "resnet18.trtl"),
            "--repo",
            str(tmp_path / "repo"),
            "--name",
            "r18",
            "--max-batch-size",
            "4",
            "--platform",
            "python",
        ]
    )
    assert code == 0
    assert "platform python" in capsys.readouterr().out
    config = parse_config(tmp_path / "repo" / "r18")
    assert config.backend == "python" and config.max_batch_size == 4


def test_a_model_that_fails_to_load_stops_the_server_with_an_error(tmp_path: Path) -> None:
    model = tmp_path / "repo" / "broken"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(
        'backend: "python"\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        'output [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
    )
    (model / "1" / "model.py").write_text(
        "class TritonPythonModel:\n    def initialize(self, args):\n        raise RuntimeError('no model here')\n"
    )
    ports = free_ports(3)
    with open(tmp_path / "log", "wb") as log:
        server = TritonServer(
            tmp_path / "repo",
            http_port=ports[0],
            grpc_port=ports[1],
            metrics_port=ports[2],
            log=log,
            ready_timeout=TIMEOUT_S,
        )
        with pytest.raises(RuntimeError, match="tritonserver exited with status 1 before it was ready"):
            server.__enter__()
    assert server.process is None
    assert "failed to load 'broken'" in (tmp_path / "log").read_text()


def test_cli_serve_starts_the_server_on_the_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`trt-lower serve` wiring (the server itself is the `server` fixture's TritonServer): it
    serves until a SIGTERM, and reports a server that dies in one line."""
    started = []
    behaviour = ["import os, signal, time; time.sleep(1); os.kill(os.getppid(), signal.SIGTERM); time.sleep(60)"]

    class Recorder(TritonServer):
        def __enter__(self) -> TritonServer:
            started.append(self)
            self.process = subprocess.Popen([sys.executable, "-c", behaviour[0]])
            return self

    monkeypatch.setattr("trt_lower.triton.TritonServer", Recorder)
    assert (
        cli.main(
            [
                "serve",
                str(tmp_path),
                "--http-port",
                "9100",
                "--grpc-port",
                "9101",
                "--metrics-port",
                "9102",
                "--max-input-size",
                "4096",
            ]
        )
        == 0
    )
    (server,) = started
    assert (server.repo, server.http_url, server.grpc_url, server.metrics_port, server.max_input_size) == (
        tmp_path,
        "127.0.0.1:9100",
        "127.0.0.1:9101",
        9102,
        4096,
    )
    assert "serving" in capsys.readouterr().out
    behaviour[0] = "import os, signal; os.kill(os.getpid(), signal.SIGABRT)"  # as the huge request ended it
    with pytest.raises(
        SystemExit,
        match=rf"^trt-lower serve: RuntimeError: tritonserver was killed by SIGABRT while "
        rf"serving {tmp_path} \(its log above says why\)$",
    ):
        cli.main(["serve", str(tmp_path)])
    with pytest.raises(SystemExit, match="^trt-lower serve: ValueError: model repository .* is not a directory"):
        cli.main(["serve", str(tmp_path / "missing")])


def test_a_taken_port_is_refused_before_the_server_starts(tmp_path: Path) -> None:
    """Something already answering on the port would pass the readiness probe for a server that
    then fails to bind: start() refuses it, naming the port."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        others = free_ports(2)
        server = TritonServer(tmp_path, http_port=port, grpc_port=others[0], metrics_port=others[1])
        with pytest.raises(RuntimeError, match=f"cannot serve on 127.0.0.1:{port}: .*another server there"):
            server.start()
    assert server.process is None


def test_the_readiness_probe_bypasses_http_proxies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Ready(http_server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200 if self.path == "/v2/health/ready" else 404)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    with http_server.HTTPServer(("127.0.0.1", 0), Ready) as health:
        thread = threading.Thread(target=health.serve_forever, daemon=True)
        thread.start()
        try:
            # A proxy nothing listens on: the probe went there, and the server never looked ready.
            monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{free_ports(1)[0]}")
            monkeypatch.delenv("no_proxy", raising=False)
            monkeypatch.delenv("NO_PROXY", raising=False)
            server = TritonServer(tmp_path, http_port=health.server_address[1])
            assert server.ready()
        finally:
            health.shutdown()
            thread.join(timeout=10)


def test_an_ipv6_host_is_bracketed_in_the_urls(tmp_path: Path) -> None:
    server = TritonServer(tmp_path, host="::1", http_port=8000, grpc_port=8001)
    assert (server.http_url, server.grpc_url) == ("[::1]:8000", "[::1]:8001")
    assert "--grpc-address=::1" in server.command(tmp_path, [])


def test_stop_ends_the_server_even_when_its_wait_is_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second Ctrl-C during stop()'s wait left the server (in its own session, out of reach of
    the terminal) running with its ports."""
    server = TritonServer(tmp_path)
    server.process = process = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(60)"],
        start_new_session=True,
    )

    def interrupted(pid: int, timeout: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("trt_lower.triton.server._wait_unreaped", interrupted)
    with pytest.raises(KeyboardInterrupt):
        server.stop()
    assert process.poll() is not None and server.process is None
