"""Model lint at train start: what the last layer outputs vs what the loss expects.

Runs once in `on_train_begin` (no data needed) and returns plain events; the rule
`output_loss_mismatch` on the read side turns them into findings.
"""

from __future__ import annotations

from typing import Any

import keras

PROBABILISTIC_LOSSES = {
    "sparse_categorical_crossentropy": "SparseCategoricalCrossentropy",
    "categorical_crossentropy": "CategoricalCrossentropy",
    "binary_crossentropy": "BinaryCrossentropy",
}
REGRESSION_LOSSES = {
    "mean_squared_error": "MeanSquaredError",
    "mean_absolute_error": "MeanAbsoluteError",
    "huber": "Huber",
    "mean_squared_logarithmic_error": "MeanSquaredLogarithmicError",
    "log_cosh": "LogCosh",
    "mean_absolute_percentage_error": "MeanAbsolutePercentageError",
}
_ALIASES = {"mse": "mean_squared_error", "mae": "mean_absolute_error", "msle": "mean_squared_logarithmic_error",
            "mape": "mean_absolute_percentage_error", "logcosh": "log_cosh", "huber_loss": "huber"}  # fmt: skip
_LOSS_CLASSES = {v: k for k, v in {**PROBABILISTIC_LOSSES, **REGRESSION_LOSSES}.items()}


def loss_of(model: keras.Model) -> tuple[str | None, bool | None]:
    """(canonical loss name, from_logits) for a single built-in cross-entropy or regression
    loss (from_logits is None for regression losses), else (None, None)."""
    loss = getattr(model, "loss", None)
    if isinstance(loss, str):
        name = _ALIASES.get(loss.lower(), loss.lower())
        if name in PROBABILISTIC_LOSSES:
            return name, False
        return (name, None) if name in REGRESSION_LOSSES else (None, None)
    if isinstance(loss, keras.losses.Loss):
        name = _LOSS_CLASSES.get(type(loss).__name__)
        if name is None or name in REGRESSION_LOSSES:
            return name, None
        return name, bool(loss.get_config().get("from_logits", False))
    return None, None


def output_activation(model: keras.Model) -> tuple[str | None, str | None, int | None]:
    """(activation name, layer name, units) of the model's last layer, when it is knowable."""
    layers = [layer for layer in getattr(model, "layers", []) if not isinstance(layer, keras.layers.InputLayer)]
    if not layers:
        return None, None, None
    last = layers[-1]
    units = getattr(last, "units", None)
    if isinstance(last, keras.layers.Softmax):
        activation = "softmax"
    elif isinstance(last, keras.layers.Activation) or hasattr(last, "activation"):
        function = getattr(last, "activation", None)
        activation = getattr(function, "__name__", None) if function is not None else "linear"
    else:
        return None, last.name, units
    if units is None:
        shape = getattr(last, "output", None)
        shape = getattr(shape, "shape", None)
        units = int(shape[-1]) if shape is not None and shape[-1] is not None else None
    return activation, last.name, units


# Srivastava et al. (2014, JMLR) drop 50% of hidden units at most (20% of inputs); beyond
# half, each step trains a much thinner network and fitting slows down.
MAX_DROPOUT_RATE = 0.5


def lint_layers(model: keras.Model) -> list[dict[str, Any]]:
    """Well-known layer settings that slow or spoil training (reported as info)."""
    layers = [layer for layer in getattr(model, "layers", []) if not isinstance(layer, keras.layers.InputLayer)]
    events = []
    for index, layer in enumerate(layers):
        rate = getattr(layer, "rate", None)
        if not isinstance(layer, keras.layers.Dropout) or not isinstance(rate, (int, float)):
            continue
        base = {"kind": "lint", "step": 0, "layer": layer.name, "rate": float(rate)}
        if index == len(layers) - 1:
            events.append({**base, "check": "dropout_after_output"})
        elif rate > MAX_DROPOUT_RATE:
            events.append({**base, "check": "high_dropout"})
    return events


def lint_model(model: keras.Model) -> list[dict[str, Any]]:
    loss, from_logits = loss_of(model)
    activation, layer, units = output_activation(model)
    if loss not in PROBABILISTIC_LOSSES or activation is None:
        return []
    base = {
        "kind": "lint",
        "step": 0,
        "layer": layer,
        "activation": activation,
        "loss": loss,
        "from_logits": from_logits,
        "units": units,
    }
    problems = []
    if activation in ("softmax", "sigmoid") and from_logits:
        problems.append("probabilities_as_logits")
    if activation == "linear" and not from_logits:
        problems.append("logits_as_probabilities")
    if activation == "softmax" and units == 1:
        problems.append("softmax_single_unit")
    if activation == "sigmoid" and loss == "categorical_crossentropy" and (units or 0) > 1:
        problems.append("sigmoid_with_categorical")
    if activation == "relu":
        problems.append("relu_with_cross_entropy")
    return [{**base, "check": problem} for problem in problems]
