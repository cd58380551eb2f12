"""Writes health signals as TensorBoard summaries, outside the training step.

All writes go through one `tf.summary` file writer per run directory (two
writers in one directory lose data on TensorBoard's Python path); each tag's
values in increasing step order (a window of rows may follow an epoch record of
a later step: TensorBoard purges "orphaned" data of files of this version only
after a restart marker, which we never write). Events are flushed at once, so
they survive the process dying.

Writing runs on one background thread, in call order, which the training thread would
otherwise wait for (on a GPU machine the host is idle during the step anyway). Each step's
row is one event holding all its values, serialized from byte templates (`summary_bytes`).
A write that fails (disk full) loses only itself: the first failure is printed once, and
recording goes on. A bucket's copy is uploaded on a thread of its own (`bucket_mirror`): this
thread only flushes and says so, and no write waits for an upload.

The file writer is TensorFlow's own summary writer resource, driven with `tf.raw_ops`: the
graph function that writes a window of rows takes the writer as an input, so it is traced
once per process, not once per run or per fit. No default writer and no `record_if` are
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

from tb_trainhealth.callback.record import bucket_mirror, summary_bytes
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


def _write(writer: tf.Tensor, tag: str, value: Any, step: Any, metadata: bytes) -> None:
    tf.raw_ops.WriteSummary(writer=writer, step=step, tensor=value, tag=tag, summary_metadata=metadata)


class HealthWriter:
    def __init__(self, log_dir: str):
        # A bucket fsspec reaches is written through a local folder (`bucket_mirror`).
        self._mirror = bucket_mirror.for_log_dir(log_dir)
        # A summary writer resource of our own (what tf.summary.create_file_writer makes).
        self._handle = tf.raw_ops.SummaryWriter(shared_name=f"tb_trainhealth_{uuid.uuid4().hex}", container="")
        tf.raw_ops.CreateSummaryFileWriter(
            writer=self._handle,
            logdir=self._mirror.local_dir if self._mirror else log_dir,
            max_queue=MAX_QUEUE,
            flush_millis=FLUSH_MILLIS,
            filename_suffix=".v2",
        )
        self._closed = False
        self._queued: collections.deque[futures.Future] = collections.deque()
        self._log_dir = log_dir
        self.failed_writes = 0
        # The stall watchdog writes from its own thread: the queue of writes takes turns.
        self._lock = threading.RLock()
        self.last_write = time.perf_counter()  # when a write was last queued
        self._described: set[str] = set()  # row tags written with their metadata in this file

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
        layer_vectors: dict[str, tuple[np.ndarray, np.ndarray | None]],
        plain: dict[str, str] | None = None,
    ) -> None:
        """One event per row: the `tags.ROW_COLUMNS` among `dense` and `sparse` as one row
        vector (`tags.TAG_ROW`), other `dense` tags on every row, other `sparse` ones where
        finite; `layer_vectors`: {tag: (per-layer values [rows, layers], the rows that have
        one, None: all)}. plain: {our tag: plain scalar tag} of the columns also written for
        TensorBoard's Scalars dashboard (same values; dense ones thinned: `_thinned`)."""
        steps = np.array(steps, np.int64)
        # (tag, metadata, shape, values, rows present or None for all), copies taken now: the
        # caller may reuse its arrays while the write waits in the queue.
        specs = []
        in_row = _row_layout(dense)
        if in_row:
            values_of, unknown = {**dense, **sparse}, np.full(len(steps), np.nan)
            row = np.stack([values_of.get(tag, unknown) for tag in in_row], axis=1).astype(np.float32)
            specs.append((tags.TAG_ROW, _TENSOR_METADATA, (len(in_row),), row, None))
        for tag, values in (*dense.items(), *sparse.items()):
            values = np.array(values, np.float32)
            present = np.isfinite(values) if tag in sparse else None
            if tag not in in_row:
                specs.append((tag, _SCALAR_METADATA, (), values, present))
            if plain and tag in plain:
                shown = _thinned(steps, values) if present is None else present
                specs.append((plain[tag], _PLAIN_SCALAR_METADATA, (), values, shown))
        for tag, (values, present) in layer_vectors.items():
            values = np.array(values, np.float32)
            present = None if present is None else np.array(present, bool)
            specs.append((tag, _TENSOR_METADATA, values.shape[1:], values, present))
        self._submit(self._write_rows_now, steps, specs)
        if _write_raw_rows.experimental_get_tracing_count() == 0:  # its tracing: on the caller's
            self._wait()  # clock, once per process, not behind a later step

    def _write_rows_now(self, steps: np.ndarray, specs: list[tuple]) -> None:
        columns = [self._column(*spec) for spec in specs]
        summaries = summary_bytes.row_summaries(len(steps), columns)
        _write_raw_rows(self._handle, tf.constant(steps), tf.constant(summaries, tf.string))
        self._described.update(column.tag for column in columns if column.first_head is not None)
        self._upload_if_due()

    def _upload_if_due(self) -> None:
        """On the writer's thread: a bucket's copy follows the run (`bucket_mirror`): flushed
        here, sent on the mirror's own thread."""
        if self._mirror is not None and self._mirror.due():
            tf.raw_ops.FlushSummaryWriter(writer=self._handle)
            self._mirror.flushed()

    def _column(
        self, tag: str, metadata: bytes, shape: tuple, values: np.ndarray, present: np.ndarray | None = None
    ) -> summary_bytes.Column:
        """The tag's metadata goes with its first value in this file only (see `summary_bytes.Column`)."""
        first_head = None
        if tag not in self._described and (present is None or present.any()):
            first_head = _value_head(tag, metadata, shape)
        return summary_bytes.Column(tag, _value_head(tag, None, shape), values, present, first_head)

    def write_scalars(self, step: int, values: dict[str, float], plain: bool = False) -> None:
        """plain: as `tf.summary.scalar` writes them (TensorBoard's Scalars dashboard), not as ours."""
        self._submit(self._write_scalars_now, step, dict(values), _PLAIN_SCALAR_METADATA if plain else _SCALAR_METADATA)

    def _write_scalars_now(self, step: int, values: dict[str, float], metadata: bytes = _SCALAR_METADATA) -> None:
        """As a window of one row: one graph call, where a summary op per value cost ~0.1-0.5 ms
        each on the writer thread beside the training."""
        specs = [(tag, metadata, (), np.array([value], np.float32), None) for tag, value in values.items()]
        self._write_rows_now(np.array([step], np.int64), specs)

    def write_json(self, tag: str, step: int, payload: Any) -> None:
        """A discrete record (run info, events): written and flushed before this returns."""
        text = json.dumps(finite_json(payload), allow_nan=False)
        with self._lock:
            self._submit(self._write_json_now, tag, step, text)
            self._wait()

    def _write_json_now(self, tag: str, step: int, text: str) -> None:
        _write(self._handle, tag, tf.constant(text), tf.constant(step, tf.int64), _RECORD_METADATA)
        tf.raw_ops.FlushSummaryWriter(writer=self._handle)
        self._upload_if_due()

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
                if self._mirror is not None:  # sent on the mirror's thread: the caller goes on
                    self._mirror.flushed()

    def close(self) -> None:
        with self._lock:
            try:
                self._wait()
            finally:
                if not self._closed:
                    self._closed = True
                    tf.raw_ops.CloseSummaryWriter(writer=self._handle)
                    tf.raw_ops.DestroyResourceOp(resource=self._handle, ignore_lookup_error=True)
                    if self._mirror is not None:
                        self._mirror.close()


