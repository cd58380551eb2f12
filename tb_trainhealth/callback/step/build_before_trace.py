"""Create a model's variables before its first traced step, so the probe adds no trace of it.

A `tf.function` that creates variables on its first call is traced a second time, and the step
probe's ops with it. Keras' standard `train_step` creates the optimizer's variables inside the
first step (both Keras 3 and tf_keras), and tf_keras builds a model given no input shape only
there, and both build the compiled loss and metrics there. Each helper does that work first,
exactly as the step would, or leaves it to the step. With all of it done first, a fresh model's
step is traced once, where Keras alone traces it twice.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from tb_trainhealth.callback.frameworks import keras_private

if TYPE_CHECKING:
    import keras

logger = logging.getLogger(__name__)


def build_before_first_step(model: Any, adapter: Any, input_probe: Any, legacy: bool) -> None:
    """What can be built before the first traced step: on tf_keras (`legacy`) the model and its
    compiled loss and metrics, now; on Keras 3 the compiled loss and metrics from the first
    batch, which `input_probe` fetches on the host before its step (no batch: as before). The
    optimizer is built by the step probe, which knows the variables it will be handed."""
    if legacy:
        build_from_input(model, adapter)
        build_tf_keras_compiled_metrics(model, adapter)
    else:
        input_probe.before_first_step = functools.partial(build_compiled_metrics, model)


def build_optimizer(model: keras.Model) -> None:
    """Create the optimizer's variables now, not inside the first traced step.

    A `tf.function` that creates variables on its first call is traced a second time; Keras'
    standard `train_step` builds the optimizer there, so a fresh model's step is traced twice
    (and the probe's ops with it). Built here, with the variables that step will hand it, it
    is traced once. Only for Keras' own `train_step`: a custom one may give this optimizer
    only some of the variables."""
    optimizer = getattr(model, "optimizer", None)
    if (
        optimizer is None
        or getattr(optimizer, "built", True)
        or not keras_private.runs_keras_3_train_step(model)
        or not fully_built(model)
    ):
        return
    try:
        with model.distribute_strategy.scope():
            optimizer.build(model.trainable_variables)
    except Exception:  # Keras builds it in the step as usual
        logger.debug("tb-trainhealth: could not build the optimizer before the first step", exc_info=True)


def build_compiled_metrics(model: keras.Model, batch: Any) -> None:
    """Keras 3: build the compiled loss and metrics from the first batch's shapes and dtypes,
    before the first traced step, with Keras' own `_symbolic_build` (what its `fit` does first
    under a distribution strategy; on one device it leaves that to the first trace, which then
    creates their variables and is traced again). Only for Keras' own `train_step` on one
    device; anything unexpected leaves it to the step, as before."""
    try:  # (runs inside the user's train function: nothing may escape)
        compiled = keras_private.compiled_metrics_and_loss(model)
        unbuilt = any(part is not None and not part.built for part in compiled)
        if (
            not unbuilt
            or not keras_private.runs_keras_3_train_step(model)
            or keras_private.model_strategy(model) is not None
        ):
            return
        if fully_built(model):
            keras_private.symbolic_build(model, batch)
    except Exception:  # Keras builds them in the step as usual
        logger.debug("tb-trainhealth: could not build the compiled metrics before the first step", exc_info=True)


def build_tf_keras_compiled_metrics(model: Any, adapter: Any) -> None:
    """tf_keras: build the compiled loss and metrics before the first traced step, from the
    model's output and the fit's target spec, as the step's first `update_state` would (it
    creates the metrics' variables, and the step is traced again). Only for tf_keras' own
    `train_step`, one device, one output and one target tensor."""
    loss, metrics = getattr(model, "compiled_loss", None), getattr(model, "compiled_metrics", None)
    if loss is None or metrics is None or (loss.built and metrics.built) or adapter is None:
        return
    if not keras_private.runs_tf_keras_train_step(model) or tf.distribute.has_strategy() or not fully_built(model):
        return
    try:
        outputs = model.outputs
        target = _fit_spec(adapter)[1]
        if len(outputs) != 1 or not isinstance(target, tf.TensorSpec):
            return
        if not loss.built:
            loss.build(outputs[0])
        if not metrics.built:
            metrics.build(outputs[0], target)
    except Exception:  # tf_keras builds them in the step as usual
        logger.debug("tb-trainhealth: could not build the compiled metrics before the first step", exc_info=True)


def fully_built(model: keras.Model) -> bool:
    """Every layer has its variables (a subclassed model may build some only in its first step)."""
    if not (model.built and model.trainable_variables):
        return False
    layers = keras_private.flatten_layers(model)
    return layers is not None and all(layer.built for layer in layers)


def build_tf_keras_optimizer(model: Any) -> None:
    """tf_keras' optimizer creates its variables (slots, a schedule's current rate) in the first
    `apply_gradients`, i.e. inside the first traced step, which is then traced twice. Made here,
    as `build_optimizer` does for Keras 3, the step is traced once. Only for tf_keras' own
    `train_step` (a custom one may hand this optimizer only some of the variables)."""
    optimizer = getattr(model, "optimizer", None)
    if (
        optimizer is None
        or keras_private.tf_keras_optimizer_built(optimizer)
        or not keras_private.runs_tf_keras_train_step(model)
        or not fully_built(model)
    ):
        return
    try:
        with model.distribute_strategy.scope():
            optimizer.build(model.trainable_variables)
            keras_private.compute_tf_keras_learning_rate(optimizer)
    except Exception:  # tf_keras builds it in the step as usual
        logger.debug("tb-trainhealth: could not build the optimizer before the first step", exc_info=True)


def build_from_input(model: Any, adapter: Any) -> None:
    """Build a model that has no variables yet (a Sequential without an input shape, a subclassed
    model) from the fit's input spec, as its first step would: one input tensor, or a dict or
    list of them. tf_keras builds it only inside that step, after `on_train_begin`, so the probe
    could not lay out its layers; Keras 3's `fit` builds it first. Inputs of any other kind are
    left to the step (the probe then says it is off, as before)."""
    if model.built or adapter is None:
        return
    try:
        inputs = _fit_spec(adapter)[0]
        flat = tf.nest.flatten(inputs)
        if flat and all(isinstance(one, tf.TensorSpec) for one in flat):
            shapes = tf.nest.map_structure(lambda one: one.shape, inputs)
            with model.distribute_strategy.scope():
                model.build(list(shapes) if isinstance(shapes, tuple) else shapes)
    except Exception:  # tf_keras builds it in the first step as usual
        logger.debug("tb-trainhealth: could not build the model before the first step", exc_info=True)


def _fit_spec(adapter: Any) -> tuple[Any, Any]:
    """(inputs, target or None) of a tf_keras fit's batches, as `tf.TypeSpec`s."""
    spec = adapter.get_dataset().element_spec
    if not isinstance(spec, tuple):
        return spec, None
    return spec[0], spec[1] if len(spec) > 1 else None
