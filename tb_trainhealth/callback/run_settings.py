"""Every setting a comparison with another run needs (`contract.run_settings`), read once per
fit from public Keras APIs: configs of the model, its layers, optimizer and loss, the other
callbacks' attributes, fit's params, the dtype policy, strategy, versions and device; the layers'
section comes from `layer_settings`, the data's from `data_settings`.

Each section is read on its own and left out when it fails (a custom layer whose get_config
raises still has its class, the other layers their settings; `setting_values`): recording this
must never cost the run anything else. Hyperparameters are rounded (`setting_values`); data
statistics and fingerprints keep full precision.
"""

from __future__ import annotations

import platform
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from tb_trainhealth.callback import fit_context
from tb_trainhealth.callback.data_settings import adapter_count, data_settings
from tb_trainhealth.callback.frameworks.keras_private import adapter_dataset, fit_data, model_strategy
from tb_trainhealth.callback.frameworks.which_keras import keras_of
from tb_trainhealth.callback.layer_settings import layer_settings, model_layers
from tb_trainhealth.callback.lint.model_lint import loss_of
from tb_trainhealth.callback.setting_values import is_number, kept, section, setting
from tb_trainhealth.contract.run_settings import RunSettings

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
    fit_locals = section("fit's data", lambda: {"locals": fit_data()}).get("locals", {})
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
    for name, read in sections:
        settings.update(section(name, read))
    layers = section("layers", lambda: {"layers": model_layers(model)}).get("layers", [])
    for path, layer in layers:
        settings.update(section(f"layer {path}", lambda layer=layer, path=path: layer_settings(layer, path)))
    return RunSettings.parse({"layers": [[path, type(layer).__name__] for path, layer in layers], "settings": settings})


# -- compile, optimizer, loss -------------------------------------------------------------------


def optimizer_settings(model: Any) -> dict[str, Any]:
    """`optimizer` (a LossScaleOptimizer's inner one), `learning_rate` (a schedule's value at step
    0), `learning_rate_schedule` and its `learning_rate_schedule.<key>`, and the optimizer's
    other scalar config keys (None included: the same optimizer always gives the same keys)."""
    optimizer = model.optimizer
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    config = inner.get_config()
    out: dict[str, Any] = {"optimizer": type(inner).__name__}
    out.update(kept((key, value) for key, value in config.items() if key not in OPTIMIZER_SKIPPED))
    rate = config.get("learning_rate")
    if isinstance(rate, dict):  # a serialized LearningRateSchedule
        out["learning_rate_schedule"] = str(rate.get("class_name"))
        schedule_config = rate.get("config") or {}
        out.update(kept((f"learning_rate_schedule.{k}", v) for k, v in schedule_config.items() if k != "name"))
        rate = _first_rate(model, rate, inner)
    converted = setting(rate)
    if is_number(converted):
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
        out.update(kept((f"loss.{k}", v) for k, v in config.items() if k not in LOSS_SKIPPED))
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
    return kept(
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
    return kept((key, value) for key, value in values if value is not None)


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
        out.update(kept((f"{label}.{key}", _attribute(callback, key)) for key in attributes if hasattr(callback, key)))
    return out


def _known_attributes(callback: Any) -> tuple[str, ...]:
    """The attributes listed for the callback's class or the nearest Keras base it extends."""
    for cls in type(callback).__mro__:
        if cls.__name__ in CALLBACK_ATTRIBUTES:
            return CALLBACK_ATTRIBUTES[cls.__name__]
    return ()


def _attribute(callback: Any, key: str) -> Any:
    value = getattr(callback, key)
    if key in ABSOLUTE_ATTRIBUTES and is_number(value):
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