def _row_layout(dense: dict[str, np.ndarray]) -> tuple[str, ...]:
    """The `tags.TAG_ROW` columns of these rows: all, or all but the loss where it was not
    captured; none without a gradient norm (then every value is a scalar of its own)."""
    if tags.TAG_GRAD_NORM not in dense:
        return ()
    return tags.ROW_COLUMNS if tags.TAG_LOSS in dense else tags.ROW_COLUMNS_WITHOUT_LOSS


def _thinned(steps: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The rows whose dense value also goes to TensorBoard's Scalars tab: its schedule
    (`tags.plain_scalar_steps`), every NaN/Inf and the window's newest (a run that ends in NaN shows it)."""
    shown = tags.plain_scalar_steps(steps) | ~np.isfinite(values)
    shown[-1:] = True
    return shown


@functools.lru_cache(maxsize=512)
def _value_head(tag: str, metadata: bytes | None, shape: tuple) -> bytes:
    return summary_bytes.value_head(tag, metadata, shape)


@tf.function(
    input_signature=[tf.TensorSpec([], tf.resource), tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.string)]
)
def _write_raw_rows(writer: tf.Tensor, steps: tf.Tensor, summaries: tf.Tensor) -> None:
    """One serialized Summary per step, in one graph call (an eager op costs ~0.1 ms):
    traced once per process, for any writer and any number of rows."""
    for i in tf.range(tf.shape(steps)[0]):
        tf.raw_ops.WriteRawProtoSummary(writer=writer, step=steps[i], tensor=summaries[i])


def finite_json(value: Any) -> Any:
    """NaN/Inf become null: records must stay strict JSON for every reader."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value
