"""A guard in front of tritonserver's HTTP endpoint, refusing requests that would bring it down
or reach past inference.

tritonserver 2.51 (the one nvidia-pytriton ships) sizes the buffer of an input sent as JSON
from the shape the request declares, before it compares the shape with the data or the model:
one request declaring 2^40 rows aborts the whole server (std::bad_alloc). Its own limit
(`--http-max-input-size`) came in later releases. So TritonServer puts this front on the HTTP
port: it passes on only the inference and health routes; it reads each request (its body bounded
by `max_input_size` bytes, compressed or not, and the bodies of all requests in flight together
by PENDING_REQUESTS times that); it refuses an inference request whose inputs declare more than
`max_input_size` bytes, or whose JSON header is not the protocol's or could read otherwise to
the server (a repeated key: Python keeps the last, the server the first), with HTTP 400 in
Triton's error form, and hands the rest to the server unchanged. The server's own HTTP listens on
127.0.0.1 and answers only requests that carry the front's secret header
(`--http-restricted-api`, checked before it parses anything). gRPC needs no front for sizes: its
server checks the data against the shape before allocating (tests); its APIs other than
inference and health are restricted to the same secret (`--grpc-restricted-protocol`).
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import math
import re
import secrets
import socket
import threading
import urllib.parse
import zlib
from typing import Any, Iterator

from converters.core.errors import TrtLowerError

# What upstream Triton later made its --http-max-input-size default: 64 MiB per request.
DEFAULT_MAX_INPUT_SIZE = 64 * 2**20
# Bytes per element of each Triton data type; BYTES counts its 4-byte length prefix only (the
# least an element takes), so the bound is never above what the server allocates.
ITEM_SIZE = {
    "BOOL": 1,
    "UINT8": 1,
    "INT8": 1,
    "UINT16": 2,
    "INT16": 2,
    "FP16": 2,
    "BF16": 2,
    "UINT32": 4,
    "INT32": 4,
    "FP32": 4,
    "UINT64": 8,
    "INT64": 8,
    "FP64": 8,
    "BYTES": 4,
}
_INFER = re.compile(r"/v2/models/[^/]+(/versions/[^/]+)?/infer")
# What clients may reach through the front, by method: inference, health (server and model
# readiness), and the read-only metadata and configuration clients use to find a model's inputs.
# Shared-memory registration, the repository, logging, trace and statistics are administration:
# from the public port they would let a client write into another process's shared memory or
# reload models.
_PUBLIC = {
    "POST": _INFER,
    "GET": re.compile(r"/v2(/health/(live|ready)|/models/[^/]+(/versions/[^/]+)?(/ready|/config)?)?"),
}
_PUBLIC["HEAD"] = _PUBLIC["GET"]
# tritonserver's API groups (--http-restricted-api, --grpc-restricted-protocol): over HTTP all
# of them answer only the front; over gRPC, which has no front, the administrative ones answer
# only requests with the secret.
_READ_ONLY_GROUPS = ("metadata", "model-config")
_ADMIN_GROUPS = ("shared-memory", "model-repository", "statistics", "trace", "logging")
# The bodies the front holds at once, in requests of max_input_size bytes: a client beyond that
# gets 503 (many concurrent large bodies would grow the front past any bound).
PENDING_REQUESTS = 4
# Headers about one connection, not the message (RFC 9110, 7.6.1), and the length the front sets.
_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
}
# The header tritonserver's HTTP APIs are restricted to: the front sends it with a secret value.
SECRET_HEADER = "trt-lower-front"
# Request headers the front does not pass on: it has read (and inflated) the body, and it
# alone sets the secret.
_NOT_PASSED = _HOP | {"content-encoding", "expect", "host", SECRET_HEADER}
# The headers that say where the body and its JSON header end, and how the body is encoded.
_FRAMING = ("Content-Length", "Transfer-Encoding", "Content-Encoding", "Inference-Header-Content-Length")
# Seconds a client may stall mid-request before its connection is closed.
CLIENT_TIMEOUT_S = 60
# A byte count as the front reads it: ASCII digits only (str.isdigit() takes '²', which int()
# refuses), and few enough that int() takes them.
_COUNT = re.compile(r"[0-9]{1,18}")


class Refused(TrtLowerError):
    """A request the front does not hand to the server: its HTTP status and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def declared_bytes(header: object) -> int:
    """The bytes the inputs of an inference request's JSON header declare; Refused (400) where
    the header is not the protocol's: an object whose `inputs` each have a name, a datatype and
    a shape of non-negative ints."""
    inputs = header.get("inputs") if isinstance(header, dict) else None
    if not isinstance(inputs, list):
        raise Refused(400, "the request's JSON header must be an object with a list 'inputs'")
    total = 0
    for i, tensor in enumerate(inputs):
        shape = tensor.get("shape") if isinstance(tensor, dict) else None
        name = tensor.get("name") if isinstance(tensor, dict) else None
        dtype = tensor.get("datatype") if isinstance(tensor, dict) else None
        if (
            not isinstance(name, str)
            or not isinstance(dtype, str)
            or not isinstance(shape, list)
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
        ):
            raise Refused(
                400,
                f"input {i} of the request must have a string 'name' and 'datatype' and a 'shape' "
                "of non-negative integers",
            )
        total += math.prod(shape) * ITEM_SIZE.get(dtype, 1)
    return total


