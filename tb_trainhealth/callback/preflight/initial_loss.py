"""What the loss of an untrained model should be, from its output layer and loss alone, and the
loss of the best constant prediction on the batch (what a model that ignores its input reaches).

An untrained classifier spreads its probability evenly: cross-entropy ln K over K softmax
outputs, ln 2 per sigmoid output, whatever the labels (label smoothing included: the
cross-entropy of a uniform prediction is ln K against any target distribution). A regression
output starts near 0, so MSE starts near E[y^2] and MAE near E|y| (Karpathy, "A Recipe for
Training Neural Networks", 2019: "verify loss @ init").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import tensorflow as tf

from tb_trainhealth.contract.vocab import CATEGORICAL_LOSSES, LossKind


def expected_initial_loss(
    loss: LossKind | None, outputs: int | None, y: Any, sample_weight: Any
) -> tuple[float, str] | None:
    """(loss, how it follows) for a model at initialisation, or None when no value is implied."""
    labels = _array(y)
    if loss is None or labels is None or labels.size == 0 or not np.issubdtype(labels.dtype, np.number):
        return None
    weight = _mean_weight(sample_weight)
    if loss in CATEGORICAL_LOSSES and outputs is not None and outputs >= 2:
        value, how = math.log(outputs), f"ln {outputs} = {math.log(outputs):.3g} for {outputs} classes"
    elif loss == LossKind.BINARY_CROSSENTROPY:
        value, how = math.log(2), "ln 2 = 0.693 for a binary output at 0.5"
    elif loss == LossKind.MEAN_SQUARED_ERROR:
        value = float(np.mean(np.square(labels, dtype=np.float64)))
        how = f"mean(y^2) = {value:.3g} for outputs near 0"
    elif loss == LossKind.MEAN_ABSOLUTE_ERROR:
        value = float(np.mean(np.abs(labels.astype(np.float64))))
        how = f"mean(|y|) = {value:.3g} for outputs near 0"
    else:
        return None
    if weight != 1.0:
        value, how = value * weight, f"{how}, times the mean sample weight {weight:.3g}"
    return value, how


def label_smoothing(model_loss: Any) -> float:
    """The loss's label_smoothing (0 for a string loss or a loss without one)."""
    try:
        value = model_loss.get_config().get("label_smoothing", 0.0)
    except AttributeError:
        return 0.0
    return float(value) if isinstance(value, (int, float)) else 0.0


def baseline_and_floor(
    loss: LossKind | None, outputs: int | None, y: Any, sample_weight: Any, smoothing: float = 0.0
) -> tuple[float, float] | None:
    """(baseline, floor) on this batch: the loss of the best constant prediction (no model that
    ignores its input does better: the entropy of the mean target, the targets' variance) and
    the loss of a perfect prediction (the targets' own entropy: above 0 with label smoothing or
    soft labels). None when the loss or labels are not understood."""
    labels = _array(y)
    if loss is None or labels is None or labels.size == 0 or not np.issubdtype(labels.dtype, np.number):
        return None
    weight = _mean_weight(sample_weight)
    if loss in CATEGORICAL_LOSSES:
        targets = _class_targets(loss, outputs, labels)
        if targets is None:
            return None
        targets = targets * (1 - smoothing) + smoothing / targets.shape[-1]
        return _entropy(targets.mean(axis=0)) * weight, float(np.mean([_entropy(t) for t in targets])) * weight
    columns = labels.reshape(len(labels), -1).astype(np.float64)
    if loss == LossKind.BINARY_CROSSENTROPY:
        if columns.min() < 0 or columns.max() > 1:
            return None
        columns = columns * (1 - smoothing) + smoothing / 2
        baseline = np.mean([_binary_entropy(np.array([p])) for p in columns.mean(axis=0)])
        return float(baseline) * weight, float(np.mean(_binary_entropy(columns))) * weight
    if loss == LossKind.MEAN_SQUARED_ERROR:
        return float(np.mean(np.var(columns, axis=0))) * weight, 0.0
    if loss == LossKind.MEAN_ABSOLUTE_ERROR:
        return float(np.mean(np.abs(columns - np.median(columns, axis=0)))) * weight, 0.0
    return None


def _class_targets(loss: LossKind, outputs: int | None, labels: np.ndarray) -> np.ndarray | None:
    """One target distribution per sample (rows), from class ids or one-hot / soft rows."""
    if outputs is None or outputs < 2:
        return None
    if loss == LossKind.CATEGORICAL_CROSSENTROPY and labels.shape[-1] == outputs:
        rows = labels.reshape(-1, outputs).astype(np.float64)
        return rows if rows.min() >= 0 else None
    ids = labels.reshape(-1)
    if not np.all(np.mod(ids, 1) == 0) or ids.min() < 0 or ids.max() >= outputs:
        return None
    return np.eye(outputs)[ids.astype(np.int64)]


def _binary_entropy(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return -(p * np.log(p) + (1 - p) * np.log(1 - p))


def _entropy(distribution: np.ndarray) -> float:
    p = distribution[distribution > 0] / distribution.sum() if distribution.sum() > 0 else distribution[:0]
    return float(-(p * np.log(p)).sum())


def _mean_weight(sample_weight: Any) -> float:
    weights = _array(sample_weight)
    return 1.0 if weights is None or weights.size == 0 else float(np.mean(weights))


def _array(value: Any) -> np.ndarray | None:
    if value is None or isinstance(value, (dict, list, tuple)):
        return None
    return value.numpy() if tf.is_tensor(value) else np.asarray(value)
