"""Writes health signals as TensorBoard summaries, outside the training step.

All writes go through one `tf.summary` file writer per run directory (two
writers in one directory lose data on TensorBoard's Python path), in
non-decreasing step order (TensorBoard purges "orphaned" data when steps go
back). Events are flushed at once, so they survive the process dying.

Writing runs on one background thread, in call order: a window of rows costs ~75 us of
summary ops per row, which the training thread would otherwise wait for (and on a GPU machine the
host is idle during the step anyway). A write that fails (disk full, a flaky bucket) loses
only itself: the first failure is printed once, and recording goes on.

The file writer is TensorFlow's own summary writer resource, driven with `tf.raw_ops`: the
graph function that writes a window of rows takes the writer as an input, so it is traced
once per process (per row layout), not once per run: a sweep of short fits, each with its
own HealthCallback, pays ~0.3 s of tracing once. No default writer and no `record_if` are
involved, so Keras' TensorBoard callback cannot gate these writes.
"""

from __future__ import annotations

import collections
import functools
import json
import logging
import math
import sys
import threading
import time
import uuid
from concurrent import futures
from typing import Any

import numpy as np
import tensorflow as tf

from tb_trainhealth.contract import tags

logger = logging.getLogger(__name__)

# Per-step rows are cheap to lose on a hard crash (events are flushed at once);
# flush them often enough for a live reader to follow the run.
FLUSH_MILLIS = 10_000
# Writes queued ahead of the background thread before callers wait for it (bounds memory).
MAX_QUEUED_WRITES = 8
# One thread for every writer in the process (a sweep of fits must not leave a thread each);
# a single worker keeps each writer's records in call order.
_WRITE_THREAD = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="tb-trainhealth-writer")


# How many events the writer queues before it writes them out (tf.summary's default).
MAX_QUEUE = 10
_SCALAR_METADATA = tags.scalar_metadata().SerializeToString()
_PLAIN_SCALAR_METADATA = tags.plain_scalar_metadata().SerializeToString()  # TensorBoard's Scalars tab
_TENSOR_METADATA = tags.tensor_metadata().SerializeToString()
_RECORD_METADATA = tags.record_metadata().SerializeToString()
_TRACED_LAYOUTS: set[tuple] = set()  # row layouts whose writer function is traced in this process


def _write(writer: tf.Tensor, tag: str, value: Any, step: Any, metadata: bytes) -> None:
    tf.raw_ops.WriteSummary(writer=writer, step=step, tensor=value, tag=tag, summary_metadata=metadata)


class HealthWriter:
    def __init__(self, log_dir: str):
        # A summary writer resource of our own (what tf.summary.create_file_writer makes).
        self._handle = tf.raw_ops.SummaryWriter(shared_name=f"tb_trainhealth_{uuid.uuid4().hex}", container="")
        tf.raw_ops.CreateSummaryFileWriter(
            writer=self._handle, logdir=log_dir, max_queue=MAX_QUEUE, flush_millis=FLUSH_MILLIS, filename_suffix=".v2"
        )
        self._closed = False
        self._queued: collections.deque[futures.Future] = collections.deque()
        self._log_dir = log_dir
        self.failed_writes = 0
        # The stall watchdog writes from its own thread: the queue of writes takes turns.
        self._lock = threading.RLock()
        self.last_write = time.perf_counter()  # when a write was last queued

    def _submit(self, write, *args) -> None:
        """Queue a write (waiting if far behind)."""
        with self._lock:
            self.last_write = time.perf_counter()
            self._submit_now(write, *args)

    def _submit_now(self, write, *args) -> None:
        while self._queued and (self._queued[0].done() or len(self._queued) >= MAX_QUEUED_WRITES):
            self._settle(self._queued.popleft())
        try:
            future = _WRITE_THREAD.submit(write, *args)
        except RuntimeError:  # the interpreter is exiting (our atexit hook): write here and now
            self._wait()
            write(*args)
            return
        self._queued.append(future)

    def _wait(self) -> None:
        with self._lock:
            while self._queued:
                self._settle(self._queued.popleft())

    def _settle(self, write: futures.Future) -> None:
        """Wait for one queued write; report the first failure of this writer, once."""
        err = write.exception()
        if err is None:
            return
        self.failed_writes += 1
        if self.failed_writes == 1:
            logger.warning("tb-trainhealth: a write to %s failed", self._log_dir, exc_info=err)
            print(f"tb-trainhealth: could not write to {self._log_dir}: {err!r} (recording goes on)", file=sys.stderr)

    def write_rows(
        self,
        steps: np.ndarray,
        dense: dict[str, np.ndarray],
        sparse: dict[str, np.ndarray],
        layer_grad_norm: np.ndarray,
        layer_weight_norm: np.ndarray,
        weight_rows: np.ndarray,
        plain: dict[str, str] | None = None,
    ) -> None:
        """plain: {our tag: plain scalar tag} of the columns also written for TensorBoard's
        Scalars dashboard (same values, same rows: sparse ones only where finite)."""
        dense_tags, sparse_tags = tuple(dense), tuple(sparse)
        plain_tags = tuple((plain or {}).get(tag, "") for tag in (*dense_tags, *sparse_tags))
        # Copies taken now: the caller may reuse its arrays while the write waits in the queue.
        arrays = (
            np.array(steps, np.int64),
            np.stack([dense[t] for t in dense_tags], axis=1).astype(np.float32),
            np.stack([sparse[t] for t in sparse_tags], axis=1).astype(np.float32),
            np.array(layer_grad_norm, np.float32),
            np.array(layer_weight_norm, np.float32),
            np.array(weight_rows, bool),
        )
        self._submit(self._write_rows_now, dense_tags, sparse_tags, plain_tags, arrays)
        key = _row_key(dense_tags, sparse_tags, plain_tags, arrays)
        if key not in _TRACED_LAYOUTS:  # the first rows of a layout trace its writer (~0.3 s):
            _TRACED_LAYOUTS.add(key)  # on the caller's clock, once, not behind a later step
            self._wait()

    def _write_rows_now(
        self, dense_tags: tuple[str, ...], sparse_tags: tuple[str, ...], plain_tags: tuple[str, ...], arrays: tuple
    ) -> None:
        writer = _row_writer(*_row_key(dense_tags, sparse_tags, plain_tags, arrays))
        writer(self._handle, *(tf.constant(a) for a in arrays))

    def write_scalars(self, step: int, values: dict[str, float], plain: bool = False) -> None:
        """plain: as `tf.summary.scalar` writes them (TensorBoard's Scalars dashboard), not as ours."""
        self._submit(self._write_scalars_now, step, dict(values), _PLAIN_SCALAR_METADATA if plain else _SCALAR_METADATA)

    def _write_scalars_now(self, step: int, values: dict[str, float], metadata: bytes = _SCALAR_METADATA) -> None:
        for tag, value in values.items():
            _write(self._handle, tag, tf.constant(value, tf.float32), tf.constant(step, tf.int64), metadata)

    def write_vector(self, tag: str, step: int, values: np.ndarray) -> None:
        self._submit(self._write_vector_now, tag, step, np.array(values, np.float32))

    def _write_vector_now(self, tag: str, step: int, values: np.ndarray) -> None:
        _write(self._handle, tag, tf.constant(values), tf.constant(step, tf.int64), _TENSOR_METADATA)

    def write_json(self, tag: str, step: int, payload: Any) -> None:
        """A discrete record (run info, events): written and flushed before this returns."""
        text = json.dumps(finite_json(payload), allow_nan=False)
        with self._lock:
            self._submit(self._write_json_now, tag, step, text)
            self._wait()

    def _write_json_now(self, tag: str, step: int, text: str) -> None:
        _write(self._handle, tag, tf.constant(text), tf.constant(step, tf.int64), _RECORD_METADATA)
        tf.raw_ops.FlushSummaryWriter(writer=self._handle)

    def write_alive(self, step: int, seconds: float) -> None:
        """The watchdog's heartbeat (`tags.TAG_ALIVE`), flushed with everything before it."""
        with self._lock:
            self._submit(self._write_scalars_now, step, {tags.TAG_ALIVE: seconds})
            self.flush()

    def flush(self) -> None:
        with self._lock:
            self._wait()
            if not self._closed:
                tf.raw_ops.FlushSummaryWriter(writer=self._handle)

    def close(self) -> None:
        with self._lock:
            try:
                self._wait()
            finally:
                if not self._closed:
                    self._closed = True
                    tf.raw_ops.CloseSummaryWriter(writer=self._handle)
                    tf.raw_ops.DestroyResourceOp(resource=self._handle, ignore_lookup_error=True)


