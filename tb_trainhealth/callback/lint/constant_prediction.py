"""The yardstick every run carries: what the user's own loss scores on a model that ignores its
input and predicts one constant (the class frequencies, the targets' mean or median).

A run whose loss ends at or above it learned nothing a constant would not give (team issue
44). It is measured with the compiled loss itself, on the first batches' targets, so it holds
for strings, functions, `keras.losses` instances and custom losses alike, and for whatever
label encoding the run uses. Of several constants the lowest score is kept: a model can reach
every one of them through its output layer's bias alone (its weights at zero).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from tb_trainhealth.contract.vocab import CATEGORICAL_LOSSES, PROBABILISTIC_LOSSES, LossKind

# Targets kept for the yardstick: enough for its value to three digits, cheap to evaluate once.
MAX_ROWS = 4096
# Probabilities are clipped away from 0 and 1 (Keras' own epsilon): log(0) is not a score.
EPSILON = 1e-7


def constant_score(
    loss: Any,
    targets: np.ndarray,
    units: int | None,
    kind: LossKind | None,
    from_logits: bool | None,
    output_shape: tuple[int, ...] | None = None,
) -> tuple[float, str] | None:
    """(the loss of the best constant prediction, how it is made), or None where no constant
    fits the loss (a loss on several outputs, targets that are not numbers, a loss that fails).
    `output_shape`: the model's output per sample, where known: a regression's constant is shaped
    like it (a loss written for (n, 1) predictions fails on (n,) ones)."""
    if isinstance(loss, (dict, list, tuple)) or targets.size == 0 or not np.issubdtype(targets.dtype, np.number):
        return None
    if kind is None and not output_shape:
        return None  # a loss of the user's own, on an output of unknown shape: no constant is sure to fit
    targets = targets[:MAX_ROWS]
    scored = []
    for prediction, how in _candidates(targets, units, kind, bool(from_logits)):
        if output_shape and prediction.size == len(prediction) * int(np.prod(output_shape)):
            prediction = prediction.reshape((len(prediction), *output_shape))
        elif kind is None:
            continue  # not the model's output shape: a custom loss would score something else
        value = _evaluate(loss, targets, prediction)
        if value is not None:
            scored.append((value, how))
    return min(scored, key=lambda pair: pair[0]) if scored else None


def floor_score(
    loss: Any,
    targets: np.ndarray,
    kind: LossKind | None,
    from_logits: bool | None,
    output_shape: tuple[int, ...] | None = None,
) -> float | None:
    """What predicting the targets themselves scores, where that is not ~0: soft targets (label
    smoothing, probabilities, rescaled scores) under a binary or categorical cross-entropy, whose
    own entropy no model gets below. None for hard labels and every other loss."""
    if kind not in (LossKind.BINARY_CROSSENTROPY, LossKind.CATEGORICAL_CROSSENTROPY) or targets.size == 0:
        return None
    targets = np.asarray(targets[:MAX_ROWS], np.float64)
    finite = targets[np.isfinite(targets)]
    if not len(finite) or finite.min() < 0 or finite.max() > 1 or np.all((finite == 0) | (finite == 1)):
        return None
    p = np.clip(targets, EPSILON, 1 - EPSILON)
    if from_logits:
        p = np.log(p / (1 - p)) if kind == LossKind.BINARY_CROSSENTROPY else np.log(p)
    if output_shape and p.size == len(p) * int(np.prod(output_shape)):
        p = p.reshape((len(p), *output_shape))
    value = _evaluate(loss, targets, p)
    return value if value is not None and value > 0 else None


def _candidates(
    targets: np.ndarray, units: int | None, kind: LossKind | None, from_logits: bool
) -> list[tuple[np.ndarray, str]]:
    rows = len(targets)
    integral = bool(np.all(np.mod(targets[np.isfinite(targets)], 1) == 0))
    one_column = targets.ndim == 1 or targets.shape[-1] == 1
    candidates = []
    sparse = kind == LossKind.SPARSE_CATEGORICAL_CROSSENTROPY or (
        kind is None and (units or 0) > 1 and one_column and integral
    )
    if sparse and integral and targets.min() >= 0 and units and targets.max() < units:
        shares = np.bincount(targets.astype(np.int64).reshape(-1), minlength=units) / targets.size
        candidates.append((_probabilities(shares, rows, from_logits), "predicting the class frequencies"))
    elif kind in CATEGORICAL_LOSSES or kind == LossKind.BINARY_CROSSENTROPY or (kind is None and not one_column):
        shares = np.mean(targets.reshape(rows, -1), axis=0)
        if np.all((shares >= 0) & (shares <= 1)):
            binary = kind == LossKind.BINARY_CROSSENTROPY or (units == 1 and not sparse)
            how = "predicting the positive rate" if binary else "predicting the class frequencies"
            candidates.append((_probabilities(shares, rows, from_logits, binary).reshape(targets.shape), how))
    if kind not in PROBABILISTIC_LOSSES:
        flat = targets.reshape(rows, -1).astype(np.float64)
        for name, center in (("mean", np.nanmean(flat, axis=0)), ("median", np.nanmedian(flat, axis=0))):
            prediction = np.broadcast_to(center, flat.shape).reshape(targets.shape)
            candidates.append((prediction, f"predicting the targets' {name} ({_values(center)})"))
    return candidates


def _probabilities(shares: np.ndarray, rows: int, from_logits: bool, binary: bool = False) -> np.ndarray:
    p = np.clip(shares.astype(np.float64), EPSILON, 1 - EPSILON)
    if from_logits:
        p = np.log(p / (1 - p)) if binary else np.log(p)
    return np.broadcast_to(p, (rows, len(p))).copy()


def _values(center: np.ndarray) -> str:
    shown = ", ".join(f"{v:.4g}" for v in center[:3])
    return shown + (", ..." if len(center) > 3 else "")


def _evaluate(loss: Any, targets: np.ndarray, prediction: np.ndarray) -> float | None:
    """The loss as compile() would compute it (mean over samples); None where it fails. Like
    compile's loss wrapper, targets one rank short of a one-wide prediction get that axis
    ((n,) labels against (n, 1) outputs); class ids against class scores stay integers."""
    try:
        y_true = tf.constant(targets)
        if y_true.shape.rank == len(prediction.shape) - 1 and prediction.shape[-1] == 1:
            y_true = tf.expand_dims(y_true, -1)
        sparse = y_true.shape.rank < len(prediction.shape)
        if not (sparse and y_true.dtype.is_integer):
            y_true = tf.cast(y_true, tf.float32)
        value = loss(y_true, tf.constant(prediction, tf.float32))
        value = float(np.mean(np.asarray(value)))
    except Exception:  # a custom loss that wants other shapes or dtypes: no yardstick
        return None
    return value if np.isfinite(value) else None
