"""The changes a trial can make mechanically, chosen from the model, its data and what was found.

Each `Candidate` is one change with its intent (the same `findings.Intent` the rules' fixes carry,
so the plan can match a trial with the fix it measured), a label and the code to paste. The learning
rate is tried both ways whatever the findings say: which way helps is what the trial is for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from tb_trainhealth.callback.fit_context import describe_loss
from tb_trainhealth.callback.trials.sample import Sample
from tb_trainhealth.callback.trials.task_error import Task
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.findings import (
    ADD_CLIPPING,
    ADD_NONLINEARITY,
    CHANGE_HIDDEN_ACTIVATION,
    CHANGE_INITIALIZER,
    CHANGE_LOSS,
    CHANGE_OUTPUT,
    LOWER_RATE,
    MORE_EPOCHS,
    RAISE_RATE,
    SCALE_INPUTS,
    SCALE_TARGETS,
    Intent,
)

# The optimizers' own default learning rates (Keras 3), tried where the run's is far from it.
DEFAULT_RATES = {"Adam": 1e-3, "AdamW": 1e-3, "Nadam": 1e-3, "Adamax": 1e-3, "RMSprop": 1e-3, "SGD": 1e-2}
FAR_FROM_DEFAULT = 30.0  # the default is tried where the run's rate is this many times off
# Inputs whose largest value is beyond this, or whose spread is below MIN_INPUT_STD, are tried standardised.
MAX_INPUT_SCALE = 20.0
MIN_INPUT_STD = 0.05
MAX_TARGET_SCALE = 10.0  # regression targets tried standardised beyond this mean or spread
MORE_STEPS = 3  # "train longer" is tried at this many times the steps
# Hidden layers given ReLU are at least this wide, as the code the plan shows says (Dense(64, ...)):
# a ReLU on a 1-unit layer is a bottleneck no activation opens (real-bug zoo dm_linear_layers_polynomial:
# Dense(1) -> Dense(5) -> Dense(1); its authors' fix is 32 tanh units a layer).
HIDDEN_UNITS = 64
CLIP_NORM = 1.0
_BLOWN_UP = {Code.NONFINITE, Code.EXPLODING_GRADIENTS, Code.LOSS_DIVERGENCE, Code.LOSS_OSCILLATION}
_SATURATING = ("sigmoid", "tanh")
_FLAT_UNITS = {Code.VANISHING_GRADIENTS, Code.SATURATED_ACTIVATION, Code.LOSS_PLATEAU, Code.WORSE_THAN_CONSTANT}
_STARTS_BADLY = {Code.BAD_INITIALIZATION, Code.DEAD_RELU, Code.SATURATED_ACTIVATION, Code.VANISHING_GRADIENTS}
_SLOW = {Code.UNDERTRAINED, Code.LOSS_PLATEAU, Code.WORSE_THAN_CONSTANT, Code.MAJORITY_CLASS}
_PROBABILITY_LOSSES = ("binary_crossentropy", "categorical_crossentropy", "sparse_categorical_crossentropy")
_PLAIN_LAYERS = {"Dense", "Dropout", "Flatten", "InputLayer"}
_REGRESSION_LOSSES = ("mean_squared_error", "mse", "mean_absolute_error", "mae", "huber", "log_cosh", "logcosh")


@dataclasses.dataclass(frozen=True)
class Candidate:
    intent: Intent
    label: str
    code: str
    rate: float | None = None  # train at this learning rate
    clipnorm: float | None = None
    scale_inputs: bool = False
    target_scale: tuple[float, float] | None = None  # trained on (y - offset) / scale, judged back
    layer_config: Callable[[dict[str, Any], bool], dict[str, Any]] | None = None  # (config, is_last)
    loss: Any = None  # a new loss (name or Loss object)
    reinitialize: bool = False  # the layers' own fresh initial weights, not the run's
    steps_factor: int = 1

    @property
    def same_model(self) -> bool:
        """Trained on the unchanged clone (only the rate, the data or the steps differ)."""
        return self.clipnorm is None and self.layer_config is None and self.loss is None and not self.reinitialize


def conflict(first: Candidate, second: Candidate) -> bool:
    """Whether two changes touch the same thing (one setting, the loss, the layers, the data's scale)."""
    return (
        first.intent.setting == second.intent.setting
        or (first.loss is not None and second.loss is not None)
        or (first.layer_config is not None and second.layer_config is not None)
        or (first.rate is not None and second.rate is not None)
        or (first.scale_inputs and second.scale_inputs)
        or (first.target_scale is not None and second.target_scale is not None)
        or (first.steps_factor > 1 and second.steps_factor > 1)
    )


def combined(first: Candidate, second: Candidate) -> Candidate:
    """Both changes at once (they do not `conflict`): `second`'s intent, the pair's label and code."""
    return Candidate(
        second.intent,
        f"{first.label} + {second.label}",
        f"{first.code}\n{second.code}",
        rate=first.rate if first.rate is not None else second.rate,
        clipnorm=first.clipnorm if first.clipnorm is not None else second.clipnorm,
        scale_inputs=first.scale_inputs or second.scale_inputs,
        target_scale=first.target_scale or second.target_scale,
        layer_config=first.layer_config or second.layer_config,
        loss=first.loss if first.loss is not None else second.loss,
        reinitialize=first.reinitialize or second.reinitialize,
        steps_factor=max(first.steps_factor, second.steps_factor),
    )


@dataclasses.dataclass(frozen=True)
class LossInfo:
    name: str
    from_logits: bool


def loss_info(loss: Any) -> LossInfo:
    """The compiled loss's name as run_info names it (`fit_context.describe_loss`), and its from_logits."""
    try:
        config = {} if isinstance(loss, str) else loss.get_config() or {}
    except Exception:
        config = {}
    return LossInfo(_canonical(describe_loss(loss) or "?"), bool(config.get("from_logits", False)))


def _canonical(name: str) -> str:
    aliases = {
        "binarycrossentropy": "binary_crossentropy",
        "categoricalcrossentropy": "categorical_crossentropy",
        "sparsecategoricalcrossentropy": "sparse_categorical_crossentropy",
        "meansquarederror": "mean_squared_error",
        "mse": "mean_squared_error",
        "meanabsoluteerror": "mean_absolute_error",
        "mae": "mean_absolute_error",
    }
    key = name.lower().replace("_", "")
    return aliases.get(key, name.lower())


def candidates(
    model: Any, sample: Sample, task: Task, codes: set[str], rate: float | None, clips: bool
) -> list[Candidate]:
    """What to try on this run, likeliest first (the budget may end before the last): an output layer
    that does not fit the targets, unscaled data, initial weights where units died or saturated, a
    linear stack, then the learning rate both ways, clipping, more steps."""
    optimizer = type(getattr(model.optimizer, "inner_optimizer", model.optimizer)).__name__
    out: list[Candidate] = []
    head = _head(model, task, loss_info(model.loss))
    if head is not None:  # an output that cannot reach the targets: the likeliest cause, tried first
        out.append(head)
    out += _data(sample, task, _activation(model.layers[-1]))
    if codes & _STARTS_BADLY:
        out.append(
            Candidate(
                CHANGE_INITIALIZER,
                "Keras' default initialisers",
                "keras.layers.Dense(..., kernel_initializer='glorot_uniform', bias_initializer='zeros')",
                layer_config=_default_initializers,
                reinitialize=True,
            )
        )
    if _linear_stack(model):
        out.append(
            Candidate(
                ADD_NONLINEARITY,
                "ReLU between the stacked layers",
                f"keras.layers.Dense({HIDDEN_UNITS}, activation='relu')  # every hidden layer (at least {HIDDEN_UNITS} "
                "units); the last keeps its own",
                layer_config=_relu_hidden,
            )
        )
    if codes & _FLAT_UNITS and _saturating_hidden(model):
        out.append(
            Candidate(
                CHANGE_HIDDEN_ACTIVATION,
                "ReLU hidden layers instead of sigmoid/tanh",
                f"keras.layers.Dense({HIDDEN_UNITS}, activation='relu')  # every hidden layer (at least {HIDDEN_UNITS} "
                "units); the last keeps its own",
                layer_config=_relu_for_saturating,
            )
        )
    if rate is not None:
        out += _rates(optimizer, rate)
    if codes & _BLOWN_UP and not clips:
        out.append(
            Candidate(
                ADD_CLIPPING,
                f"gradient clipping (clipnorm={CLIP_NORM})",
                f"optimizer = keras.optimizers.{optimizer}(learning_rate=..., clipnorm={CLIP_NORM})",
                clipnorm=CLIP_NORM,
            )
        )
    if codes & _SLOW:
        out.append(
            Candidate(
                MORE_EPOCHS,
                f"{MORE_STEPS}x the steps at the same settings",
                f"model.fit(..., epochs={MORE_STEPS} * epochs)",
                steps_factor=MORE_STEPS,
            )
        )
    return out


def _rates(optimizer: str, rate: float) -> list[Candidate]:
    def at(new: float, intent: Intent, why: str = "") -> Candidate:
        code = f"optimizer = keras.optimizers.{optimizer}(learning_rate={new:.2g})  # was {rate:.2g}{f': {why}' if why else ''}"
        return Candidate(intent, f"learning rate {rate:.2g} -> {new:.2g}{f' ({why})' if why else ''}", code, rate=new)

    out = []
    default = DEFAULT_RATES.get(optimizer, 1e-3)
    if rate <= 0:  # (gradient ascent, or no step at all): only the default makes sense
        return [at(default, RAISE_RATE, f"{optimizer}'s default")]
    if default / rate >= FAR_FROM_DEFAULT:  # far off: the default first
        out.append(at(default, RAISE_RATE, f"{optimizer}'s default"))
    elif rate / default >= FAR_FROM_DEFAULT:
        out.append(at(default, LOWER_RATE, f"{optimizer}'s default"))
    return [*out, at(rate * 10, RAISE_RATE), at(rate / 10, LOWER_RATE)]


def _data(sample: Sample, task: Task, output_activation: str) -> list[Candidate]:
    out = []
    x = sample.x.astype("float64")
    # (inputs all one value carry nothing a scale could bring out: zeroed_inputs' fix is the data's)
    spread = sample.x.dtype.kind in "fiu" and x.std() > 0
    if spread and (np.abs(x).max() > MAX_INPUT_SCALE or x.std() < MIN_INPUT_STD):
        out.append(
            Candidate(
                SCALE_INPUTS,
                "standardised inputs",
                "mean, std = x_train.mean(axis=0), x_train.std(axis=0) + 1e-8\n"
                "x_train, x_val = (x_train - mean) / std, (x_val - mean) / std  # the same mean, std everywhere",
                scale_inputs=True,
            )
        )
    if not task.is_classification:
        y = sample.y.astype("float64")
        mean, std = float(y.mean()), float(y.std()) or 1.0
        low, high = float(y.min()), float(y.max())
        beyond_sigmoid = output_activation == "sigmoid" and (low < 0 or high > 1)
        if abs(mean) > MAX_TARGET_SCALE * max(std, 1.0) or std > MAX_TARGET_SCALE or beyond_sigmoid:
            if output_activation == "sigmoid":
                out.append(
                    Candidate(
                        SCALE_TARGETS,
                        "targets scaled to [0, 1]",
                        "y_min, y_max = y_train.min(), y_train.max()\ny_train = (y_train - y_min) / (y_max - y_min)"
                        "  # predictions: pred * (y_max - y_min) + y_min",
                        target_scale=(low, (high - low) or 1.0),
                    )
                )
            else:
                out.append(
                    Candidate(
                        SCALE_TARGETS,
                        "standardised targets",
                        "y_mean, y_std = y_train.mean(), y_train.std()\ny_train = (y_train - y_mean) / y_std"
                        "  # predictions: pred * y_std + y_mean",
                        target_scale=(mean, std),
                    )
                )
    inputs = [c for c in out if c.scale_inputs]
    targets = [c for c in out if c.target_scale]
    if inputs and targets:  # unscaled both ways: the targets' scale is tried with the inputs scaled too
        both = dataclasses.replace(
            targets[0],
            label=f"{inputs[0].label}, {targets[0].label}",
            code=f"{inputs[0].code}\n{targets[0].code}",
            scale_inputs=True,
        )
        out.append(both)
    return out


def _activation(layer: Any) -> str:
    activation = getattr(layer, "activation", None)
    return str(getattr(activation, "__name__", activation or "linear"))


def _units(layer: Any) -> int | None:
    units = getattr(layer, "units", None)
    return int(units) if isinstance(units, int) else None


def _head(model: Any, task: Task, loss: LossInfo) -> Candidate | None:
    """The output layer and loss the targets call for, where the run's differ."""
    last = model.layers[-1]
    units, activation = _units(last), _activation(last)
    if units is None:
        return None
    if task.is_classification:
        k = task.classes or 2
        if units == 1 and k == 2:
            fits = (activation == "sigmoid" and loss.name == "binary_crossentropy" and not loss.from_logits) or (
                activation == "linear" and loss.name == "binary_crossentropy" and loss.from_logits
            )
            if fits:
                return None
            return _new_head(CHANGE_OUTPUT, 1, "sigmoid", "binary_crossentropy", "Dense(1, activation='sigmoid')")
        if units >= k and loss.name in _PROBABILITY_LOSSES[1:]:
            if activation == "softmax" and not loss.from_logits:
                return None
            if activation == "linear" and loss.from_logits:
                return None
            if activation == "linear":
                return Candidate(
                    CHANGE_LOSS,
                    f"{loss.name}(from_logits=True)",
                    f"loss=keras.losses.{_class_name(loss.name)}(from_logits=True)  # the last layer outputs logits",
                    loss=_loss_object(loss.name, from_logits=True),
                )
        loss_name = "categorical_crossentropy" if task.one_hot else "sparse_categorical_crossentropy"
        return _new_head(CHANGE_OUTPUT, k, "softmax", loss_name, f"Dense({k}, activation='softmax')")
    if activation != "linear" or loss.name not in _REGRESSION_LOSSES:
        return _new_head(CHANGE_OUTPUT, units, "linear", "mean_squared_error", f"Dense({units})  # no activation")
    return None


def _new_head(intent: Intent, units: int, activation: str, loss: str, layer: str) -> Candidate:
    def config(layer_config: dict[str, Any], is_last: bool) -> dict[str, Any]:
        return {**layer_config, "units": units, "activation": activation} if is_last else layer_config

    return Candidate(
        intent,
        f"output {activation} ({units} unit{'s' if units > 1 else ''}) + {loss}",
        f"keras.layers.{layer}  # last layer\nmodel.compile(optimizer=..., loss='{loss}', metrics=...)",
        layer_config=config,
        loss=loss,
    )


def _class_name(loss: str) -> str:
    return "".join(part.capitalize() for part in loss.split("_"))


def _loss_object(name: str, from_logits: bool) -> Any:
    import keras

    return getattr(keras.losses, _class_name(name))(from_logits=from_logits)


def _default_initializers(config: dict[str, Any], is_last: bool) -> dict[str, Any]:
    changed = dict(config)
    if "kernel_initializer" in changed:
        changed["kernel_initializer"] = "glorot_uniform"
    if "bias_initializer" in changed:
        changed["bias_initializer"] = "zeros"
    return changed


def _relu_hidden(config: dict[str, Any], is_last: bool) -> dict[str, Any]:
    if is_last or config.get("activation") not in ("linear", None) or "units" not in config:
        return config
    return _relu(config)


def _relu_for_saturating(config: dict[str, Any], is_last: bool) -> dict[str, Any]:
    dense = "units" in config and "recurrent_activation" not in config  # (an LSTM's tanh stays)
    if is_last or config.get("activation") not in _SATURATING or not dense:
        return config
    return _relu(config)


def _relu(config: dict[str, Any]) -> dict[str, Any]:
    return {**config, "activation": "relu", "units": max(int(config["units"]), HIDDEN_UNITS)}


def _saturating_hidden(model: Any) -> bool:
    """Hidden Dense layers with sigmoid or tanh (recurrent layers keep theirs: their gates need them)."""
    dense = [layer for layer in model.layers if type(layer).__name__ == "Dense"]
    return any(_activation(layer) in _SATURATING for layer in dense[:-1])


def _linear_stack(model: Any) -> bool:
    """Two or more Dense layers, every hidden one without an activation (a linear model, however deep)."""
    kinds = {type(layer).__name__ for layer in model.layers}
    dense = [layer for layer in model.layers if type(layer).__name__ == "Dense"]
    plain = kinds <= _PLAIN_LAYERS  # (an Activation layer between them is a non-linearity)
    return plain and len(dense) >= 2 and all(_activation(layer) == "linear" for layer in dense[:-1])
