"""Model lint at train start: what the last layer outputs vs what the loss expects.

Runs once in `on_train_begin` (no data needed) and returns plain events; the rule
`output_loss_mismatch` on the read side turns them into findings.
"""

from __future__ import annotations

import keras

from tb_trainhealth.callback.frameworks.which_keras import keras_of
from tb_trainhealth.contract.events import LintEvent
from tb_trainhealth.contract.vocab import PROBABILISTIC_LOSSES, LintCheck, LossKind


def loss_of(model: keras.Model) -> tuple[LossKind | None, bool | None]:
    """(loss kind, from_logits) for a single built-in cross-entropy or regression loss
    (from_logits is None for regression losses), else (None, None)."""
    loss = getattr(model, "loss", None)
    if isinstance(loss, str):
        kind = LossKind.named(loss)
        return (kind, False if kind.is_probabilistic else None) if kind is not None else (None, None)
    if isinstance(loss, keras_of(model).losses.Loss):
        kind = LossKind.of_class(type(loss).__name__)
        if kind is None or not kind.is_probabilistic:
            return kind, None
        return kind, bool(loss.get_config().get("from_logits", False))
    return None, None


def _layers(model: keras.Model) -> list[keras.layers.Layer]:
    """The model's layers but its input layers (of the Keras the model belongs to)."""
    input_layer = keras_of(model).layers.InputLayer
    return [layer for layer in getattr(model, "layers", []) if not isinstance(layer, input_layer)]


def output_activation(model: keras.Model) -> tuple[str | None, str | None, int | None]:
    """(activation name, layer name, units) of the model's last layer, when it is knowable."""
    layers = _layers(model)
    if not layers:
        return None, None, None
    last = layers[-1]
    units = getattr(last, "units", None)
    if isinstance(last, keras_of(model).layers.Softmax):
        activation = "softmax"
    elif isinstance(last, keras_of(model).layers.Activation) or hasattr(last, "activation"):
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


def lint_layers(model: keras.Model) -> list[LintEvent]:
    """Well-known layer settings that slow or spoil training (reported as info)."""
    layers = _layers(model)
    dropout = keras_of(model).layers.Dropout
    events = []
    for index, layer in enumerate(layers):
        rate = getattr(layer, "rate", None)
        if not isinstance(layer, dropout) or not isinstance(rate, (int, float)):
            continue
        if index == len(layers) - 1:
            events.append(LintEvent(0, LintCheck.DROPOUT_AFTER_OUTPUT, layer=layer.name, rate=float(rate)))
        elif rate > MAX_DROPOUT_RATE:
            events.append(LintEvent(0, LintCheck.HIGH_DROPOUT, layer=layer.name, rate=float(rate)))
    return events


def lint_model(model: keras.Model) -> list[LintEvent]:
    """Does the last layer's activation fit the loss? (step 0: the caller sets the fit's step)"""
    loss, from_logits = loss_of(model)
    activation, layer, units = output_activation(model)
    if loss not in PROBABILISTIC_LOSSES or activation is None:
        return []
    problems = []
    if activation in ("softmax", "sigmoid") and from_logits:
        problems.append(LintCheck.PROBABILITIES_AS_LOGITS)
    if activation == "linear" and not from_logits:
        problems.append(LintCheck.LOGITS_AS_PROBABILITIES)
    if activation == "softmax" and units == 1:
        problems.append(LintCheck.SOFTMAX_SINGLE_UNIT)
    if activation == "sigmoid" and loss == LossKind.CATEGORICAL_CROSSENTROPY and (units or 0) > 1:
        problems.append(LintCheck.SIGMOID_WITH_CATEGORICAL)
    if activation == "relu":
        problems.append(LintCheck.RELU_WITH_CROSS_ENTROPY)
    return [
        LintEvent(0, problem, layer=layer, activation=activation, loss=loss, from_logits=from_logits, units=units)
        for problem in problems
    ]
