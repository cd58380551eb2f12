"""A DataProvider over a local logdir loaded by TensorBoard's Rust data server (`--load_fast`).

The data server loads the same files many times faster than the Python ingester, on its own
threads (`python bench/scale.py` times both and prints the ratio), keeps the same per-series
samples, and is installed with TensorBoard (package `tensorboard-data-server`). The CLI uses it to load a logdir once, then
reads through the same DataProvider interface as the Health tab does under --load_fast.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import tempfile
import threading
from collections.abc import Iterator

import numpy as np
from tensorboard.compat.proto import types_pb2
from tensorboard.data import grpc_provider
from tensorboard.data import provider as tb_provider
from tensorboard.data.proto import data_provider_pb2
from tensorboard.util import tensor_util

from tb_trainhealth.read.tensorboard_private import (
    DATA_SERVER_LOG_LEVEL,
    LOAD_FINISHED,
    data_server_command,
    data_server_port_file,
)

logger = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 1 << 28  # one run's downsampled series fit easily


class DataServerUnavailable(Exception):
    """The data server is not installed for this platform or could not start."""


@contextlib.contextmanager
def loaded_once(
    logdir: str, samples: dict[str, int], reload_seconds: int | None = None
) -> Iterator[tb_provider.DataProvider]:
    """Start a data server, wait until it has read every event file under `logdir` once,
    and yield a DataProvider over it; the server is stopped on exit.

    reload_seconds: keep re-reading the logdir this often (new runs, growing runs)."""
    import grpc
    from tensorboard.data import server_ingester

    try:
        binary = server_ingester.get_server_binary().path
    except server_ingester.NoDataServerError as err:
        raise DataServerUnavailable(str(err)) from err
    with tempfile.TemporaryDirectory(prefix="tb_trainhealth_") as scratch:
        logdir = os.path.abspath(os.path.expanduser(logdir))
        command = data_server_command(binary, logdir, reload_seconds, samples, scratch)
        try:
            server = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
                env={**os.environ, **DATA_SERVER_LOG_LEVEL},
            )
        except OSError as err:
            raise DataServerUnavailable(f"cannot start {binary}: {err}") from err
        channel = None
        try:
            _wait_until_loaded(server)
            with open(data_server_port_file(scratch)) as f:
                address = f"localhost:{int(f.read())}"
            channel = grpc.insecure_channel(address, options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)])
            yield _FloatTensorsProvider(address, grpc_provider.make_stub(channel))
        finally:
            if channel is not None:
                channel.close()
            with contextlib.suppress(OSError):
                server.stdin.close()  # --die-after-stdin: the server exits
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


class _FloatTensorsProvider(grpc_provider.GrpcDataProvider):
    """TensorBoard's gRPC DataProvider, with float32 tensors read straight from their bytes.

    Its `read_tensors` builds each point's array with the generic `make_ndarray`, mostly shape
    and dtype bookkeeping, once for each of the thousands of per-layer vectors of a long run.
    Every other method is TensorBoard's."""

    def __init__(self, address: str, stub) -> None:
        super().__init__(address, stub)
        self._tensors_stub = stub

    def read_tensors(self, ctx, *, experiment_id, plugin_name, downsample=None, run_tag_filter=None):
        request = data_provider_pb2.ReadTensorsRequest(experiment_id=experiment_id)
        request.plugin_filter.plugin_name = plugin_name
        if run_tag_filter is not None and run_tag_filter.runs is not None:
            request.run_tag_filter.runs.names[:] = sorted(run_tag_filter.runs)
        if run_tag_filter is not None and run_tag_filter.tags is not None:
            request.run_tag_filter.tags.names[:] = sorted(run_tag_filter.tags)
        request.downsample.num_points = downsample
        response = self._tensors_stub.ReadTensors(request)
        return {
            run.run_name: {
                tag.tag_name: [
                    tb_provider.TensorDatum(step=step, wall_time=wall_time, numpy=_ndarray(value))
                    for step, wall_time, value in zip(tag.data.step, tag.data.wall_time, tag.data.value)
                ]
                for tag in run.tags
            }
            for run in response.runs
        }


def _ndarray(tensor) -> np.ndarray:
    """make_ndarray's result (a float32 array, read-only here), the fast way where it can."""
    if tensor.dtype == types_pb2.DT_FLOAT and tensor.tensor_content:
        values = np.frombuffer(tensor.tensor_content, np.float32)
        dims = tensor.tensor_shape.dim
        return values if len(dims) == 1 else values.reshape([d.size for d in dims])  # vectors: most of them
    return tensor_util.make_ndarray(tensor)


def _wait_until_loaded(server: subprocess.Popen) -> None:
    """Block until the server logs the end of its one load cycle; keep draining its log after."""
    tail: list[str] = []
    for line in server.stderr:
        if LOAD_FINISHED in line:
            threading.Thread(target=_discard_lines, args=(server.stderr,), daemon=True).start()
            return
        tail = [*tail[-20:], line]
    raise DataServerUnavailable(f"data server exited ({server.wait()}): {''.join(tail)[-2000:]}")


def _discard_lines(stream) -> None:
    for _ in stream:
        pass
