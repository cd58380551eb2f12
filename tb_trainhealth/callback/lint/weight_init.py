"""Kernel statistics of every Dense/Conv layer at train start (`weight_init` events).

Once per fit, before the first step: a mean and a standard deviation per kernel, each
reduced where the kernel lives (two scalars come back per layer), so it costs
milliseconds even on large models. The rules compare them with what He/Glorot give for
the layer's fan-in (rules/initialization.py).
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tb_trainhealth.callback.frameworks.keras_private import flatten_layers
from tb_trainhealth.contract.events import LayerWeights, WeightInitEvent

_NORMALIZING = ("BatchNormalization", "LayerNormalization", "GroupNormalization", "UnitNormalization")


def _layers(model: Any) -> list[Any]:
    """Every layer, those of nested models included (the models themselves left out)."""
    nested = flatten_layers(model, include_self=False)
    if nested is not None:
        return [layer for layer in nested if not isinstance(layer, keras.Model)]
    return list(getattr(model, "layers", []))


def weight_init(model: Any) -> WeightInitEvent | None:
    """The event for this model (step 0: the caller sets the fit's step); None without kernels."""
    layers: dict[str, LayerWeights] = {}
    normalized = False
    for layer in _layers(model):
        normalized = normalized or type(layer).__name__ in _NORMALIZING
        kernel = getattr(layer, "kernel", None)
        shape = getattr(kernel, "shape", None)
        if kernel is None or shape is None or len(shape) < 2 or layer.name in layers:
            continue
        if not getattr(kernel, "trainable", True) or not getattr(layer, "trainable", True):
            continue  # a fixed filter (a blur, an averaging kernel) is meant to be what it is
        dims = [int(d) for d in shape]
        value = tf.convert_to_tensor(kernel)
        if not value.dtype.is_floating:
            continue
        value = tf.cast(value, tf.float32)
        function = getattr(layer, "activation", None)
        layers[layer.name] = LayerWeights(
            activation=getattr(function, "__name__", "linear") if function is not None else "linear",
            fan_in=int(np.prod(dims[:-1])),
            units=dims[-1],
            std=float(tf.math.reduce_std(value)),
            mean=float(tf.reduce_mean(value)),
        )
    return WeightInitEvent(0, layers=layers, normalized=normalized) if layers else None
