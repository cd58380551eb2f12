"""What the user's `fit()` already does: its data, its other callbacks, its optimizer's
learning rate and clipping, and how it ended. The rules use it so that no fix suggests what
is already there (EarlyStopping, clipnorm, a lower learning rate than the one in use).

Keras gives callbacks the model and `params`, not the data adapter nor the list of the other
callbacks; `fit()` keeps both in local variables, read from its frame on the stack
(`frameworks.keras_private`: their names are Keras' own).
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np

from tb_trainhealth.callback.frameworks.keras_private import FIT_CALLBACKS, fit_local
from tb_trainhealth.contract import tags
from tb_trainhealth.contract.events import FitEndEvent
from tb_trainhealth.contract.run_info import CallbackInfo
from tb_trainhealth.run_paths import is_local


def fit_callbacks() -> list[Any]:
    """The callbacks of the `fit()` calling us (Keras' CallbackList holds them in `.callbacks`)."""
    callbacks = fit_local(FIT_CALLBACKS)
    return list(getattr(callbacks, "callbacks", callbacks if isinstance(callbacks, list) else []))


def keras_tensorboards(callbacks: list[Any], log_dir: str) -> list[Any]:
    """Keras' TensorBoard callbacks (Keras 3 or tf_keras) writing into the run `log_dir`
    (their `train` and `validation` sub-runs are part of it)."""
    return [
        c
        for c in callbacks
        if any(k.__name__ == "TensorBoard" for k in type(c).__mro__)
        and isinstance(getattr(c, "log_dir", None), (str, os.PathLike))
        and _same_dir(os.fspath(c.log_dir), log_dir)
    ]


def plain_scalars_to_write(callbacks: list[Any], log_dir: str) -> tuple[dict[str, str], bool]:
    """({our per-step tag: plain tag}, epoch logs too?) for TensorBoard's Scalars dashboard: all
    of `tags.SCALARS_STEP_TAGS` and the epoch logs, less what a Keras TensorBoard callback in the
    same run writes already (epoch logs always; the loss per batch unless update_freq="epoch")."""
    keras_boards = keras_tensorboards(callbacks, log_dir)
    step_tags = dict(tags.SCALARS_STEP_TAGS)
    if any(getattr(c, "update_freq", "epoch") != "epoch" for c in keras_boards):
        del step_tags[tags.TAG_LOSS]  # Keras writes batch_loss
    return step_tags, not keras_boards


def _same_dir(a: str, b: str) -> bool:
    if not (is_local(a) and is_local(b)):
        return a.rstrip("/") == b.rstrip("/")
    return os.path.normcase(os.path.abspath(os.path.expanduser(a))) == os.path.normcase(
        os.path.abspath(os.path.expanduser(b))
    )


def describe_callbacks(callbacks: list[Any]) -> tuple[CallbackInfo, ...]:
    return tuple(
        CallbackInfo(type(c).__name__, _bool_or_none(getattr(c, "restore_best_weights", None))) for c in callbacks
    )


def optimizer_settings(optimizer: Any) -> tuple[float | None, bool]:
    """(learning rate now, whether gradients are clipped); a LossScaleOptimizer's inner optimizer decides."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    clips = any(getattr(inner, name, None) is not None for name in ("clipnorm", "global_clipnorm", "clipvalue"))
    try:
        rate = inner.learning_rate
        rate = float(np.asarray(rate.numpy() if hasattr(rate, "numpy") else rate))  # (a tf_keras mirrored variable)
    except (TypeError, ValueError, AttributeError):
        rate = None
    return rate, clips


def fit_end(step: int, model: Any, callbacks: list[Any], epochs_run: int, params: dict) -> FitEndEvent:
    """How the fit ended: planned and run epochs, and who stopped it early, where anyone did."""
    stopped_by = tuple(type(c).__name__ for c in callbacks if int(getattr(c, "stopped_epoch", 0) or 0) > 0)
    planned = params.get("epochs") if isinstance(params.get("epochs"), int) else None
    return FitEndEvent(
        step=step,
        epochs_run=epochs_run,
        epochs_planned=planned,
        stopped_early=bool(getattr(model, "stop_training", False)),
        stopped_by=stopped_by,
        metric_classes=metric_classes(model),
    )


def metric_classes(model: Any) -> dict[str, str]:
    """Each compiled metric's name and what it resolved to, from `model.metrics` (built by the first
    step): Keras 3 lists them in its CompileMetrics, Keras 2 (tf_keras) wraps functions ('accuracy'
    under MSE is exact equality there). {} where the model has none or they cannot be read."""
    found: dict[str, str] = {}
    try:
        for metric in model.metrics:
            inner = getattr(metric, "metrics", None)  # a container's (Keras 3's CompileMetrics, maybe empty)
            container = type(metric).__name__ == "CompileMetrics"
            for leaf in inner if isinstance(inner, (list, tuple)) and (inner or container) else [metric]:
                name = getattr(leaf, "name", None)
                if not isinstance(name, str) or name == "loss" or name.endswith("_loss"):
                    continue
                wrapped = getattr(getattr(leaf, "_fn", None), "__name__", None)  # MeanMetricWrapper
                kind = type(leaf).__name__
                found[name] = wrapped if kind == "MeanMetricWrapper" and wrapped else kind
    except Exception:  # (a custom metric container): nothing recorded, compare goes by name
        return {}
    return found


def _bool_or_none(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def describe_loss(loss: Any) -> str | None:
    """The compiled loss as run_info names it: its string, or its name, or its class."""
    if loss is None:
        return None
    if isinstance(loss, str):
        return loss
    if isinstance(loss, functools.partial):
        return describe_loss(loss.func)
    name = getattr(loss, "name", None)
    if name == "loss_function_wrapper" and callable(getattr(loss, "fn", None)):
        return describe_loss(loss.fn)  # Keras' wrapper around a function: the function is the loss
    return name or getattr(loss, "__name__", None) or type(loss).__name__


def planned_end_step(base_step: int, params: dict[str, Any]) -> int | None:
    """The step the fit ends at if it runs all its epochs; None where fit does not know its steps
    per epoch (a generator without `steps_per_epoch`)."""
    epochs, steps = params.get("epochs"), params.get("steps")
    if not isinstance(epochs, int) or not isinstance(steps, int) or steps <= 0:
        return None
    return base_step + epochs * steps


def epoch_values(logs: dict[str, Any]) -> dict[str, float]:
    """The numbers among an epoch's logs (losses, metrics; not arrays or strings)."""
    return {key: float(value) for key, value in logs.items() if _is_number(value)}


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return np.ndim(value) == 0
