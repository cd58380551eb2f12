"""Create a model's variables before its first traced step, so the probe adds no trace of it.

A `tf.function` that creates variables on its first call is traced a second time, and the step
probe's ops with it. Keras' standard `train_step` creates the optimizer's variables inside the
first step (both Keras 3 and tf_keras), and tf_keras builds a model given no input shape only
there. Each helper does that work first, exactly as the step would, or leaves it to the step.
(Compiled metrics still create theirs in the first step: then Keras traces it twice, with or
without the callback.)
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import tensorflow as tf

if TYPE_CHECKING:
    import keras

logger = logging.getLogger(__name__)


def build_optimizer(model: keras.Model) -> None:
    """Create the optimizer's variables now, not inside the first traced step.

    A `tf.function` that creates variables on its first call is traced a second time; Keras'
    standard `train_step` builds the optimizer there, so a fresh model's step is traced twice
    (and the probe's ops with it). Built here, with the variables that step will hand it, it
    is traced once. Only for Keras' own `train_step`: a custom one may give this optimizer
    only some of the variables."""
    optimizer = getattr(model, "optimizer", None)
    standard = getattr(type(model).train_step, "__qualname__", "") == "TensorFlowTrainer.train_step"
    if optimizer is None or getattr(optimizer, "built", True) or not standard or not fully_built(model):
        return
    try:
        with model.distribute_strategy.scope():
            optimizer.build(model.trainable_variables)
    except Exception:  # Keras builds it in the step as usual
        logger.debug("tb-trainhealth: could not build the optimizer before the first step", exc_info=True)


def fully_built(model: keras.Model) -> bool:
    """Every layer has its variables (a subclassed model may build some only in its first step)."""
    layers = getattr(model, "_flatten_layers", None)
    return bool(model.built and model.trainable_variables and layers) and all(layer.built for layer in layers())


def build_tf_keras_optimizer(model: Any) -> None:
    """tf_keras' optimizer creates its variables (slots, a schedule's current rate) in the first
    `apply_gradients`, i.e. inside the first traced step, which is then traced twice. Made here,
    as `build_optimizer` does for Keras 3, the step is traced once. Only for tf_keras' own
    `train_step` (a custom one may hand this optimizer only some of the variables)."""
    optimizer = getattr(model, "optimizer", None)
    train_step = type(model).train_step
    standard = train_step.__qualname__ == "Model.train_step" and train_step.__module__.startswith("tf_keras")
    if optimizer is None or getattr(optimizer, "_built", False) or not standard or not fully_built(model):
        return
    try:
        with model.distribute_strategy.scope():
            optimizer.build(model.trainable_variables)
            current_rate = getattr(optimizer, "_compute_current_learning_rate", None)
            if current_rate is not None:
                current_rate()
    except Exception:  # tf_keras builds it in the step as usual
        logger.debug("tb-trainhealth: could not build the optimizer before the first step", exc_info=True)


def build_from_input(model: Any, adapter: Any) -> None:
    """Build a model that has no variables yet (a Sequential without an input shape) from the
    fit's input spec, as its first step would. tf_keras builds it only inside that step, after
    `on_train_begin`, so the probe could not lay out its layers; Keras 3's `fit` builds it first.
    Only for one input tensor; otherwise the probe says it is off, as before."""
    if model.built or adapter is None:
        return
    try:
        spec = adapter.get_dataset().element_spec
        inputs = spec[0] if isinstance(spec, tuple) else spec
        if isinstance(inputs, tf.TensorSpec):
            with model.distribute_strategy.scope():
                model.build(inputs.shape)
    except Exception:  # tf_keras builds it in the first step as usual
        logger.debug("tb-trainhealth: could not build the model before the first step", exc_info=True)
