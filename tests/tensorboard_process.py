"""Starts a real `tensorboard` process on loopback for end-to-end tests."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=60) as response:
        return json.loads(response.read())


@contextlib.contextmanager
def running_tensorboard(
    logdir: str, load_fast: bool, extra: tuple[str, ...] = (), without_tensorflow: bool = False
) -> Iterator[str]:
    """without_tensorflow: as where TensorFlow is not installed (`import tensorflow` fails), so
    TensorBoard reads through its own stub: boto3 for s3://, fsspec for gs:// (docs/object-storage.md)."""
    port = free_port()
    main = ["-m", "tensorboard.main"]
    if without_tensorflow:
        main = ["-c", "import sys; sys.modules['tensorflow'] = None; from tensorboard.main import run_main; run_main()"]
    command = [
        sys.executable, *main, "--logdir", logdir, "--host", "127.0.0.1",
        "--port", str(port), f"--load_fast={str(load_fast).lower()}", "--reload_interval", "1", *extra,
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                get_json(url + "/data/plugins_listing")
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    output = process.stdout.read() if process.stdout else ""
                    raise RuntimeError(f"tensorboard did not start:\n{output[-3000:]}") from None
                time.sleep(0.5)
        yield url
    finally:
        stop(process)


def stop(process: subprocess.Popen, timeout: float = 20) -> None:
    """Terminate a server this test started; kill it where it does not end within `timeout`."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_for(predicate, timeout: float = 60.0, interval: float = 1.0):
    """Poll until predicate() returns a truthy value (TensorBoard loads data in the background)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)
