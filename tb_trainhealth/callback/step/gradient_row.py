"""The ops the step probe adds to the traced train step: gradient statistics and the row.

Pure TensorFlow, no state: `StepProbe` decides where in the step they run (its optimizer
wrappers); this says what they compute. Every op here runs on every step, so it is few ops
whatever the depth (see `weight_norms.layer_half_sumsq`) and no conditional (see `step_row`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import tensorflow as tf

from tb_trainhealth.callback.step.row_layout import NOT_SAMPLED
from tb_trainhealth.callback.step.weight_norms import layer_half_sumsq


@dataclasses.dataclass(frozen=True)
class GradientStats:
    layer_half_sumsq: tf.Tensor  # per layer, unscaled (tf.nn.l2_loss: the host takes the norms)
    total_half_sumsq: tf.Tensor


def replica_id() -> int:
    """This replica's index in the sync group while tracing a replicated step (0 otherwise)."""
    context = tf.distribute.get_replica_context()
    replica = tf.get_static_value(context.replica_id_in_sync_group) if context is not None else 0
    return int(replica) if replica is not None else 0


def float_scalar(value: Any) -> tf.Tensor:
    """`value` as a float32 scalar; no op where it already is one."""
    value = tf.cast(value, tf.float32)
    return value if value.shape.rank == 0 else tf.reshape(value, [])


def _all_finite(grads: list) -> tf.Tensor:
    """One fused reduction per gradient: a sum of squares is finite iff every element is."""
    terms = [
        tf.nn.l2_loss(tf.cast(g.values if isinstance(g, tf.IndexedSlices) else g, tf.float32))
        for g in grads
        if g is not None
    ]
    return tf.math.is_finite(tf.add_n(terms)) if terms else tf.constant(True)


def _dense_rows(grad: tf.IndexedSlices) -> tf.Tensor:
    """The touched rows of a sparse (embedding) gradient with duplicate indices summed,
    so its norm is the norm of the gradient actually applied; never the full table."""
    unique, positions = tf.unique(grad.indices)
    return tf.math.unsorted_segment_sum(grad.values, positions, tf.shape(unique)[0])


def gradient_stats(grads: list, layers: list[int | None], num_layers: int, scale: tf.Tensor | None) -> GradientStats:
    """Per-layer half sums of squares of `grads` (layer index per gradient; None: not tracked).
    `scale`: the loss scale the gradients carry (None: unscaled)."""
    grad_values = [
        (index, tf.cast(_dense_rows(grad) if isinstance(grad, tf.IndexedSlices) else grad, tf.float32))
        for grad, index in zip(grads, layers)
        if index is not None and grad is not None
    ]
    half_sumsq = layer_half_sumsq(num_layers, grad_values)
    if scale is not None:
        half_sumsq = half_sumsq / tf.square(scale)
    return GradientStats(half_sumsq, tf.reduce_sum(half_sumsq))


def shared_vector(loss: tf.Tensor, grads: list, replica: int, replicas: int) -> tf.Tensor:
    """What one replica adds to the all-reduce: its loss (Keras scales each replica's by
    1/replicas, so the sum is the global batch loss) and a one-hot flag when its own gradients
    were non-finite."""
    nonfinite = tf.cast(tf.logical_not(_all_finite(grads)), tf.float32)
    return tf.concat([[loss], tf.one_hot(replica, replicas) * nonfinite], 0)


def nonfinite_mask(shared: tf.Tensor, replicas: int) -> tf.Tensor:
    """From the all-reduced `shared_vector`: bit r set when replica r's gradients were non-finite."""
    return tf.reduce_sum(shared[1:] * tf.pow(2.0, tf.range(replicas, dtype=tf.float32)))


def step_row(
    loss: tf.Tensor,
    gradients: GradientStats,
    learning_rate: tf.Tensor,
    nonfinite_replicas: tf.Tensor | float,
    scale: tf.Tensor | None,
    num_layers: int,
) -> tf.Tensor:
    """One row (layout in `row_layout`): loss, half sums of squares, lr; the non-finite flags, the
    norms (`Rows.from_step`) and the weight and update blocks (`WeightNorms`) are completed on
    the host. No conditional: on CPU even a branch not taken costs its ops' dispatch every step
    (a per-layer count of non-finite elements here, in a branch for non-finite norms, cost
    100-190 us a step on a 41-layer MLP: `bench/step_probe.py --deep`)."""
    replicas = tf.cast(nonfinite_replicas, tf.float32)
    # In COL_* order; COL_GRAD_NONFINITE and the norms are completed on the host (`Rows.from_step`).
    scale_column = 1.0 if scale is None else float_scalar(scale)
    fixed = [loss, gradients.total_half_sumsq, learning_rate, 0.0, replicas, scale_column]
    return tf.concat(
        [
            tf.stack(fixed),
            gradients.layer_half_sumsq,
            np.concatenate(
                [
                    np.zeros(num_layers, np.float32),
                    np.full(num_layers, NOT_SAMPLED, np.float32),
                    np.full(num_layers, np.nan, np.float32),
                ]
            ),
        ],
        axis=0,
    )
