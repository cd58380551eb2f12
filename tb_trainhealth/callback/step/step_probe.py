"""Health values computed inside the real training step, from its own gradients.

Keras 3 (TF backend) gives callbacks only `logs`; the gradients exist only inside
`train_step`. We wrap two methods of the model's optimizer instance, which every
standard `train_step` (and most custom ones) call:

- `scale_loss(loss)`: sees the batch loss (before loss scaling);
- `apply(grads, variables)`: sees the gradients actually applied.

Inside the compiled step the wrapper reduces the gradients to one small row (loss,
global norm, lr, per-layer norms; the ops in `gradient_row`, the layout in `row_layout`) and
writes it into a ring buffer of variables (`row_buffer`); per-layer weight and update
norms are sampled between steps (`weight_norms`) and joined to the rows on the host. No extra
forward/backward pass, no summary op inside the (possibly XLA-compiled) step; the
callback reads the buffer every few steps and writes summaries outside it. The
first-NaN replay (`nan_replay`) is called from the same wrappers.

Under a distribution strategy `apply` runs once per replica on that replica's
gradients; Keras all-reduces them inside it (`_all_reduce_sum_gradients`). The
norms are taken from the all-reduced gradients (hooked there, so no extra
all-reduce of gradients), the row is written by replica 0 only, and one small
all-reduce carries the global loss and which replicas had non-finite gradients.

A model keeps its probe and instrumented train function between fits (`StepProbe.attach`):
the same model fitting again with a new HealthCallback is not traced again, as Keras alone
would not trace it again. Anything that makes Keras rebuild its own train function
(`compile`, a new optimizer, other trainable variables) makes a new probe too.

The probe's ops go in by tracing the step anew, and a trace takes the model's trainable variables
as they are now. Keras alone reuses a train function it has traced until `compile`, even after
`trainable` was changed: that function updates the variables marked trainable when it was
traced. Where those differ from today's (`bound_elsewhere`), a new trace would change what this
fit trains (or crash it: an optimizer takes no variable it was not built for), so the callback
leaves the probe out for that fit and records that it did.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import tensorflow as tf

from tb_trainhealth.callback.frameworks import keras_private
from tb_trainhealth.callback.frameworks.which_keras import variable_path
from tb_trainhealth.callback.nan.nan_replay import NanReplay
from tb_trainhealth.callback.step.build_before_trace import build_optimizer
from tb_trainhealth.callback.step.gradient_row import (
    GradientStats,
    float_scalar,
    gradient_stats,
    nonfinite_mask,
    replica_id,
    shared_vector,
    step_row,
)
from tb_trainhealth.callback.step.keras_step_as_traced import StepAsTraced, trainable_flags
from tb_trainhealth.callback.step.row_buffer import RowBuffer
from tb_trainhealth.callback.step.row_layout import LayerLayout, Rows, row_width
from tb_trainhealth.callback.step.weight_norms import WeightNorms
from tb_trainhealth.contract.vocab import STALE_TRAIN_STEP

if TYPE_CHECKING:
    import keras

logger = logging.getLogger(__name__)


Apply = Callable[..., Any]  # the optimizer's own `apply(grads, trainable_variables=None)`
# Where a model keeps the probe of its last fit (set with object.__setattr__: not tracked by Keras).
_ATTACHED = "_trainhealth_step_probe"


def _probe_failed() -> None:
    """Never break the user's step: if tracing the probe fails, lose the probe, not the training."""
    logger.exception("tb-trainhealth: gradient probe disabled (could not trace it)")


class StaleTrainStep(Exception):
    """The fit runs a train step traced before `trainable` changed: the probe stays out (the reason)."""


def bound_elsewhere(model: keras.Model) -> str | None:
    """Why tracing the step anew would change what this fit trains, or None where it would not.

    Keras reuses its train function when it has been traced (by Keras, or as this callback's
    instrumented function in an earlier fit, which stood in for it). That trace updates the
    variables trainable at the time: those the previous probe was traced for, else (Keras' own
    `train_step`) those the optimizer was built for. Different from the trainable variables now,
    a new trace would train others, so the probe stays out."""
    function = model.train_function
    previous = model.__dict__.get(_ATTACHED)
    bound: set[int] | None = None
    if previous is not None and previous._keras_function is function and previous._instrumented is not None:
        if previous._traced() or keras_private.train_function_traced(function):
            bound = set(previous._variables)
    elif keras_private.train_function_traced(function) and keras_private.runs_keras_3_train_step(model):
        known = keras_private.known_variables(model.optimizer)
        bound = None if known is None else {id(v) for v in known}
    if bound is None:
        return None
    now = {id(v) for v in model.trainable_variables}
    if now == bound:
        return None
    added, removed = len(now - bound), len(bound - now)
    return (
        f"{STALE_TRAIN_STEP}: Keras' train step, traced before, updates {len(bound)} variables while "
        f"{len(now)} are marked trainable now ({added} more, {removed} fewer); tracing the probe in "
        "would change what this fit trains"
    )


