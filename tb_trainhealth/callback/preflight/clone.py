"""The model a preflight trains: a clone with the user's weights and a fresh copy of the user's
optimizer, compiled with the user's loss. The user's model, weights and optimizer state are
never touched (only read: `get_weights`, `get_config`)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import keras

from tb_trainhealth.callback.frameworks.keras_private import lambda_output_shape, trusted_configs

# A layer's config, changed (the second argument: whether it is the model's last layer).
LayerChange = Callable[[dict[str, Any], bool], dict[str, Any]]


class CloneError(RuntimeError):
    """The model or its optimizer cannot be copied (e.g. a subclassed model without get_config)."""


def fresh_optimizer(optimizer: keras.optimizers.Optimizer) -> keras.optimizers.Optimizer:
    """A new optimizer with the same settings (learning rate, schedule, clipping) and no state."""
    try:
        return optimizer.__class__.from_config(optimizer.get_config())
    except Exception as err:
        raise CloneError(f"the optimizer {type(optimizer).__name__} could not be copied: {err}") from err


def clone_compiled(model: keras.Model) -> keras.Model:
    """A compiled clone of `model` holding the same weights (no metrics: only the loss is needed)."""
    if getattr(model, "optimizer", None) is None or getattr(model, "loss", None) is None:
        raise CloneError("the model is not compiled with a loss: call model.compile(optimizer=..., loss=...) first")
    try:
        clone = uncompiled_clone(model)
        clone.set_weights(model.get_weights())
    except Exception as err:
        raise CloneError(f"the model could not be cloned ({type(err).__name__}: {err})") from err
    config: dict[str, Any] = {}
    try:
        with warnings.catch_warnings():  # Keras warns of a lambda loss each time it serialises one
            warnings.simplefilter("ignore", UserWarning)
            config = model.get_compile_config() or {}
    except Exception:  # (a compile config that does not serialize: loss weights are then left out)
        config = {}
    clone.compile(
        optimizer=fresh_optimizer(model.optimizer),
        loss=model.loss,
        loss_weights=config.get("loss_weights"),
        jit_compile=False,  # a few hundred steps on one batch: XLA's compile time would dominate
    )
    return clone


def uncompiled_clone(model: keras.Model, change: LayerChange | None = None) -> keras.Model:
    """A clone with new weights, each layer from its config (`change`d where given), not compiled.

    Keras' `clone_model` recompiles a compiled model from its compile config, which fails for a
    loss that is a plain Python function ("Could not locate function 'loss'"); the callers compile
    the clone themselves with the loss object, so the model is cloned as if uncompiled."""
    compiled = getattr(model, "compiled", None)
    if compiled is True:
        model.compiled = False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with trusted_configs():  # the user's own model, in this process: not a file to distrust
                last = model.layers[-1] if model.layers else None
                return keras.models.clone_model(
                    model, clone_function=lambda layer: _clone_layer(layer, change, layer is last), recursive=True
                )
    finally:
        if compiled is True:
            model.compiled = True


def _clone_layer(
    layer: keras.layers.Layer, change: LayerChange | None = None, is_last: bool = False
) -> keras.layers.Layer:
    """A new layer with the same config (`change`d); a Lambda keeps its function object (a Python
    lambda or `tf.stop_gradient` does not survive a round trip through its config)."""
    if isinstance(layer, keras.layers.Lambda):
        config = layer.get_config()
        return keras.layers.Lambda(
            layer.function,
            output_shape=lambda_output_shape(layer),
            mask=getattr(layer, "mask", None),
            arguments=config.get("arguments"),
            name=layer.name,
        )
    config = layer.get_config()
    return layer.__class__.from_config(change(config, is_last) if change is not None else config)
