"""What the tests that run a real tritonserver share: the server on a repository (127.0.0.1, free
ports, stopped however the test ends, its log in the error when it does not come up), clients
whose requests are bounded by TIMEOUT_S, and a request from numpy arrays."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import tritonclient.grpc as grpc
import tritonclient.http as http
from tritonclient.utils import np_to_triton_dtype

from trt_lower.triton import TritonServer
from trt_lower.triton.server import free_ports

# Bounds every request, so a stuck server fails a test instead of hanging it.
TIMEOUT_S = 60
# The status of a request refused as the client's fault, as InferenceServerException.status() gives it.
INVALID = {"http": "400", "grpc": "StatusCode.INVALID_ARGUMENT"}


@contextlib.contextmanager
def serving(repo: Path, log_path: Path) -> Iterator[TritonServer]:
    """A tritonserver on `repo`, ready; its log written to `log_path`."""
    http_port, grpc_port, metrics_port = free_ports(3)
    with open(log_path, "wb") as log:
        server = TritonServer(
            repo, http_port=http_port, grpc_port=grpc_port, metrics_port=metrics_port, log=log, ready_timeout=180
        )
        try:
            server.start()
            server.wait_ready(server.ready_timeout)
            yield server
        except (RuntimeError, TimeoutError) as error:
            raise RuntimeError(f"{error}\n--- tritonserver log ---\n{log_path.read_text()[-6000:]}") from error
        finally:
            server.stop()


@contextlib.contextmanager
def client(server: TritonServer, protocol: str) -> Iterator[Any]:
    c = (
        http.InferenceServerClient(server.http_url, network_timeout=TIMEOUT_S)
        if protocol == "http"
        else grpc.InferenceServerClient(server.grpc_url)
    )
    try:
        yield c
    finally:
        c.close()


def infer(c: Any, protocol: str, model: str, inputs: dict[str, np.ndarray], dtype: str | None = None) -> Any:
    """`model`'s reply to `inputs`, each sent as its numpy dtype's Triton type (or `dtype`)."""
    module = http if protocol == "http" else grpc
    feeds = []
    for name, value in inputs.items():
        feed = module.InferInput(name, list(value.shape), dtype or np_to_triton_dtype(value.dtype))
        feed.set_data_from_numpy(value)
        feeds.append(feed)
    kwargs = {} if protocol == "http" else {"client_timeout": TIMEOUT_S}
    return c.infer(model, feeds, **kwargs)
