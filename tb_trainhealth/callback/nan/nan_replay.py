"""Fires the first-NaN replay from inside the training step, at most once per cause.

The step probe owns one NanReplay and calls `hold` from its optimizer hook, before the update:
one conditional per step fires the replay on the first non-finite loss (replaying the batch
while the weights are still the ones that produced it) or on the first batch holding NaN/Inf
(a fused ReLU can turn a NaN input into 0 on the way forward and leave the loss finite). The
replay itself, on the host, is `nan_origin`; this module is only the in-graph trigger, the
flags that keep it from firing twice, and the origins it found.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from tb_trainhealth.callback.nan.nan_origin import batch_origin, finite_scalar, is_plain_batch, localize
from tb_trainhealth.callback.probe_variable import probe_variable

if TYPE_CHECKING:
    import keras

logger = logging.getLogger(__name__)


# Batches with NaN/Inf that the model masks re-arm the replay at most this often a fit.
MAX_REARMS = 3


def _batch_finite(flat: list[tf.Tensor]) -> tf.Tensor | None:
    """Whether the batch's float tensors hold only finite values (a sum is finite iff every
    element is, bar overflow); None without float tensors. float32/float64 are summed as they
    are (no copy of the batch), other floats (float16 overflows at 65504) in float32."""
    sums = [
        tf.cast(tf.reduce_sum(t if t.dtype in (tf.float32, tf.float64) else tf.cast(t, tf.float32)), tf.float32)
        for t in flat
        if t.dtype.is_floating
    ]
    if not sums:
        return None
    return tf.math.is_finite(tf.add_n(sums) if len(sums) > 1 else sums[0])


def _after(tokens: list[tf.Tensor], grads: list) -> list:
    """The tensors, made to wait for `tokens` (identity ops: no copies)."""
    if not tokens:
        return grads

    def wait(grad):
        if grad is None:
            return None
        with tf.control_dependencies(tokens):
            if isinstance(grad, tf.IndexedSlices):
                return tf.IndexedSlices(tf.identity(grad.values), grad.indices, grad.dense_shape)
            return tf.identity(grad)

    return [wait(grad) for grad in grads]


class NanReplay:
    """The in-step trigger of the first-NaN replay, and the origins it found.

    `enabled`: the replay needs a host callback inside the step (not under XLA or a
    distribution strategy: the owner decides). `check_batch`: whether a batch holding NaN/Inf
    replays under a finite loss too (not under loss scaling: there gradients overflow
    routinely, so a NaN the model masks could not be told from one that reached the update).
    `row_count`: the variable counting the rows written; an origin is tagged with the row
    its step is about to write."""

    def __init__(self, model: keras.Model, row_count: tf.Variable, enabled: bool, check_batch: bool) -> None:
        self.model = model
        self.enabled = enabled
        self._check_batch = check_batch
        self._row_count = row_count
        self.data: Any = None  # the step's batch, set by the owner's train_step wrapper (same trace)
        self.origins: list[dict[str, Any]] = []  # each with the "row" (of this fit) it was found at
        self._first_row = 0  # the row count when this fit began
        self.localized = probe_variable(False, "trainhealth_nan_localized")
        self.batch_checked = probe_variable(False, "trainhealth_batch_checked")
        self._rearms = 0

    def begin_fit(self, first_row: int) -> None:
        """A new fit of the same traced step: each cause may replay once again."""
        self.localized.assign(False)
        self.batch_checked.assign(False)
        self.origins.clear()
        self._first_row = first_row
        self._rearms = 0

    def rearm(self) -> None:
        """The replayed batch held NaN/Inf that the model masks (its step trained on finite
        values): fire again for a NaN that matters, at most MAX_REARMS times a fit (each
        costs one replay, where every batch holds masked NaN)."""
        if self._rearms < MAX_REARMS:
            self._rearms += 1
            self.localized.assign(False)
            self.batch_checked.assign(False)

    def hold(self, loss: tf.Tensor | None, grads: list) -> list:
        """The gradients, made to wait for the replay on the first non-finite loss or batch.

        One conditional a step, before the update: its predicate needs only the loss (known
        before backprop starts) and a sum over the batch's floats (known before the forward
        pass), so the update never waits for a reduction over all gradients (that wait cost
        ~2% of a small CNN's step: `bench/step_probe.py`). A second conditional after the
        update, for non-finite gradients under a finite loss, is what this replaced: on the
        tf_keras small CNN, variants of `bench/step_probe.py` (50-60 shuffled rounds) put two
        conditionals at +103 to +136 us a step, one at +46 to +92 (single model instances
        differ by ~1.5%, ~60 us, so read these as a direction). The update waits through its
        gradients, one Identity each: each variable's update still starts as soon as its own
        gradient exists (on a 41-layer MLP on 2 CPU cores, a control_dependencies block around
        the whole update, or one IdentityN over all gradients, cost 100-250 us a step more)."""
        return _after(self._trigger(loss), grads)

    def _trigger(self, loss: tf.Tensor | None) -> list[tf.Tensor]:
        flat = tf.nest.flatten(self.data) if self.enabled and loss is not None else []
        if not is_plain_batch(flat):
            return []
        loss_fine = finite_scalar(loss)
        loss_done = tf.logical_or(loss_fine, self.localized)  # finite, or its NaN already replayed
        batch_fine = _batch_finite(flat) if self._check_batch else None
        fine = loss_done
        if batch_fine is not None:
            fine = tf.logical_and(loss_done, tf.logical_or(batch_fine, self.batch_checked))
        on_host = functools.partial(self._replay, self.data)

        def replay() -> tf.Tensor:
            found = tf.py_function(on_host, [self._row_count, loss_done, *flat], Tout=tf.bool)
            # A NaN found in the batch is the origin too: no second replay when the loss follows.
            localized = tf.logical_or(tf.logical_not(loss_fine), found)
            marks = [self.localized.assign(tf.logical_or(self.localized, localized))]
            if batch_fine is not None:
                marks.append(self.batch_checked.assign(tf.logical_or(self.batch_checked, tf.logical_not(batch_fine))))
            with tf.control_dependencies([found, *marks]):
                return tf.constant(True)

        return [tf.cond(fine, lambda: tf.constant(True), replay)]

    def _replay(self, structure: Any, count: tf.Tensor, loss_done: tf.Tensor, *flat: tf.Tensor) -> bool:
        """Whether an origin was found (and recorded): where the loss went non-finite, or else
        where the batch holds NaN/Inf. A batch origin on a step whose loss and gradients stayed
        finite (NaN masked on the way in) is dropped on the host, which re-arms the replay
        (`RowRecorder`)."""
        find = batch_origin if bool(loss_done) else localize
        try:
            origin = find(self.model, tf.nest.pack_sequence_as(structure, list(flat)))
        except Exception:  # a failed replay must not fail the step
            logger.warning("tb-trainhealth: could not replay the first NaN batch", exc_info=True)
            return False
        if origin is None:
            return False
        self.origins.append({"row": int(count) - self._first_row, **origin})
        return True
