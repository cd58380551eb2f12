"""The probe's own state variables (ring buffer, counters, flags), whoever calls us.

Keras 3 calls callbacks outside the distribution strategy's scope, so these are plain
variables that replica 0 writes. tf_keras calls them inside it, where `tf.Variable` makes a
mirrored variable (no `scatter_nd_update`; a write from one replica only would break its
sync). There each replica keeps its own copy (sync on read) and the host reads the first
replica's: the one that writes the rows.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf


def probe_variable(initial: Any, name: str, dtype: tf.DType | None = None) -> tf.Variable:
    """A non-trainable variable, created outside any tf.function (init scope)."""
    with tf.init_scope():
        if not tf.distribute.has_strategy():
            return tf.Variable(initial, dtype=dtype, trainable=False, name=name)
        return tf.Variable(
            initial,
            dtype=dtype,
            trainable=False,
            name=name,
            synchronization=tf.VariableSynchronization.ON_READ,
            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
        )
