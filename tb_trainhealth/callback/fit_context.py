"""What the user's `fit()` already does: its data, its other callbacks, its optimizer's
learning rate and clipping, and how it ended. The rules use it so that no fix suggests what
is already there (EarlyStopping, clipnorm, a lower learning rate than the one in use).

Keras gives callbacks the model and `params`, not the data adapter nor the list of the other
callbacks; `fit()` keeps both in local variables, so we look for its frame on the stack.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from tb_trainhealth.contract.events import FitEndEvent
from tb_trainhealth.contract.run_info import CallbackInfo

MAX_DEPTH = 12


def fit_local(name: str) -> Any | None:
    """The local variable `name` of the nearest `fit` frame up the stack (None when not found)."""
    frame = inspect.currentframe()
    try:
        for _ in range(MAX_DEPTH):
            frame = frame.f_back if frame is not None else None
            if frame is None:
                return None
            if frame.f_code.co_name == "fit" and frame.f_locals.get(name) is not None:
                return frame.f_locals[name]
        return None
    finally:
        del frame


def fit_callbacks() -> list[Any]:
    """The callbacks of the `fit()` calling us (Keras' CallbackList holds them in `.callbacks`)."""
    callbacks = fit_local("callbacks")
    return list(getattr(callbacks, "callbacks", callbacks if isinstance(callbacks, list) else []))


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
    )


def _bool_or_none(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None
