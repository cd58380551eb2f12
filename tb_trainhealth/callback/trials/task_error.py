"""One yardstick for every trial: the held-out error of the model's predictions over the error of a
constant prediction (1 = no better than predicting the label prior or the targets' mean, 0 =
perfect). It reads the targets, not the loss, so a trial that changes the loss, the output layer or
the targets' scale is judged on the same scale as one that changes the learning rate."""

from __future__ import annotations

import dataclasses

import numpy as np

# Targets that are whole numbers with at most this many values are classes.
MAX_CLASSES = 100


@dataclasses.dataclass(frozen=True)
class Task:
    classes: int | None  # None: regression
    one_hot: bool = False  # classes given as one-hot rows (categorical, not sparse, cross-entropy)

    @property
    def is_classification(self) -> bool:
        return self.classes is not None


def task_of(y: np.ndarray) -> Task:
    """Classes (ids, one-hot rows, or 0/1) or regression, from the targets alone."""
    y = np.asarray(y, dtype="float64")
    if y.ndim == 2 and y.shape[1] > 1:
        one_hot = np.all((y == 0) | (y == 1)) and np.all(y.sum(axis=1) == 1)
        return Task(int(y.shape[1]), one_hot=True) if one_hot else Task(None)
    flat = y.reshape(len(y), -1)[:, 0] if y.ndim > 1 else y
    if np.all(np.isfinite(flat)) and np.all(flat == np.round(flat)) and flat.min() >= 0:
        values = np.unique(flat)
        if len(values) <= MAX_CLASSES:
            return Task(max(2, int(values.max()) + 1))
    return Task(None)


def labels(y: np.ndarray) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] > 1:
        return y.argmax(axis=1)
    return y.reshape(len(y), -1)[:, 0].astype("int64")


def predicted_labels(pred: np.ndarray, task: Task, threshold: float) -> np.ndarray:
    """Classes read from outputs the usual way: argmax over several; one output thresholded (two
    classes) or rounded to a class id."""
    pred = pred.reshape(len(pred), -1)
    if pred.shape[1] > 1:
        return pred.argmax(axis=1)
    if task.classes == 2:
        return (pred[:, 0] > threshold).astype("int64")
    return np.clip(np.rint(pred[:, 0]), 0, (task.classes or 2) - 1).astype("int64")


def task_error(pred: np.ndarray, y: np.ndarray, task: Task, threshold: float = 0.5) -> float:
    """The error over a constant prediction's; inf for non-finite predictions."""
    pred = np.asarray(pred, dtype="float64")
    if not np.all(np.isfinite(pred)):
        return float("inf")
    if task.is_classification:
        truth = labels(y)
        wrong = float(np.mean(predicted_labels(pred, task, threshold) != truth))
        majority = float(np.bincount(truth).max()) / len(truth)
        return wrong / max(1.0 - majority, 1e-9)
    target = np.asarray(y, dtype="float64").reshape(len(y), -1)
    pred = pred.reshape(len(pred), -1)
    if pred.shape != target.shape:
        return float("inf")
    variance = target.var(axis=0)
    return float(np.mean(((pred - target) ** 2).mean(axis=0) / np.where(variance > 0, variance, 1.0)))


def noise(task: Task, y_held: np.ndarray, error: float) -> float:
    """The sampling error of `task_error` on these held-out rows (one standard error)."""
    n = len(y_held)
    if task.is_classification:
        truth = labels(y_held)
        majority = float(np.bincount(truth).max()) / n
        p = min(max(error * (1 - majority), 1e-3), 1 - 1e-3)
        return float(np.sqrt(p * (1 - p) / n) / max(1 - majority, 1e-9))
    return float(max(error, 0.05) * np.sqrt(2.0 / n))
