"""Model lint at train start: what the last layer outputs vs what the loss expects.

Runs once in `on_train_begin` (no data needed) and returns plain events; the rule
`output_loss_mismatch` on the read side turns them into findings.
"""

from __future__ import annotations

import functools
from typing import Any

import keras

from tb_trainhealth.callback.frameworks.which_keras import keras_of
from tb_trainhealth.contract.events import LintEvent
from tb_trainhealth.contract.vocab import PROBABILISTIC_LOSSES, LintCheck, LossKind


def loss_of(model: keras.Model) -> tuple[LossKind | None, bool | None]:
    """(loss kind, from_logits) for a single built-in cross-entropy or regression loss
    (from_logits is None for regression losses), else (None, None)."""
    return resolve_loss(getattr(model, "loss", None), keras_of(model))


# Modules whose loss functions are Keras' own: a user's function that happens to be named
# "mse" is not the built-in.
BUILT_IN_MODULES = ("keras", "tf_keras", "tensorflow")


def resolve_loss(loss: Any, keras_module: Any) -> tuple[LossKind | None, bool | None]:
    """The built-in loss behind what users pass to compile: a string ("mse"), a function
    (`keras.losses.categorical_crossentropy`), a partial of one (`from_logits=True`), a
    `keras.losses` instance, or a `LossFunctionWrapper` around a built-in function. A lambda
    or a function of the user's own is (None, None): nothing is assumed about it."""
    if isinstance(loss, str):
        kind = LossKind.named(loss)
        return _with_logits(kind, False)
    if isinstance(loss, functools.partial):
        kind, _ = resolve_loss(loss.func, keras_module)
        return _with_logits(kind, bool(loss.keywords.get("from_logits", False)))
    if isinstance(loss, keras_module.losses.Loss):
        kind = LossKind.of_class(type(loss).__name__)
        if kind is None:  # a LossFunctionWrapper (or subclass) around a built-in function
            kind, _ = resolve_loss(getattr(loss, "fn", None), keras_module)
        config = _config(loss)
        return _with_logits(kind, bool(config.get("from_logits", False)))
    if callable(loss) and str(getattr(loss, "__module__", "")).startswith(BUILT_IN_MODULES):
        return _with_logits(LossKind.named(getattr(loss, "__name__", "")), False)
    return None, None


def _with_logits(kind: LossKind | None, from_logits: bool) -> tuple[LossKind | None, bool | None]:
    if kind is None:
        return None, None
    return kind, (from_logits if kind.is_probabilistic else None)


def _config(loss: Any) -> dict[str, Any]:
    try:
        return loss.get_config() or {}
    except Exception:  # a subclass whose get_config needs arguments it was not given
        return {}


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
    return events + _linear_stack(layers)


# Layers that keep a model linear in its input (a weighted map, or a reshaping or averaging one).
# Any other layer (an Activation, a normalisation, max pooling, a recurrent layer) may not.
_LINEAR_LAYERS = frozenset(
    {"Dense", "Conv1D", "Conv2D", "Conv3D", "Flatten", "Reshape", "Dropout"}
    | {f"{kind}AveragePooling{n}D" for kind in ("", "Global") for n in (1, 2, 3)}
)
_WEIGHTED = frozenset({"Dense", "Conv1D", "Conv2D", "Conv3D"})


def _linear_stack(layers: list[keras.layers.Layer]) -> list[LintEvent]:
    """Two or more weighted layers with no non-linearity between them (the output's own activation
    aside): however deep, the model computes one linear map of its input."""
    weighted = [layer for layer in layers if type(layer).__name__ in _WEIGHTED]
    if len(weighted) < 2 or any(type(layer).__name__ not in _LINEAR_LAYERS for layer in layers):
        return []
    hidden = [layer for layer in layers[:-1] if type(layer).__name__ in _WEIGHTED]
    if any(getattr(getattr(layer, "activation", None), "__name__", "linear") != "linear" for layer in hidden):
        return []
    return [LintEvent(0, LintCheck.LINEAR_STACK, layer=weighted[0].name, units=len(weighted))]


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
    elif loss == LossKind.CATEGORICAL_CROSSENTROPY and units == 1:
        problems.append(LintCheck.CATEGORICAL_SINGLE_UNIT)  # (normalised over one class: always 0)
    if activation == "sigmoid" and loss == LossKind.CATEGORICAL_CROSSENTROPY and (units or 0) > 1:
        problems.append(LintCheck.SIGMOID_WITH_CATEGORICAL)
    if activation == "relu":
        problems.append(LintCheck.RELU_WITH_CROSS_ENTROPY)
    return [
        LintEvent(0, problem, layer=layer, activation=activation, loss=loss, from_logits=from_logits, units=units)
        for problem in problems
    ]
