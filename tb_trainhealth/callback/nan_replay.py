"""Fires the first-NaN replay from inside the training step, at most once per cause.

The step probe owns one NanReplay and calls it from its optimizer hooks: `hold` before the
update (a non-finite loss replays the batch while the weights are still the ones that
produced it), `check_batch_once` after it (non-finite gradients under a finite loss). The
replay itself, on the host, is `nan_origin`; this module is only the in-graph trigger, the
flags that keep it from firing twice, and the origins it found.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from tb_trainhealth.callback.nan_origin import batch_origin, finite_scalar, is_plain_batch, localize
from tb_trainhealth.callback.probe_variable import probe_variable

if TYPE_CHECKING:
    import keras

logger = logging.getLogger(__name__)

Finder = Callable[[Any, Any], "dict[str, Any] | None"]  # (model, batch) -> origin, or None


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
    distribution strategy: the owner decides). `check_batch`: whether non-finite gradients
    under a finite loss check the batch (not under loss scaling, where they are routine).
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

    def begin_fit(self, first_row: int) -> None:
        """A new fit of the same traced step: each cause may replay once again."""
        self.localized.assign(False)
        self.batch_checked.assign(False)
        self.origins.clear()
        self._first_row = first_row

    def hold(self, loss: tf.Tensor | None, grads: list) -> list:
        """The gradients, made to wait for the replay on the first non-finite loss.

        The update waits through its gradients, one Identity each: each variable's update still
        starts as soon as its own gradient exists (on a 41-layer MLP on 2 CPU cores, a
        control_dependencies block around the whole update, or one IdentityN over all gradients,
        cost 100-250 us a step more). The loss alone decides, and it is known before backprop
        starts, so the update never waits for a reduction over all gradients (that wait
        cost ~2% of a small CNN's step: `bench/step_probe.py`). Gradients that go non-finite
        under a finite loss are left to `check_batch_once` and the row's per-layer norms."""
        return _after(self._trigger(loss), grads)

    def _trigger(self, loss: tf.Tensor | None) -> list[tf.Tensor]:
        if loss is None:
            return []
        fine = tf.logical_or(finite_scalar(loss), self.localized)
        return self._replay_unless(fine, localize, self.localized)

    def check_batch_once(self, loss: tf.Tensor | None, gradients_sumsq: tf.Tensor) -> list[tf.Tensor]:
        """Non-finite gradients under a finite loss (a fused ReLU can turn a NaN input into 0 on
        the way forward): look for NaN/Inf in the batch, once. Traced after the update, which it
        never holds (the batch does not change with the weights); the caller makes the step's
        row wait for the returned ops, so the origin is there when the row is read."""
        if not self.enabled or loss is None or not self._check_batch:
            return []
        the_loss_replays = tf.logical_not(finite_scalar(loss))
        gradients_finite = tf.math.is_finite(gradients_sumsq)  # (a sum of squares: finite iff every element is)
        fine = tf.reduce_any(tf.stack([gradients_finite, the_loss_replays, self.localized, self.batch_checked]))
        return self._replay_unless(fine, batch_origin, self.batch_checked)

    def _replay_unless(self, fine: tf.Tensor, find: Finder, flag: tf.Variable) -> list[tf.Tensor]:
        """Unless `fine`, call `find(model, batch)` on the host and record its origin; set `flag`."""
        flat = tf.nest.flatten(self.data) if self.enabled else []
        if not is_plain_batch(flat):
            return []
        on_host = functools.partial(self._replay, find, self.data)

        def replay() -> tf.Tensor:
            found = tf.py_function(on_host, [self._row_count, *flat], Tout=tf.bool)
            marks = [flag.assign(True)]
            if flag is not self.localized:  # (only reached while nothing is localized yet)
                marks.append(self.localized.assign(found))
            with tf.control_dependencies(marks):
                return tf.constant(True)

        return [tf.cond(fine, lambda: tf.constant(True), replay)]

    def _replay(self, find: Finder, structure: Any, count: tf.Tensor, *flat: tf.Tensor) -> bool:
        """Whether an origin was found (and recorded)."""
        try:
            origin = find(self.model, tf.nest.pack_sequence_as(structure, list(flat)))
        except Exception:  # a failed replay must not fail the step
            logger.warning("tb-trainhealth: could not replay the first NaN batch", exc_info=True)
            return False
        if origin is None:
            return False
        self.origins.append({"row": int(count) - self._first_row, **origin})
        return True