def _count(name: str, text: str) -> int:
    """The byte count header `name` gives; Refused (400) for anything but a plain decimal."""
    if not _COUNT.fullmatch(text):
        raise Refused(400, f"{name} {text!r} is not a byte count")
    return int(text)


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's members; Refused (400) for a key given twice: Python's parser keeps the
    last value, tritonserver's the first, so the front would check another shape than it sends."""
    members: dict[str, Any] = {}
    for key, value in pairs:
        if key in members:
            raise Refused(400, f"the request's JSON header repeats the key {key!r}")
        members[key] = value
    return members


def _not_json(constant: str) -> Any:
    raise Refused(400, f"the request's JSON header holds {constant}, which is not JSON")


def parse_header(data: bytes) -> object:
    """An inference request's JSON header, as tritonserver reads it; Refused (400) where it could
    read otherwise: not UTF-8 (Python's parser also takes UTF-16 and UTF-32), a repeated key, NaN
    or Infinity (Python's extensions)."""
    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=_unique, parse_constant=_not_json)
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError among them
        raise Refused(400, "the request's JSON header does not parse") from None


class _Budget:
    """The bytes of request bodies the front holds at once, across all its connections."""

    def __init__(self, total: int) -> None:
        self.total, self.held = total, 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def hold(self, size: int) -> Iterator[None]:
        with self._lock:
            if self.held + size > self.total:
                raise Refused(503, f"the server is busy (requests in flight hold {self.held} bytes); retry later")
            self.held += size
        try:
            yield
        finally:
            with self._lock:
                self.held -= size


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the clients use it
    timeout = CLIENT_TIMEOUT_S
    server: "_Listener"

    def do_GET(self) -> None:  # noqa: N802 (http.server's names)
        self._forward()

    do_POST = do_PUT = do_DELETE = do_HEAD = do_GET  # noqa: N815

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the server logs the requests it serves

    def _forward(self) -> None:
        try:
            target = self._target()
            length = self._length()
            with self.server.budget.hold(self._held(length)):
                body = self._body(length)
                if self.command == "POST" and _INFER.fullmatch(urllib.parse.urlsplit(target).path):
                    self._check(body)
                self._pass_on(target, body)
        except Refused as refused:
            self.close_connection = True  # its body may be unread
            self._reply(
                refused.status, json.dumps({"error": str(refused)}).encode(), [("Content-Type", "application/json")]
            )

    def _pass_on(self, target: str, body: bytes) -> None:
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _NOT_PASSED}
        headers[SECRET_HEADER] = self.server.secret
        try:
            upstream = self.server.upstream()
            upstream.request(self.command, target, body=body, headers=headers)
            reply = upstream.getresponse()
            content = reply.read()
        except (OSError, http.client.HTTPException) as error:
            self.server.drop_upstream()
            message = f"the Triton server behind this front did not answer: {error or type(error).__name__}"
            return self._reply(502, json.dumps({"error": message}).encode(), [("Content-Type", "application/json")])
        self._reply(reply.status, content, [(k, v) for k, v in reply.getheaders() if k.lower() not in _HOP])

    def _target(self) -> str:
        """The request's path and query, which the server is sent: the one the front checked
        (the server also takes an absolute URL, `http://host/v2/...`, as its path). Refused (403)
        unless it is an inference or health route."""
        parts = urllib.parse.urlsplit(self.path)
        if not parts.path.startswith("/"):
            raise Refused(400, f"the request's target {self.path!r} has no path")
        public = _PUBLIC.get(self.command)
        if public is None or not public.fullmatch(parts.path):
            raise Refused(
                403,
                f"{self.command} {parts.path!r} is not served here: this port takes inference "
                "(POST /v2/models/NAME/infer), health (GET /v2/health/live, /v2/health/ready, "
                "/v2/models/NAME/ready) and metadata (GET /v2, /v2/models/NAME, /v2/models/NAME/config) "
                "requests only",
            )
        return parts.path + (f"?{parts.query}" if parts.query else "")

    def _length(self) -> int:
        """The body's length, from the one Content-Length header (a repeated framing header, a
        Transfer-Encoding or a length past max_input_size refused)."""
        for name in _FRAMING:  # the server might take another copy than the front checked
            if len(self.headers.get_all(name, [])) > 1:
                raise Refused(400, f"the request has more than one {name} header")
        if "Transfer-Encoding" in self.headers:
            raise Refused(411, "send the request with a Content-Length (chunked bodies are not taken)")
        length = _count("Content-Length", self.headers.get("Content-Length", "0"))
        limit = self.server.max_input_size
        if length > limit:
            raise Refused(
                413,
                f"the request's body has {length} bytes; this server takes at most {limit} "
                "(trt-lower serve --max-input-size)",
            )
        return length

    def _held(self, length: int) -> int:
        """The bytes reading the body holds: the body, and a compressed one's inflated copy."""
        compressed = self.headers.get("Content-Encoding", "identity").lower() != "identity"
        return length + (self.server.max_input_size if compressed else 0)

    def _body(self, length: int) -> bytes:
        limit = self.server.max_input_size
        body = self.rfile.read(length)
        if len(body) < length:
            raise Refused(400, f"the request's body ended after {len(body)} of its {length} bytes")
        encoding = self.headers.get("Content-Encoding", "identity").lower()
        if encoding in ("gzip", "deflate"):
            inflate = zlib.decompressobj(32 + zlib.MAX_WBITS)  # either header
            try:
                body = inflate.decompress(body, limit + 1)
            except zlib.error as error:
                raise Refused(400, f"the request's {encoding} body does not decompress: {error}") from None
            if len(body) > limit or inflate.unconsumed_tail:
                raise Refused(
                    413, f"the request's body decompresses past {limit} bytes (trt-lower serve --max-input-size)"
                )
        elif encoding != "identity":
            raise Refused(415, f"Content-Encoding {encoding!r} is not taken (gzip, deflate or none)")
        return body

    def _check(self, body: bytes) -> None:
        name = "Inference-Header-Content-Length"
        length = _count(name, self.headers.get(name, str(len(body))))
        if length > len(body):
            raise Refused(400, f"{name} {length} is past the end of the {len(body)}-byte body")
        declared = declared_bytes(parse_header(body[:length]))
        limit = self.server.max_input_size
        if declared > limit:
            raise Refused(
                400,
                f"the request's inputs declare {declared} bytes; this server takes at most {limit} "
                "per request (trt-lower serve --max-input-size)",
            )

    def _reply(self, status: int, content: bytes, headers: list[tuple[str, str]]) -> None:
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(content)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(content)


