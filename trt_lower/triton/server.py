"""Run NVIDIA's Triton Inference Server on a model repository, from the nvidia-pytriton wheel.

The wheel ships the `tritonserver` binary with one backend, python. Three things make it run
a stand-alone repository (docs/serving.md): a backend directory holding the python backend's
library, its utilities module and the stub built for the running Python; LD_LIBRARY_PATH
naming the running Python's libpython before the wheel's own libraries; and model.py files
that put the environment on sys.path themselves (export_model_repository writes them so).
Its HTTP port is served by a front (front.py) that refuses requests the server would die of and
passes on only inference and health requests; its gRPC APIs other than those are restricted to
the front's secret.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import IO, Sequence

from trt_lower.triton.front import DEFAULT_MAX_INPUT_SIZE, HttpFront

INSTALL_HINT = "pip install 'trt_lower[serve]'"


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """`n` distinct ports nothing listens on now, for a server's HTTP, gRPC and metrics."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind((host, 0))
        return [s.getsockname()[1] for s in socks]


# Health probes go straight to the server: an http_proxy setting would route 127.0.0.1 through
# the proxy, and the server would never look ready.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _check_free(host: str, port: int) -> None:
    """Raise unless `port` on `host` can be bound: a server already there would answer the
    readiness probe for one that then fails to start."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed server's TIME_WAIT is no server
        try:
            probe.bind((host, port))
        except OSError as e:
            raise RuntimeError(
                f"cannot serve on {host}:{port}: {e.strerror} (another server there?); choose other ports"
            ) from None


def pytriton_dir() -> Path:
    """`<site-packages>/pytriton/tritonserver`, from the nvidia-pytriton wheel."""
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"serving needs the nvidia-pytriton package, which ships tritonserver: {INSTALL_HINT}")
    return Path(next(iter(spec.submodule_search_locations))) / "tritonserver"


def backend_dir(into: Path) -> Path:
    """A backend directory `into/python/` for the running Python: links to the wheel's python
    backend library, its utilities module, and the stub process built for this Python version."""
    triton = pytriton_dir()
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = triton / "python_backend_stubs" / version / "triton_python_backend_stub"
    if not stub.exists():
        raise RuntimeError(f"nvidia-pytriton has no python backend stub for Python {version} ({stub})")
    python = into / "python"
    python.mkdir(parents=True, exist_ok=True)
    for source in (
        triton / "backends/python/libtriton_python.so",
        triton / "backends/python/triton_python_backend_utils.py",
        stub,
    ):
        (python / source.name).symlink_to(source)
    return into


def environment() -> dict[str, str]:
    """The server's environment: the running Python's libpython first (the stub links
    libpython3.X, and the system's may be another patch release than this Python's stdlib), then
    the wheel's bundled libraries."""
    libs = [str(sysconfig.get_config_var("LIBDIR")), str(pytriton_dir().parent.parent / "nvidia_pytriton.libs")]
    old = os.environ.get("LD_LIBRARY_PATH")
    return {**os.environ, "LD_LIBRARY_PATH": os.pathsep.join(libs + ([old] if old else []))}


def exit_reason(status: int) -> str:
    """How a process with exit status `status` (Popen's: -N for signal N) ended, in words."""
    if status < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-status).name}"
        return f"was killed by signal {-status}"
    return f"exited with status {status}"


def _wait_unreaped(pid: int, timeout: float) -> None:
    """Wait up to `timeout` seconds for child `pid` to exit, leaving it to be reaped."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None:
            return
        time.sleep(0.1)


class TritonServer:
    """`tritonserver` serving `repo` on `host` (HTTP, gRPC and metrics ports), as a context
    manager: entering starts it and waits until every model is ready; leaving stops it. The HTTP
    port is the front's (front.py), which refuses requests declaring more than `max_input_size`
    bytes."""

    def __init__(
        self,
        repo: str | os.PathLike[str],
        *,
        host: str = "127.0.0.1",
        http_port: int = 8000,
        grpc_port: int = 8001,
        metrics_port: int = 8002,
        log: IO[bytes] | None = None,
        args: Sequence[str] = (),
        ready_timeout: float = 120,
        max_input_size: int = DEFAULT_MAX_INPUT_SIZE,
    ) -> None:
        self.repo = Path(repo)
        if not self.repo.is_dir():
            raise ValueError(f"model repository {self.repo} is not a directory")
        self.host, self.http_port, self.grpc_port, self.metrics_port = host, http_port, grpc_port, metrics_port
        self.log = log
        self.args = list(args)
        self.ready_timeout = ready_timeout
        self.max_input_size = max_input_size
        self.process: subprocess.Popen[bytes] | None = None
        self._front: HttpFront | None = None
        self._backends: Path | None = None

    @property
    def http_url(self) -> str:
        return f"{self._url_host}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"{self._url_host}:{self.grpc_port}"

    @property
    def _url_host(self) -> str:
        """The host as a URL writes it: an IPv6 address in brackets."""
        return f"[{self.host}]" if ":" in self.host else self.host

    def command(self, backends: Path, http: Sequence[str]) -> list[str]:
        """tritonserver's command line, with `http` its HTTP options and API restrictions (the
        front's server_args)."""
        return [
            str(pytriton_dir() / "bin" / "tritonserver"),
            f"--model-repository={self.repo.resolve()}",
            f"--backend-directory={backends}",
            *http,
            f"--grpc-address={self.host}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-address={self.host}",
            f"--metrics-port={self.metrics_port}",
            "--exit-timeout-secs=5",
            *self.args,
        ]

    def start(self) -> None:
        for port in (self.http_port, self.grpc_port, self.metrics_port):
            _check_free(self.host, port)
        self._front = HttpFront(self.host, self.http_port, free_ports(1)[0], self.max_input_size)
        try:
            self._backends = Path(tempfile.mkdtemp(prefix="trt_lower_triton_"))
            command = self.command(backend_dir(self._backends), self._front.server_args())
            # Its own process group: stop() can then end the backend stubs with it if they linger.
            self.process = subprocess.Popen(
                command,
                env=environment(),
                stdout=self.log,
                stderr=subprocess.STDOUT if self.log is not None else None,
                start_new_session=True,
            )
        except BaseException:
            self.stop()
            raise

    def ready(self) -> bool:
        try:
            with _DIRECT.open(f"http://{self.http_url}/v2/health/ready", timeout=2) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout: float) -> None:
        """Return once the server and all its models are ready; raise if it exits or `timeout`
        seconds pass first."""
        assert self.process is not None, "start() first"
        deadline = time.monotonic() + timeout
        # Exited is checked first: whatever answers on the port then is not this server.
        while self.process.poll() is None and not self.ready():
            if time.monotonic() > deadline:
                raise TimeoutError(f"tritonserver was not ready within {timeout:.0f} s")
            time.sleep(0.25)
        if self.process.poll() is not None:
            raise RuntimeError(
                f"tritonserver {exit_reason(self.process.returncode)} before it was ready "
                "(a model failed to load, or a port was taken?); its log says why"
            )

    def stop(self, timeout: float = 20) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                _wait_unreaped(process.pid, timeout)
            finally:  # also when a second Ctrl-C cuts the wait short
                # Unreaped, its pid still names its process group: end what is left of it (the
                # server past `timeout`, backend stubs).
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if self._backends is not None:
            shutil.rmtree(self._backends, ignore_errors=True)
            self._backends = None
        if self._front is not None:
            self._front.stop()
            self._front = None

    def __enter__(self) -> "TritonServer":
        self.start()
        try:
            self.wait_ready(self.ready_timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
