"""Writes health signals as TensorBoard summaries, outside the training step.

All writes go through one `tf.summary` file writer per run directory (two
writers in one directory lose data on TensorBoard's Python path), in
non-decreasing step order (TensorBoard purges "orphaned" data when steps go
back). Events are flushed at once, so they survive the process dying.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import tensorflow as tf

from tb_trainhealth import schema

# Per-step rows are cheap to lose on a hard crash (events are flushed at once);
# flush them often enough for a live reader to follow the run.
FLUSH_MILLIS = 10_000


class HealthWriter:
    def __init__(self, log_dir: str):
        self._writer = tf.summary.create_file_writer(log_dir, flush_millis=FLUSH_MILLIS)
        self._scalar_metadata = schema.scalar_metadata().SerializeToString()
        self._tensor_metadata = schema.tensor_metadata().SerializeToString()
        self._record_metadata = schema.record_metadata().SerializeToString()
        self._row_writers: dict[tuple[str, ...], Any] = {}

    def _row_writer(self, dense_tags: tuple[str, ...], sparse_tags: tuple[str, ...]):
        """A graph function writing many rows per call: eager summary ops cost ~0.1 ms each.

        Dense columns are written every row; sparse ones (learning rate, step time, memory,
        non-finite counts) only where the host left a finite value, and per-layer weight
        norms only on sampled rows: fewer records, same information.
        """
        key = (dense_tags, sparse_tags)
        if key in self._row_writers:
            return self._row_writers[key]
        scalar_metadata, tensor_metadata = self._scalar_metadata, self._tensor_metadata

        @tf.function(reduce_retracing=True)
        def write(steps, dense, sparse, layer_grad_norm, layer_weight_norm, weight_rows):
            with tf.summary.record_if(True):
                for i in tf.range(tf.shape(steps)[0]):
                    step = steps[i]
                    for j, tag in enumerate(dense_tags):
                        tf.summary.write(tag, dense[i, j], step=step, metadata=scalar_metadata)
                    for j, tag in enumerate(sparse_tags):
                        if tf.math.is_finite(sparse[i, j]):
                            tf.summary.write(tag, sparse[i, j], step=step, metadata=scalar_metadata)
                    tf.summary.write(
                        schema.TAG_LAYER_GRAD_NORM, layer_grad_norm[i], step=step, metadata=tensor_metadata
                    )
                    if weight_rows[i]:
                        tf.summary.write(
                            schema.TAG_LAYER_WEIGHT_NORM, layer_weight_norm[i], step=step, metadata=tensor_metadata
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
        with self._writer.as_default():
            self._row_writer(dense_tags, sparse_tags)(
                tf.constant(steps, tf.int64),
                tf.constant(np.stack([dense[t] for t in dense_tags], axis=1), tf.float32),
                tf.constant(np.stack([sparse[t] for t in sparse_tags], axis=1), tf.float32),
                tf.constant(layer_grad_norm, tf.float32),
                tf.constant(layer_weight_norm, tf.float32),
                tf.constant(weight_rows, tf.bool),
            )

    def write_scalars(self, step: int, values: dict[str, float]) -> None:
        with self._writer.as_default(), tf.summary.record_if(True):
            for tag, value in values.items():
                tf.summary.write(tag, tf.constant(value, tf.float32), step=step, metadata=self._scalar_metadata)

    def write_vector(self, tag: str, step: int, values: np.ndarray) -> None:
        with self._writer.as_default(), tf.summary.record_if(True):
            tf.summary.write(tag, tf.constant(values, tf.float32), step=step, metadata=self._tensor_metadata)

    def write_json(self, tag: str, step: int, payload: Any) -> None:
        """A discrete record (run info, events): written and flushed at once."""
        with self._writer.as_default(), tf.summary.record_if(True):
            text = json.dumps(_finite_json(payload), allow_nan=False)
            tf.summary.write(tag, tf.constant(text), step=step, metadata=self._record_metadata)
        self._writer.flush()

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


def _finite_json(value: Any) -> Any:
    """NaN/Inf become null: records must stay strict JSON for every reader."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_json(v) for v in value]
    return value