def _row_key(
    dense_tags: tuple[str, ...], sparse_tags: tuple[str, ...], plain_tags: tuple[str, ...], arrays: tuple
) -> tuple:
    """Rows of one layout (tags, layer count: it changes when layers are frozen between fits)."""
    return dense_tags, sparse_tags, plain_tags, tuple((a.shape[1:], a.dtype.str) for a in arrays)


@functools.lru_cache(maxsize=64)
def _row_writer(
    dense_tags: tuple[str, ...], sparse_tags: tuple[str, ...], plain_tags: tuple[str, ...], columns: tuple
) -> Any:
    """A graph function writing many rows per call to any writer: eager summary ops cost ~0.1 ms each.

    Dense columns are written every row; sparse ones (learning rate, step time, memory,
    non-finite counts) only where the host left a finite value, and per-layer weight
    norms only on sampled rows: fewer records, same information. Traced once per process
    for a layout, for any number of rows and any writer.

    plain_tags: per dense then sparse column, the tag it is also written under for TensorBoard's
    Scalars dashboard ("" for none), from the same value in the same loop.
    """
    plain_dense, plain_sparse = plain_tags[: len(dense_tags)], plain_tags[len(dense_tags) :]
    signature = [tf.TensorSpec([], tf.resource)] + [
        tf.TensorSpec((None, *shape), tf.as_dtype(np.dtype(dtype))) for shape, dtype in columns
    ]

    @tf.function(input_signature=signature)
    def write(writer, steps, dense, sparse, layer_grad_norm, layer_weight_norm, weight_rows):
        for i in tf.range(tf.shape(steps)[0]):
            step = steps[i]
            for j, tag in enumerate(dense_tags):
                _write(writer, tag, dense[i, j], step, _SCALAR_METADATA)
                if plain_dense[j]:
                    _write(writer, plain_dense[j], dense[i, j], step, _PLAIN_SCALAR_METADATA)
            for j, tag in enumerate(sparse_tags):
                if tf.math.is_finite(sparse[i, j]):
                    _write(writer, tag, sparse[i, j], step, _SCALAR_METADATA)
                    if plain_sparse[j]:
                        _write(writer, plain_sparse[j], sparse[i, j], step, _PLAIN_SCALAR_METADATA)
            _write(writer, tags.TAG_LAYER_GRAD_NORM, layer_grad_norm[i], step, _TENSOR_METADATA)
            if weight_rows[i]:
                _write(writer, tags.TAG_LAYER_WEIGHT_NORM, layer_weight_norm[i], step, _TENSOR_METADATA)

    return write


def finite_json(value: Any) -> Any:
    """NaN/Inf become null: records must stay strict JSON for every reader."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value
