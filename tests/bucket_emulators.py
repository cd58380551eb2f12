"""Buckets that behave like S3 and GCS, on loopback: moto's S3 server and gcp-storage-emulator,
each a subprocess on a free port, with the environment that points every client at it.

What reaches the emulator and how (see docs/object-storage.md): the callback uploads through
fsspec (s3fs, gcsfs: AWS_ENDPOINT_URL, STORAGE_EMULATOR_HOST); TensorBoard's TensorFlow stub
reads s3:// with boto3 (AWS_ENDPOINT_URL too) and gs:// through fsspec (gcsfs). Also a byte-counting
proxy, to measure what a reader downloads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import http.server
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

from tensorboard_process import stop

BUCKET = "health-logs"
SCHEMES = ("s3", "gs")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_port(port: int, process: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start on port {port}") from None
            time.sleep(0.05)


def client_environment(scheme: str, endpoint: str) -> dict[str, str]:
    """The variables that send every client of `scheme` to `endpoint` (and nowhere else)."""
    if scheme == "s3":
        return {
            "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": endpoint,  # boto3 (TensorBoard's own S3 filesystem too) and s3fs
        }  # fmt: skip
    return {
        "STORAGE_EMULATOR_HOST": endpoint,  # gcsfs (anonymous credentials)
        "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",  # its bucket-type lookup over gRPC: GCS only
        "NO_GCE_CHECK": "true",  # google-auth: no metadata server to ask on this machine
    }


@dataclasses.dataclass
class Emulator:
    scheme: str
    endpoint: str  # where clients go (the emulator, or a proxy in front of it)
    env: dict[str, str]

    def url(self, path: str = "") -> str:
        return f"{self.scheme}://{BUCKET}/{path}".rstrip("/")

    def filesystem(self):
        """A fresh fsspec filesystem on the emulator (no cached listing)."""
        import fsspec

        options = {"token": "anon", "endpoint_url": self.endpoint} if self.scheme == "gs" else {}
        if self.scheme == "s3":
            options = {"client_kwargs": {"endpoint_url": self.endpoint}, "key": "testing", "secret": "testing"}
        return fsspec.filesystem(self.scheme, skip_instance_cache=True, **options)


@contextlib.contextmanager
def running_emulator(scheme: str, refusing_credentials: bool = False) -> Iterator[Emulator]:
    """The emulator of `scheme` with an empty bucket BUCKET, until the block ends.
    `refusing_credentials` (s3): moto checks every request's keys (it knows none: all refused)."""
    port = free_port()
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"} if refusing_credentials else None
    if scheme == "s3":
        command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    else:
        command = [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1", "--port", str(port),
                   "--in-memory", "--default-bucket", BUCKET]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        _wait_for_port(port, process, command[2])
        endpoint = f"http://127.0.0.1:{port}"
        emulator = Emulator(scheme, endpoint, client_environment(scheme, endpoint))
        if scheme == "s3" and not refusing_credentials:
            emulator.filesystem().mkdir(BUCKET)
        yield emulator
    finally:
        stop(process, timeout=10)


@contextlib.contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """os.environ with `env` set (for this process and every subprocess it starts), then restored."""
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@dataclasses.dataclass
class Traffic:
    """What went through a counting proxy: one (method, path, status, response bytes) per request."""

    requests: list[tuple[str, str, int, int]] = dataclasses.field(default_factory=list)

    def clear(self) -> None:
        self.requests.clear()

    def object_bytes(self, name_part: str) -> int:
        """Bytes of the objects whose name contains `name_part` that GETs downloaded (2xx bodies:
        not a refusal's error text)."""
        return sum(
            size for method, path, status, size in self.requests
            if method == "GET" and name_part in path and 200 <= status < 300
        )  # fmt: skip

    def total_bytes(self) -> int:
        return sum(size for *_, size in self.requests)


@contextlib.contextmanager
def counting_proxy(upstream: str) -> Iterator[tuple[str, Traffic]]:
    """(endpoint, traffic): an HTTP proxy in front of `upstream` that counts requests and the
    bytes of each response body, as a bill for requests and egress would."""
    host, port = upstream.removeprefix("http://").split(":")
    traffic = Traffic()
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            connection = http.client.HTTPConnection(host, int(port), timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "keep-alive")}
            connection.request(self.command, self.path, body=body, headers=headers)
            response = connection.getresponse()
            payload = response.read()
            connection.close()
            with lock:
                traffic.requests.append((self.command, self.path, response.status, len(payload)))
            self.send_response(response.status, response.reason)
            for name, value in response.getheaders():
                if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(name, value)
            # A HEAD answer's length is the object's, as upstream said it.
            length = response.getheader("Content-Length", "0") if self.command == "HEAD" else str(len(payload))
            self.send_header("Content-Length", length)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = _forward

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", traffic
    finally:
        server.shutdown()
        server.server_close()


class SwitchableProxy:
    """A TCP forwarder on a fixed loopback port in front of `upstream`: `down()` closes its port and
    every open connection (a client gets "connection refused", as from a store that went away),
    `up()` opens the same port again."""

    def __init__(self, upstream: str):
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._listener: socket.socket | None = None
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()

    def up(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # (wakes the thread in accept(): close alone does not)
            listener.close()
        with self._lock:
            for connection in self._open:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
                connection.close()
            self._open.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # closed by down()
                return
            try:
                server = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._open += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)


@contextlib.contextmanager
def switchable_proxy(upstream: str) -> Iterator[SwitchableProxy]:
    proxy = SwitchableProxy(upstream)
    proxy.up()
    try:
        yield proxy
    finally:
        proxy.down()
