"""Every setting a comparison with another run needs (`contract.run_settings`), read once per
fit from public Keras APIs: configs of the model, its layers, optimizer and loss, the other
callbacks' attributes, fit's params, the dtype policy, strategy, versions and device; the data
section comes from `data_settings`.

Each section is read on its own and left out when it fails (a custom layer whose get_config
raises still has its class, the other layers their settings): recording this must never cost
the run anything else. Hyperparameters are rounded to `SETTING_DIGITS` significant digits, so a
float32 0.1 reads 0.1 on both Keras; data statistics and fingerprints keep full precision.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import platform
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import tensorflow as tf

from tb_trainhealth.callback import fit_context
from tb_trainhealth.callback.data_settings import adapter_count, data_settings
from tb_trainhealth.callback.frameworks.keras_private import adapter_dataset, fit_data, model_strategy
from tb_trainhealth.callback.frameworks.which_keras import keras_of
from tb_trainhealth.callback.lint.model_lint import loss_of
from tb_trainhealth.contract.run_settings import RunSettings

logger = logging.getLogger(__name__)

SETTING_DIGITS = 7
# Per layer: the config keys that change what or how a layer learns (Keras' own names).
LAYER_KEYS = (
    "units",
    "filters",
    "kernel_size",
    "strides",
    "padding",
    "dilation_rate",
    "pool_size",
    "activation",
    "recurrent_activation",
    "use_bias",
    "kernel_initializer",
    "bias_initializer",
    "recurrent_initializer",
    "kernel_regularizer",
    "bias_regularizer",
    "recurrent_regularizer",
    "activity_regularizer",
    "rate",
    "dropout",
    "recurrent_dropout",
    "momentum",
    "epsilon",
    "return_sequences",
    "input_dim",
    "output_dim",
    "num_heads",
    "key_dim",
)
ACTIVATION_KEYS = frozenset({"activation", "recurrent_activation"})
# Layers that only feed the model: no settings of their own.
SKIPPED_LAYERS = frozenset({"InputLayer"})
# Optimizer config keys said otherwise (`optimizer`, `learning_rate`, `learning_rate_schedule`).
OPTIMIZER_SKIPPED = frozenset({"name", "learning_rate"})
# Loss config keys that are bookkeeping, not the loss's meaning.
LOSS_SKIPPED = frozenset({"name", "reduction", "dtype", "fn"})
# Callbacks every fit has (Keras adds them) and ours: not the user's choice of callbacks.
INTERNAL_CALLBACKS = frozenset({"History", "ProgbarLogger", "HealthCallback", "CallbackList"})
# Per callback class: its public attributes that change the training.
CALLBACK_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "EarlyStopping": (
        "monitor",
        "patience",
        "min_delta",
        "restore_best_weights",
        "baseline",
        "start_from_epoch",
        "mode",
    ),
    "ReduceLROnPlateau": ("monitor", "factor", "patience", "min_lr", "min_delta", "cooldown", "mode"),
    "LearningRateScheduler": ("schedule",),
    "BackupAndRestore": ("save_freq",),
    "SwapEMAWeights": ("swap_on_epoch",),
}
# Attributes kept as their size: Keras stores min_delta signed by the monitor's direction.
ABSOLUTE_ATTRIBUTES = frozenset({"min_delta"})


def run_settings(
    model: Any, params: dict[str, Any], callbacks: list[Any], adapter: Any, steps_per_execution: int
) -> RunSettings:
    """The fit's settings; a section that fails is left out (logged at debug level), never raised.
    Called from a callback hook inside `fit` (its data are read from fit's frame)."""
    fit_locals = _section("fit's data", lambda: {"locals": fit_data()}).get("locals", {})
    sections: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("fit", lambda: fit_settings(params, fit_locals, adapter, steps_per_execution)),
        ("optimizer", lambda: optimizer_settings(model)),
        ("loss", lambda: loss_settings(model)),
        ("metrics", lambda: metrics_settings(model)),
        ("compile", lambda: compile_settings(model)),
        ("callbacks", lambda: callback_settings(callbacks)),
        ("environment", lambda: environment_settings(model)),
        ("data", lambda: data_settings(fit_locals, adapter, loss_of(model)[0])),
    ]
    settings: dict[str, Any] = {}
    for name, section in sections:
        settings.update(_section(name, section))
    layers = _section("layers", lambda: {"layers": model_layers(model)}).get("layers", [])
    for path, layer in layers:
        settings.update(_section(f"layer {path}", lambda layer=layer, path=path: layer_settings(layer, path)))
    return RunSettings.parse({"layers": [[path, type(layer).__name__] for path, layer in layers], "settings": settings})


