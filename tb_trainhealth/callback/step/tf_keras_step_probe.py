"""The step probe on legacy Keras 2 (`tf_keras`): same rows, tf_keras' optimizer API.

tf_keras' standard `train_step` calls `optimizer.minimize(loss, variables, tape)`, which
computes the gradients and calls `apply_gradients(grads_and_vars)`; under a distribution
strategy (MirroredStrategy, MultiWorkerMirroredStrategy) `apply_gradients` all-reduces them
in `aggregate_gradients`. So the hooks are:

- `minimize(loss, ...)`: sees the batch loss (before any loss scaling);
- `apply_gradients(grads_and_vars)`: sees the gradients applied (a LossScaleOptimizer has
  already unscaled them there: the norms need no unscaling);
- `aggregate_gradients(grads_and_vars)`: sees the all-reduced gradients, the ones applied on
  every replica and every worker. The probe's small vector (loss, which replicas had non-finite
  gradients) rides in the same all-reduce where the strategy all-reduces without a merge call
  (MirroredStrategy, MultiWorkerMirroredStrategy), else in one all-reduce of its own.

Everything else (the row, the ring buffer, the first-NaN replay, reuse between fits) is
`StepProbe`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from tb_trainhealth.callback.frameworks import keras_private, tf_private
from tb_trainhealth.callback.frameworks.which_keras import variable_path
from tb_trainhealth.callback.step.build_before_trace import build_tf_keras_optimizer
from tb_trainhealth.callback.step.gradient_row import GradientStats, replica_id
from tb_trainhealth.callback.step.step_probe import StepProbe

logger = logging.getLogger(__name__)


class TfKerasStepProbe(StepProbe):
    """`StepProbe` with tf_keras' optimizer hooks (see the module docstring)."""

    OPTIMIZER_HOOKS = ("minimize", "apply_gradients")
    ALL_REDUCE_HOOK = keras_private.TF_KERAS_ALL_REDUCE

    def install(self) -> None:
        if self._instrumented is None:
            build_tf_keras_optimizer(self.model)
        super().install()

    def _writes_row(self, replica: int) -> bool:
        """The first replica of each worker: under MultiWorkerMirroredStrategy every worker keeps
        its own rows (its step count; its own record should it crash), the chief writes them."""
        local = len(getattr(self.model.distribute_strategy.extended, "worker_devices", ()) or ()) or self.replicas
        return replica % local == 0

    @property
    def uses_loss_scale(self) -> bool:
        return hasattr(self.optimizer, "inner_optimizer") and hasattr(self.optimizer, "loss_scale")

    def _wrap_optimizer(self) -> None:
        optimizer = self.optimizer
        original_minimize, original_apply_gradients = optimizer.minimize, optimizer.apply_gradients

        def minimize(loss, var_list, tape=None):
            self._loss = None if callable(loss) else loss  # (a callable loss is only evaluated inside)
            return original_minimize(loss, var_list, tape=tape)

        def apply_gradients(grads_and_vars, *args, **kwargs):
            pairs = list(grads_and_vars)
            grads, variables = [g for g, _ in pairs], [v for _, v in pairs]

            def original_apply(grads: list, trainable_variables: list) -> Any:
                return original_apply_gradients(list(zip(grads, trainable_variables)), *args, **kwargs)

            scale = self._loss_scale()
            on_replica = self._apply_replicated if self.replicas > 1 else self._apply_single
            return on_replica(original_apply, grads, variables, variables, scale)

        object.__setattr__(optimizer, "minimize", minimize)
        object.__setattr__(optimizer, "apply_gradients", apply_gradients)

    def _wrap_all_reduce(self) -> None:
        self.ALL_REDUCE_HOOK = keras_private.wrap_tf_keras_all_reduce(self._updater, self._all_reduce_hook)

    def _all_reduce(self, original_all_reduce: Callable[[list], Any], pairs: list) -> list:
        replica = replica_id()
        extra = self._to_share.pop(replica, None)
        has_grads = any(grad is not None for grad, _ in pairs)
        extra_reduced_too = extra is not None and has_grads and tf_private.strategy_supports_no_merge_call()
        reduced = list(original_all_reduce([*pairs, (extra, None)] if extra_reduced_too else pairs))
        shared = None
        if extra_reduced_too:
            reduced, shared = reduced[:-1], reduced[-1][0]
        elif extra is not None:
            shared = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, extra)
        try:
            layers = [self.layout.var_to_layer.get(variable_path(variable)) for _, variable in reduced]
            self._reduced[replica] = (self._stats([grad for grad, _ in reduced], layers, None), shared)
        except Exception:
            self._trace_failed()
        return reduced

    def _gradient_stats(self, grads: list, variables: list, scale: tf.Tensor | None) -> GradientStats:
        """tf_keras hands `apply_gradients` unscaled gradients: `scale` is only recorded."""
        return super()._gradient_stats(grads, variables, None)

    def _loss_scale(self) -> tf.Tensor | None:
        if not self.uses_loss_scale:
            return None
        return tf.cast(self.optimizer.loss_scale, tf.float32)
