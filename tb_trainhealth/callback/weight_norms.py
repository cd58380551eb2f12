"""Per-layer weight norms and update norms, measured inside the step on sampled steps only.

||w|| changes slowly: taken on the first step of a fit and every WEIGHT_NORM_EVERY-th step (one
reduction per variable: 3.5% of a 1 ms step on every step). ||w_after - w_before|| needs a copy of
the weights before the update: taken every UPDATE_EVERY-th step, and only where the copy is
affordable and expressible (not under XLA, not for huge models). With the gradient norms they
give the update ratio.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import tensorflow as tf

from tb_trainhealth.callback.keras_flavor import tensor_of, variable_path
from tb_trainhealth.callback.row_buffer import RowBuffer
from tb_trainhealth.callback.row_layout import NOT_SAMPLED, UPDATE_EVERY, WEIGHT_NORM_EVERY, LayerLayout

if TYPE_CHECKING:
    import keras

# The update norm's copy of the weights is taken only for models up to this many parameters
# (a 200 MB float32 copy): beyond, the copy could tip a model that fits memory into OOM, so
# the update ratio is not measured.
MAX_SNAPSHOT_PARAMS = 50_000_000


def layer_sumsq(num_layers: int, terms: list[tuple[int, tf.Tensor]]) -> tf.Tensor:
    """Per-layer sum of squares of (layer index, tensor) pairs, as one vector.

    tf.nn.l2_loss is one fused op (sum of squares / 2): on CPU the cost of the probe is
    mostly per-op dispatch, so fewer ops per variable is what matters."""
    per_layer: list[list[tf.Tensor]] = [[] for _ in range(num_layers)]
    for index, term in terms:
        per_layer[index].append(tf.nn.l2_loss(term))
    return 2.0 * tf.stack([tf.add_n(t) if t else tf.zeros([]) for t in per_layer])


class WeightNorms:
    """The row's last two blocks (weight norm, update norm per layer) for one probe."""

    def __init__(self, layout: LayerLayout, ring: RowBuffer, model: keras.Model):
        self.layout = layout
        self._ring = ring
        self._snapshots = not model.jit_compile and sum(layout.num_params) <= MAX_SNAPSHOT_PARAMS

    def tracked(self, variables: list) -> list[tuple[int, Any]]:
        layers = self.layout.var_to_layer
        return [(layers[path], v) for v in variables if (path := variable_path(v)) in layers]

    def before(self, variables: list) -> list[tf.Tensor]:
        """A copy of the weights on sampled steps (reads are ordered before the update: same resource).
        Not under XLA: its conditionals need equal shapes in both branches, i.e. a full-size copy
        (or zeros) on every step."""
        tracked = self.tracked(variables)
        if not tracked or not self._snapshots:
            return []
        return tf.cond(
            self._ring.due(UPDATE_EVERY),
            lambda: [tf.identity(tf.cast(tensor_of(v), tf.float32)) for _, v in tracked],
            lambda: [tf.zeros([0]) for _ in tracked],
        )

    def after(self, variables: list, before: list[tf.Tensor]) -> tf.Tensor:
        """Per-layer ||w|| and ||w - w_before|| after the update, as the row's last two blocks:
        on sampled steps only (NOT_SAMPLED and NaN on the others)."""
        num_layers = len(self.layout.names)
        tracked = self.tracked(variables)

        def layer_norms(terms: list[tuple[int, tf.Tensor]]) -> tf.Tensor:
            return tf.sqrt(layer_sumsq(num_layers, terms))

        def not_measured() -> tf.Tensor:
            return tf.fill([num_layers], np.float32(np.nan))

        def measure() -> tf.Tensor:
            after = [(index, tf.cast(tensor_of(variable), tf.float32)) for index, variable in tracked]
            if not before:  # no copies taken (XLA, a huge model)
                return tf.concat([layer_norms(after), not_measured()], 0)

            def moved() -> tf.Tensor:  # (the copies are empty on the steps in between)
                return layer_norms([(index, value - old) for (index, value), old in zip(after, before)])

            return tf.concat([layer_norms(after), tf.cond(self._ring.due(UPDATE_EVERY), moved, not_measured)], 0)

        if not tracked:
            return tf.concat([tf.zeros([num_layers]), not_measured()], 0)
        skipped = tf.concat([tf.fill([num_layers], np.float32(NOT_SAMPLED)), not_measured()], 0)
        first_of_fit = self._ring.first_of_fit()  # so that even a short fit has its norms
        return tf.cond(tf.logical_or(first_of_fit, self._ring.due(WEIGHT_NORM_EVERY)), measure, lambda: skipped)