class StepProbe:
    """Installs the optimizer wrappers and owns the ring buffer they write.

    Rows are counted from the start of the current fit (`begin_fit`); the buffer and its
    count go on across the fits of one model."""

    # The optimizer methods wrapped on the instance, and the updater's all-reduce (Keras 3's
    # names; `tf_keras_step_probe` has tf_keras' own).
    OPTIMIZER_HOOKS = ("scale_loss", "apply")
    ALL_REDUCE_HOOK = keras_private.KERAS_3_ALL_REDUCE

    @classmethod
    def attach(cls, model: keras.Model, capacity: int, localize_nan: bool = True) -> StepProbe:
        """The probe for this fit, installed: the model's previous one when its instrumented
        train function still fits the model (no second trace), else a new one; `StaleTrainStep`
        where a new one would change what the fit trains (`bound_elsewhere`)."""
        previous = model.__dict__.get(_ATTACHED)
        reusable = previous is not None and previous._still_fits(model, capacity, localize_nan)
        if not reusable:
            stale = bound_elsewhere(model)
            if stale is not None:
                raise StaleTrainStep(stale)
        probe = previous if reusable else cls(model, capacity, localize_nan)
        probe.install()
        return probe

    def __init__(self, model: keras.Model, capacity: int, localize_nan: bool = True) -> None:
        self.model = model
        # (fit() calls callbacks outside the strategy's scope: ask the model, not the context.)
        self.replicas = int(getattr(model.distribute_strategy, "num_replicas_in_sync", 1))
        # Per replica, while tracing its step: what goes into the all-reduce, what comes out.
        self._to_share: dict[int, tf.Tensor] = {}
        self._reduced: dict[int, tuple[GradientStats, tf.Tensor | None]] = {}
        self.optimizer = model.optimizer
        self.layout = LayerLayout.of(model)
        # Keras hands the all-reduce its backend (tf) variables: map those to layers too.
        self._layer_of_backend_variable = {
            id(keras_private.backend_variable(v)): self.layout.var_to_layer[variable_path(v)]
            for v in model.trainable_variables
        }
        self.ring = RowBuffer(capacity, row_width(len(self.layout.names)))
        self.weights = WeightNorms(self.layout, model)  # sampled from the host, between steps
        self.loss_captured = False
        self._loss = None
        # The error that left the traced step without its probe (Keras' own update still runs).
        self.trace_error: BaseException | None = None
        # Replaying a batch needs a host callback inside the step: not under XLA or a strategy.
        replayable = localize_nan and not model.jit_compile and self.replicas == 1
        self._nan = NanReplay(model, self.ring.count, enabled=replayable, check_batch=not self.uses_loss_scale)
        self._installed = False
        self._localize_nan = localize_nan
        # What the instrumented function was traced for; Keras' own function, put back between fits.
        self._variables = tuple(id(v) for v in model.trainable_variables)
        self._keras_function: Any = None
        self._instrumented: Any = None

    def _still_fits(self, model: keras.Model, capacity: int, localize_nan: bool) -> bool:
        """Whether this probe's instrumented train function is still the right one for `model`:
        Keras' own function is the one this probe put back (no compile since), same optimizer,
        same buffer, and the same trainable variables unless the instrumented function has been
        traced: then it is what Keras would run, a trace made before `trainable` changed, which
        updates the variables trainable back then (Keras retraces only on `compile`)."""
        return (
            self._instrumented is not None
            and model.train_function is self._keras_function
            and model.optimizer is self.optimizer
            and (self._variables == tuple(id(v) for v in model.trainable_variables) or self._traced())
            and (self.ring.capacity, self._localize_nan) == (capacity, localize_nan)
        )

    def _traced(self) -> bool:
        return self._instrumented is not None and keras_private.train_function_traced(self._instrumented)

    @property
    def nan_origins(self) -> list[dict[str, Any]]:
        """Origins of non-finite values found by the replay, each with its "row"; the reader clears it."""
        return self._nan.origins

    def rearm_nan_replay(self) -> None:
        """A replayed batch's NaN never reached the update (see `NanReplay.rearm`)."""
        self._nan.rearm()

    @property
    def nan_replay_ruled_out(self) -> str | None:
        """Why this fit cannot replay its first NaN (the replay needs a host call inside the
        step), or None where it can or was not asked for."""
        if not self._localize_nan or self._nan.enabled:
            return None
        if self.model.jit_compile:
            return "the step is XLA-compiled (jit_compile=True, the default on GPUs)"
        return f"the step runs under a distribution strategy ({self.replicas} replicas)"

    @property
    def uses_loss_scale(self) -> bool:
        return hasattr(self.optimizer, "inner_optimizer")

    # -- installing ---------------------------------------------------------------
    def install(self) -> None:
        """Wrap the optimizer (and train_step) and put the instrumented train function in
        place: this probe's from an earlier fit, or a new one traced on its first call. The
        wrappers stay for the whole fit: a new input shape retraces with them."""
        self._wrap_optimizer()
        if self.replicas > 1:
            self._wrap_all_reduce()
        if self._nan.enabled:
            self._wrap_train_step()
        self._installed = True
        self._keras_function = self.model.train_function
        if self._instrumented is None:
            if not keras_private.train_function_traced(self._keras_function):
                # Keras would have traced its step in this fit: given back traced as it would have been.
                self._keras_function = StepAsTraced(self.model, trainable_flags(self.model))
            build_optimizer(self.model)
            self.model.make_train_function(force=True)
            self._instrumented = self.model.train_function
        else:
            self.model.train_function = self._instrumented
        self._begin_fit()

    def _begin_fit(self) -> None:
        self._nan.begin_fit(self.ring.begin_fit())

    def uninstall(self, keep: bool = True) -> None:
        """Remove the wrappers and give the model back Keras' own train function (also valid
        mid-fit). `keep`: the model keeps this probe for its next fit (not after a failure)."""
        if not self._installed:
            return
        for name in self.OPTIMIZER_HOOKS:
            self.optimizer.__dict__.pop(name, None)
        self._updater.__dict__.pop(self.ALL_REDUCE_HOOK, None)
        self.model.__dict__.pop("train_step", None)
        self._installed = False
        self.model.train_function = self._keras_function
        if keep:
            object.__setattr__(self.model, _ATTACHED, self)
        else:
            self.model.__dict__.pop(_ATTACHED, None)

    def _wrap_optimizer(self) -> None:
        optimizer = self.optimizer
        original_scale_loss, original_apply = optimizer.scale_loss, optimizer.apply

        def scale_loss(loss):
            self._loss = loss
            return original_scale_loss(loss)

        def apply(grads, trainable_variables=None):
            grads = list(grads)
            scale = self._loss_scale()  # before apply: a LossScaleOptimizer updates it there
            variables = (
                list(trainable_variables)
                if trainable_variables is not None
                else keras_private.optimizer_variables(optimizer)
            )
            on_replica = self._apply_replicated if self.replicas > 1 else self._apply_single
            return on_replica(original_apply, grads, trainable_variables, variables, scale)

        object.__setattr__(optimizer, "scale_loss", scale_loss)
        object.__setattr__(optimizer, "apply", apply)

    def _wrap_all_reduce(self) -> None:
        self.ALL_REDUCE_HOOK = keras_private.wrap_keras_3_all_reduce(self._updater, self._all_reduce_hook)

    def _all_reduce_hook(self, original_all_reduce: Callable[[list], Any]) -> Callable[[Any], list]:
        """What the updater's all-reduce becomes: Keras' own, through `_all_reduce`."""

        def all_reduce(grads_and_vars):
            return self._all_reduce(original_all_reduce, list(grads_and_vars))

        return all_reduce

    def _wrap_train_step(self) -> None:
        original_train_step = self.model.train_step

        def train_step(data):
            self._nan.data = data  # the batch, for the replay on a first NaN (same trace)
            return original_train_step(data)

        object.__setattr__(self.model, "train_step", train_step)

    @property
    def _updater(self) -> keras.optimizers.Optimizer:
        """The optimizer that all-reduces and applies (a LossScaleOptimizer delegates to its inner one)."""
        return getattr(self.optimizer, "inner_optimizer", self.optimizer)

    # -- inside the step ----------------------------------------------------------
    def _apply_single(self, original_apply: Apply, grads: list, trainable_variables, variables: list, scale) -> Any:
        """`apply` without a distribution strategy: the row from the gradients it is handed."""
        try:
            gradients = self._gradient_stats(grads, variables, scale)
            waiting = self._nan.hold(self._loss, grads)
        except Exception:
            self._trace_failed()
            return original_apply(grads, trainable_variables)
        result = original_apply(waiting, trainable_variables)
        try:
            self._record(gradients, scale=scale)
        except Exception:
            self._trace_failed()
        return result

    def _apply_replicated(self, original_apply: Apply, grads: list, trainable_variables, variables: list, scale) -> Any:
        """`apply` on one replica of a distribution strategy (see the module docstring)."""
        replica = replica_id()
        try:
            loss = tf.zeros([]) if self._loss is None else self._loss_scalar()
            self._to_share[replica] = shared_vector(loss, grads, replica, self.replicas)
            recording = self._writes_row(replica)
        except Exception:
            self._trace_failed()
            return original_apply(grads, trainable_variables)
        result = original_apply(grads, trainable_variables)
        reduced, shared = self._reduced.pop(replica, (None, None))
        if not recording or reduced is None:
            return result
        try:
            mask, loss = 0.0, None
            if shared is not None:
                mask = nonfinite_mask(shared, self.replicas)
                loss = shared[0] if self._loss is not None else None
            self._record(reduced, loss, mask, scale)
        except Exception:
            self._trace_failed()
        return result

    def _trace_failed(self) -> None:
        """In an `except` while tracing: the step runs on without the probe; the error is kept for
        the callback, which turns the gradients part off and says so (`trace_error`)."""
        _probe_failed()
        if self.trace_error is None:
            self.trace_error = sys.exc_info()[1]

    def _writes_row(self, replica: int) -> bool:
        """Whether this replica writes the step's row (the all-reduced values are the same on all)."""
        return replica == 0

    def _all_reduce(self, original_all_reduce: Callable[[list], Any], pairs: list) -> list:
        """Keras' all-reduce of one replica's gradients; our small vector (loss, non-finite flags)
        rides in the same call, and the norms are taken from what comes out."""
        replica = replica_id()
        extra = self._to_share.pop(replica, None)
        extra_reduced_too = extra is not None and any(grad is not None for grad, _ in pairs)
        reduced = original_all_reduce([*pairs, (extra, None)] if extra_reduced_too else pairs)
        shared = None
        if extra_reduced_too:
            reduced, shared = list(reduced[:-1]), reduced[-1][0]
        try:  # the gradients actually applied: norms of these
            layers = [self._layer_of_backend_variable.get(id(variable)) for _, variable in reduced]
            self._reduced[replica] = (self._stats([grad for grad, _ in reduced], layers, None), shared)
        except Exception:
            self._trace_failed()
        return reduced

    def _gradient_stats(self, grads: list, variables: list, scale: tf.Tensor | None) -> GradientStats:
        """Per-layer half sums of squares of the gradients (unscaled), before the update is applied."""
        return self._stats(grads, [self.layout.var_to_layer.get(variable_path(v)) for v in variables], scale)

    def _stats(self, grads: list, layers: list[int | None], scale: tf.Tensor | None) -> GradientStats:
        """`scale`: the loss scale the gradients carry (None: unscaled)."""
        return gradient_stats(grads, layers, len(self.layout.names), scale)

    def _record(
        self,
        gradients: GradientStats,
        loss: tf.Tensor | None = None,
        nonfinite_replicas: tf.Tensor | float = 0.0,
        scale: tf.Tensor | None = None,
    ) -> None:
        """One row into the ring buffer (`gradient_row.step_row`). `nonfinite_replicas`: bit r set
        when replica r's own gradients were non-finite."""
        if loss is None and self._loss is not None:
            loss = self._loss_scalar()
        self.loss_captured = self.loss_captured or loss is not None
        loss = tf.constant(np.nan, tf.float32) if loss is None else loss
        learning_rate = tf.cast(self.optimizer.learning_rate, tf.float32)
        self.ring.write(step_row(loss, gradients, learning_rate, nonfinite_replicas, scale, len(self.layout.names)))

    def _loss_scalar(self) -> tf.Tensor:
        """The batch loss seen by `scale_loss`, as a float32 scalar."""
        return float_scalar(self._loss)

    def read_rows(self, base_step: int) -> Rows | None:
        """The rows written since the last read (see `RowBuffer.read_new`), with their norms."""
        read = self.ring.read_new(base_step, len(self.layout.names))
        return None if read is None else Rows.from_step(read.steps, read.values, read.num_layers)

    def _loss_scale(self) -> tf.Tensor | None:
        """LossScaleOptimizer hands `apply` scaled gradients: report unscaled norms (None: no scaling)."""
        if not self.uses_loss_scale:
            return None
        if getattr(self.optimizer, "built", False):
            return tf.cast(self.optimizer.dynamic_scale, tf.float32)
        return tf.constant(float(self.optimizer.initial_scale))