class _Listener(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], upstream_port: int, max_input_size: int) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, _Handler)
        self.upstream_port = upstream_port
        self.max_input_size = max_input_size
        self.budget = _Budget(PENDING_REQUESTS * max_input_size)
        self.secret = secrets.token_hex(16)
        self._local = threading.local()  # one connection to the server per client connection's thread

    def upstream(self) -> http.client.HTTPConnection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = http.client.HTTPConnection(
                "127.0.0.1", self.upstream_port, timeout=None
            )
        return connection

    def drop_upstream(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None


class HttpFront:
    """The front on `host:port` for a tritonserver whose HTTP listens on 127.0.0.1:`upstream_port`
    (started with `server_args()`), in a thread of this process until stop()."""

    def __init__(self, host: str, port: int, upstream_port: int, max_input_size: int = DEFAULT_MAX_INPUT_SIZE) -> None:
        if not isinstance(max_input_size, int) or isinstance(max_input_size, bool) or max_input_size < 1:
            raise ValueError(f"max_input_size must be a positive number of bytes, got {max_input_size!r}")
        self._listener = _Listener((host, port), upstream_port, max_input_size)
        self._thread = threading.Thread(target=self._listener.serve_forever, name="trt_lower-triton-front", daemon=True)
        self._thread.start()

    def server_args(self) -> list[str]:
        """tritonserver's options: its HTTP on 127.0.0.1, every API only for requests from the
        front; over gRPC, the administrative APIs only for requests with its secret."""
        listener = self._listener
        key = f"{SECRET_HEADER}={listener.secret}"
        return [
            "--http-address=127.0.0.1",
            f"--http-port={listener.upstream_port}",
            f"--http-restricted-api={','.join(('health', 'inference', *_READ_ONLY_GROUPS, *_ADMIN_GROUPS))}:{key}",
            f"--grpc-restricted-protocol={','.join(_ADMIN_GROUPS)}:{key}",
        ]

    def stop(self) -> None:
        self._listener.shutdown()
        self._listener.server_close()
        self._thread.join()