def _section(name: str, read: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return read()
    except Exception:
        logger.debug("tb-trainhealth: run settings: %s left out", name, exc_info=True)
        return {}


# -- values -------------------------------------------------------------------------------------


def setting(value: Any) -> Any:
    """A value as the contract takes it (str, int, rounded float, bool, None, list of numbers),
    or `_NOT_A_SETTING`."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return _round(value) if math.isfinite(value) else _NOT_A_SETTING
    if isinstance(value, (list, tuple)) and all(_is_number(v) for v in value):
        return [setting(v) for v in value]
    return _NOT_A_SETTING


_NOT_A_SETTING = object()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _round(value: float) -> float:
    return float(f"{value:.{SETTING_DIGITS}g}")


def _kept(values: Iterator[tuple[str, Any]]) -> dict[str, Any]:
    """The pairs whose values are settings, converted."""
    out = {}
    for key, value in values:
        converted = setting(value)
        if converted is not _NOT_A_SETTING:
            out[key] = converted
    return out


def short_object(obj: Any, every_argument: bool = False) -> str | None:
    """An initializer or regularizer as "Class(arg=value)": its non-default scalar arguments
    (`every_argument`: all of them, a regularizer's strength is its point); a serialized one
    (a config dict) shows each argument it has."""
    if obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, dict):
        name, config, defaults = obj.get("class_name"), obj.get("config") or {}, {}
    else:
        name, config = type(obj).__name__, obj.get_config() if hasattr(obj, "get_config") else {}
        defaults = {} if every_argument else _defaults(type(obj))
    shown = [
        f"{key}={_short(value)}"
        for key, value in config.items()
        if key != "name"
        and value is not None
        and setting(value) is not _NOT_A_SETTING
        and (key not in defaults or setting(defaults[key]) != setting(value))
    ]
    return f"{name}({', '.join(shown)})" if shown else str(name)


@functools.lru_cache(maxsize=256)
def _defaults(cls: type) -> dict[str, Any]:
    try:
        parameters = inspect.signature(cls.__init__).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}


def _short(value: Any) -> str:
    value = setting(value)
    return f"{value:.6g}" if isinstance(value, float) else repr(value) if isinstance(value, str) else str(value)


def activation_name(activation: Any) -> str | None:
    """An activation function as its name ("relu", "linear"); a layer or callable object as its class."""
    if activation is None or isinstance(activation, str):
        return activation
    return getattr(activation, "__name__", None) or type(activation).__name__


# -- layers -------------------------------------------------------------------------------------


def model_layers(model: Any) -> list[tuple[str, Any]]:
    """(name, layer) in model order, nested models' layers after the nested model (through the
    public `.layers`), input layers skipped; a name seen already is prefixed by its model's."""
    found: list[tuple[str, Any]] = []
    seen_layers: set[int] = set()
    seen_names: set[str] = set()

    def walk(container: Any, prefix: str) -> None:
        for layer in getattr(container, "layers", None) or []:
            if id(layer) in seen_layers or type(layer).__name__ in SKIPPED_LAYERS:
                continue
            seen_layers.add(id(layer))
            name = layer.name if layer.name not in seen_names else f"{prefix}{layer.name}"
            seen_names.add(name)
            found.append((name, layer))
            walk(layer, f"{name}/")

    walk(model, f"{model.name}/")
    return found


def layer_settings(layer: Any, path: str) -> dict[str, Any]:
    """`<layer>.<key>` for LAYER_KEYS the layer has (its config, else its attributes of those
    names), and `<layer>.trainable` when frozen."""
    config = _config_or_none(layer)
    out: dict[str, Any] = {} if layer.trainable else {f"{path}.trainable": False}
    for key in LAYER_KEYS:
        if key in config if config is not None else hasattr(layer, key):
            value = _section(f"{path}.{key}", lambda key=key: {"value": _layer_value(layer, key, config)})
            if value.get("value", _NOT_A_SETTING) is not _NOT_A_SETTING:
                out[f"{path}.{key}"] = value["value"]
    return out


def _config_or_none(layer: Any) -> dict[str, Any] | None:
    try:
        config = layer.get_config()
    except Exception:  # (custom layers often raise NotImplementedError)
        return None
    return config if isinstance(config, dict) else None


def _layer_value(layer: Any, key: str, config: dict[str, Any] | None) -> Any:
    """Initializers, regularizers, activations from the layer's objects (their short forms);
    other keys as the config (else the attribute) has them."""
    raw = config[key] if config is not None else getattr(layer, key)
    if key in ACTIVATION_KEYS:
        return activation_name(getattr(layer, key, raw))
    if key.endswith(("_initializer", "_regularizer")):
        return short_object(getattr(layer, key, raw), every_argument=key.endswith("_regularizer"))
    return setting(raw)


# -- compile, optimizer, loss -------------------------------------------------------------------


def optimizer_settings(model: Any) -> dict[str, Any]:
    """`optimizer` (a LossScaleOptimizer's inner one), `learning_rate` (a schedule's value at step
    0), `learning_rate_schedule` and its `learning_rate_schedule.<key>`, and the optimizer's
    other scalar config keys (None included: the same optimizer always gives the same keys)."""
    optimizer = model.optimizer
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    config = inner.get_config()
    out: dict[str, Any] = {"optimizer": type(inner).__name__}
    out.update(_kept((key, value) for key, value in config.items() if key not in OPTIMIZER_SKIPPED))
    rate = config.get("learning_rate")
    if isinstance(rate, dict):  # a serialized LearningRateSchedule
        out["learning_rate_schedule"] = str(rate.get("class_name"))
        schedule_config = rate.get("config") or {}
        out.update(_kept((f"learning_rate_schedule.{k}", v) for k, v in schedule_config.items() if k != "name"))
        rate = _first_rate(model, rate, inner)
    converted = setting(rate)
    if _is_number(converted):
        out["learning_rate"] = float(converted)
    return out


def _first_rate(model: Any, serialized: dict[str, Any], optimizer: Any) -> float | None:
    """A schedule's value at step 0 (deserialized by the model's Keras); else the rate now."""
    try:
        schedule = keras_of(model).optimizers.schedules.deserialize(serialized)
        return float(np.asarray(schedule(0)))
    except Exception:  # (a custom schedule not registered with Keras)
        return fit_context.optimizer_settings(optimizer)[0]


def loss_settings(model: Any) -> dict[str, Any]:
    """`loss` (named as run_info names it) and `loss.<key>` of a loss object's config."""
    loss = getattr(model, "loss", None)
    out: dict[str, Any] = {"loss": fit_context.describe_loss(loss)}
    get_config = getattr(loss, "get_config", None)
    if callable(get_config):
        config = get_config() or {}
        out.update(_kept((f"loss.{k}", v) for k, v in config.items() if k not in LOSS_SKIPPED))
    return out


def metrics_settings(model: Any) -> dict[str, Any]:
    """`metrics`: the compiled metrics' names, sorted, joined by ", " (from the compile config)."""
    with warnings.catch_warnings():  # Keras warns of a lambda loss each time it serialises one
        warnings.simplefilter("ignore", UserWarning)
        config = model.get_compile_config() or {}
    names = sorted(_metric_names(config.get("metrics")) + _metric_names(config.get("weighted_metrics")))
    return {"metrics": ", ".join(names)}


def _metric_names(metrics: Any) -> list[str]:
    if metrics is None:
        return []
    if isinstance(metrics, str):
        return [metrics]
    if isinstance(metrics, dict) and "class_name" in metrics:
        name = (metrics.get("config") or {}).get("name")
        return [str(name or metrics["class_name"])]
    if isinstance(metrics, dict):  # per output
        return [name for value in metrics.values() for name in _metric_names(value)]
    if isinstance(metrics, (list, tuple)):
        return [name for value in metrics for name in _metric_names(value)]
    return [getattr(metrics, "name", None) or getattr(metrics, "__name__", type(metrics).__name__)]


def compile_settings(model: Any) -> dict[str, Any]:
    """`jit_compile`, `run_eagerly`, `dtype_policy`, `distribution_strategy`, `num_replicas_in_sync`."""
    policy = getattr(model, "dtype_policy", None) or keras_of(model).mixed_precision.global_policy()
    strategy = model_strategy(model) or getattr(model, "distribute_strategy", None) or tf.distribute.get_strategy()
    return _kept(
        [
            ("jit_compile", getattr(model, "jit_compile", None)),
            ("run_eagerly", getattr(model, "run_eagerly", None)),
            ("dtype_policy", getattr(policy, "name", None)),
            ("distribution_strategy", type(strategy).__name__),
            ("num_replicas_in_sync", getattr(strategy, "num_replicas_in_sync", None)),
        ]
    )


# -- fit, callbacks, environment ----------------------------------------------------------------


def fit_settings(
    params: dict[str, Any], fit_locals: dict[str, Any], adapter: Any, steps_per_execution: int
) -> dict[str, Any]:
    """`epochs`, `steps_per_epoch`, `initial_epoch`, `shuffle`, `steps_per_execution`,
    `batch_size`: those known (None: unknown, left out)."""
    values = [
        ("epochs", params.get("epochs")),
        ("steps_per_epoch", params.get("steps")),
        ("initial_epoch", fit_locals.get("initial_epoch")),
        ("shuffle", fit_locals.get("shuffle")),
        ("steps_per_execution", steps_per_execution),
        ("batch_size", batch_size(adapter)),
    ]
    return _kept((key, value) for key, value in values if value is not None)


def batch_size(adapter: Any) -> int | None:
    """The adapter's batch size; else the static leading dimension of the dataset's first input."""
    size = adapter_count(adapter, "batch_size")
    if size is not None:
        return size
    spec = getattr(adapter_dataset(adapter), "element_spec", None)
    leaves = [leaf for leaf in tf.nest.flatten(spec) if isinstance(leaf, tf.TensorSpec)] if spec is not None else []
    first = leaves[0].shape if leaves and leaves[0].shape.rank else None
    return int(first[0]) if first is not None and first[0] is not None else None


def callback_settings(callbacks: list[Any]) -> dict[str, Any]:
    """`callbacks` (the user's, by class name, sorted) and `<Class>.<attribute>` of the known ones
    (a second callback of a class is `<Class>_2`)."""
    users = [c for c in callbacks if not INTERNAL_CALLBACKS & {k.__name__ for k in type(c).__mro__}]
    out: dict[str, Any] = {"callbacks": ", ".join(sorted(type(c).__name__ for c in users))}
    counts: dict[str, int] = {}
    for callback in users:
        name = type(callback).__name__
        counts[name] = counts.get(name, 0) + 1
        label = name if counts[name] == 1 else f"{name}_{counts[name]}"
        attributes = _known_attributes(callback)
        out.update(_kept((f"{label}.{key}", _attribute(callback, key)) for key in attributes if hasattr(callback, key)))
    return out


def _known_attributes(callback: Any) -> tuple[str, ...]:
    """The attributes listed for the callback's class or the nearest Keras base it extends."""
    for cls in type(callback).__mro__:
        if cls.__name__ in CALLBACK_ATTRIBUTES:
            return CALLBACK_ATTRIBUTES[cls.__name__]
    return ()


def _attribute(callback: Any, key: str) -> Any:
    value = getattr(callback, key)
    if key in ABSOLUTE_ATTRIBUTES and _is_number(value):
        return abs(value)
    if callable(value):  # LearningRateScheduler.schedule
        return getattr(value, "__name__", None) or type(value).__name__
    return value


def environment_settings(model: Any) -> dict[str, Any]:
    """`tensorflow_version`, `keras_version`, `python_version`, `device`."""
    return {
        "tensorflow_version": tf.__version__,
        "keras_version": str(getattr(keras_of(model), "__version__", "")) or None,
        "python_version": platform.python_version(),
        "device": device_kind(model),
    }


def device_kind(model: Any) -> str:
    """ "TPU" under a TPU strategy or with TPUs attached, else "GPU" with a GPU visible, else "CPU"."""
    strategy = model_strategy(model) or getattr(model, "distribute_strategy", None)
    if "TPU" in type(strategy).__name__ or tf.config.list_logical_devices("TPU"):
        return "TPU"
    return "GPU" if tf.config.list_logical_devices("GPU") else "CPU"
