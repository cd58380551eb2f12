"""Writes health signals as TensorBoard summaries, outside the training step.

All writes go through one `tf.summary` file writer per run directory (two
writers in one directory lose data on TensorBoard's Python path), in
non-decreasing step order (TensorBoard purges "orphaned" data when steps go
back). Events are flushed at once, so they survive the process dying.

Writing runs on one background thread, in call order: a window of rows costs ~75 us of
summary ops per row, which the training thread would otherwise wait for (and on a GPU machine the
host is idle during the step anyway). A write that fails (disk full, a flaky bucket) loses
only itself: the first failure is printed once, and recording goes on.
"""

from __future__ import annotations

import collections
import json
import logging
import math
import sys
import threading
import time
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


class HealthWriter:
    def __init__(self, log_dir: str):
        self._writer = tf.summary.create_file_writer(log_dir, flush_millis=FLUSH_MILLIS)
        self._scalar_metadata = tags.scalar_metadata().SerializeToString()
        self._tensor_metadata = tags.tensor_metadata().SerializeToString()
        self._record_metadata = tags.record_metadata().SerializeToString()
        self._row_writers: dict[tuple[str, ...], Any] = {}
        self._queued: collections.deque[futures.Future] = collections.deque()
        self._traced: set[tuple] = set()
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

    def _row_writer(self, dense_tags: tuple[str, ...], sparse_tags: tuple[str, ...], arrays: tuple):
        """A graph function writing many rows per call: eager summary ops cost ~0.1 ms each.

        Dense columns are written every row; sparse ones (learning rate, step time, memory,
        non-finite counts) only where the host left a finite value, and per-layer weight
        norms only on sampled rows: fewer records, same information. Traced once, for any
        number of rows.
        """
        key = _row_key(dense_tags, sparse_tags, arrays)
        if key in self._row_writers:
            return self._row_writers[key]
        scalar_metadata, tensor_metadata = self._scalar_metadata, self._tensor_metadata
        signature = [tf.TensorSpec((None, *a.shape[1:]), tf.as_dtype(a.dtype)) for a in arrays]

        @tf.function(input_signature=signature)
        def write(steps, dense, sparse, layer_grad_norm, layer_weight_norm, weight_rows):
            with tf.summary.record_if(True):
                for i in tf.range(tf.shape(steps)[0]):
                    step = steps[i]
                    for j, tag in enumerate(dense_tags):
                        tf.summary.write(tag, dense[i, j], step=step, metadata=scalar_metadata)
                    for j, tag in enumerate(sparse_tags):
                        if tf.math.is_finite(sparse[i, j]):
                            tf.summary.write(tag, sparse[i, j], step=step, metadata=scalar_metadata)
                    tf.summary.write(tags.TAG_LAYER_GRAD_NORM, layer_grad_norm[i], step=step, metadata=tensor_metadata)
                    if weight_rows[i]:
                        tf.summary.write(
                            tags.TAG_LAYER_WEIGHT_NORM, layer_weight_norm[i], step=step, metadata=tensor_metadata
                        )

        # Each run's writer needs its own function (the default writer is captured when
        # tracing), so a sweep of short fits traces this code once per fit: expected, and not
        # worth TensorFlow's "excessive retracing" warning in the user's console.
        write._omit_frequent_tracing_warning = True
        self._row_writers[key] = write
        return write

    def write_rows(
        self,
        steps: np.ndarray,
        dense: dict[str, np.ndarray],
        sparse: dict[str, np.ndarray],
        layer_grad_norm: np.ndarray,
        layer_weight_norm: np.ndarray,
        weight_rows: np.ndarray,
    ) -> None:
        dense_tags, sparse_tags = tuple(dense), tuple(sparse)
        # Copies taken now: the caller may reuse its arrays while the write waits in the queue.
        arrays = (
            np.array(steps, np.int64),
            np.stack([dense[t] for t in dense_tags], axis=1).astype(np.float32),
            np.stack([sparse[t] for t in sparse_tags], axis=1).astype(np.float32),
            np.array(layer_grad_norm, np.float32),
            np.array(layer_weight_norm, np.float32),
            np.array(weight_rows, bool),
        )
        self._submit(self._write_rows_now, dense_tags, sparse_tags, arrays)
        key = _row_key(dense_tags, sparse_tags, arrays)
        if key not in self._traced:  # the first rows of a layout trace its writer (~0.3 s):
            self._traced.add(key)  # on the caller's clock, once, not behind a later step
            self._wait()

    def _write_rows_now(self, dense_tags: tuple[str, ...], sparse_tags: tuple[str, ...], arrays: tuple) -> None:
        with self._writer.as_default():
            self._row_writer(dense_tags, sparse_tags, arrays)(*(tf.constant(a) for a in arrays))

    def write_scalars(self, step: int, values: dict[str, float]) -> None:
        self._submit(self._write_scalars_now, step, dict(values))

    def _write_scalars_now(self, step: int, values: dict[str, float]) -> None:
        with self._writer.as_default(), tf.summary.record_if(True):
            for tag, value in values.items():
                tf.summary.write(tag, tf.constant(value, tf.float32), step=step, metadata=self._scalar_metadata)

    def write_vector(self, tag: str, step: int, values: np.ndarray) -> None:
        self._submit(self._write_vector_now, tag, step, np.array(values, np.float32))

    def _write_vector_now(self, tag: str, step: int, values: np.ndarray) -> None:
        with self._writer.as_default(), tf.summary.record_if(True):
            tf.summary.write(tag, tf.constant(values), step=step, metadata=self._tensor_metadata)

    def write_json(self, tag: str, step: int, payload: Any) -> None:
        """A discrete record (run info, events): written and flushed before this returns."""
        text = json.dumps(finite_json(payload), allow_nan=False)
        with self._lock:
            self._submit(self._write_json_now, tag, step, text)
            self._wait()

    def _write_json_now(self, tag: str, step: int, text: str) -> None:
        with self._writer.as_default(), tf.summary.record_if(True):
            tf.summary.write(tag, tf.constant(text), step=step, metadata=self._record_metadata)
        self._writer.flush()

    def write_alive(self, step: int, seconds: float) -> None:
        """The watchdog's heartbeat (`tags.TAG_ALIVE`), flushed with everything before it."""
        with self._lock:
            self._submit(self._write_scalars_now, step, {tags.TAG_ALIVE: seconds})
            self.flush()

    def flush(self) -> None:
        with self._lock:
            self._wait()
            self._writer.flush()

    def close(self) -> None:
        try:
            self._wait()
        finally:
            self._writer.close()


def _row_key(dense_tags: tuple[str, ...], sparse_tags: tuple[str, ...], arrays: tuple) -> tuple:
    """Rows of one layout (tags, layer count: it changes when layers are frozen between fits)."""
    return dense_tags, sparse_tags, tuple(a.shape[1:] for a in arrays)


def finite_json(value: Any) -> Any:
    """NaN/Inf become null: records must stay strict JSON for every reader."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value
