"""Labels against the loss and the last layer, on the first batch: the encoding each Keras loss
defines for its targets, and the range each output activation can produce. Returns plain events;
the read-side rules `label_problem` and `output_loss_mismatch` explain them."""

from __future__ import annotations

import keras
import numpy as np

from tb_trainhealth.callback.frameworks.which_keras import keras_of
from tb_trainhealth.contract.events import LintEvent
from tb_trainhealth.contract.vocab import REGRESSION_LOSSES, LintCheck, LossKind

# What each last-layer activation can output (None: unbounded on that side).
OUTPUT_RANGES: dict[str, tuple[float | None, float | None]] = {
    "sigmoid": (0.0, 1.0),
    "softmax": (0.0, 1.0),
    "tanh": (-1.0, 1.0),
    "relu": (0.0, None),
    "softplus": (0.0, None),
    "elu": (-1.0, None),
}


# categorical_crossentropy compares each row with a distribution over the classes: rows whose sum is
# off 1 by more than this (round-off and label smoothing sum to 1), in at least this share of the
# first batch's rows, are multi-label targets (several 1s) or unlabelled rows (all 0s).
ROW_SUM_TOLERANCE = 1e-3
ROWS_OFF_SHARE = 0.01
# mean_absolute_percentage_error divides each error by max(|target|, 1e-7): targets this close to 0,
# in ROWS_OFF_SHARE of the first batch or more, make the loss about them alone.
PERCENTAGE_ZERO = 1e-6


def is_integral(values: np.ndarray) -> bool:
    return values.size > 0 and np.issubdtype(values.dtype, np.number) and bool(np.all(np.mod(values, 1) == 0))


def ignore_class_of(model: keras.Model) -> int | None:
    """The label a sparse cross-entropy skips (`ignore_class=`, e.g. 255 for unlabelled pixels)."""
    loss = getattr(model, "loss", None)
    value = loss.get_config().get("ignore_class") if isinstance(loss, keras_of(model).losses.Loss) else None
    return value if isinstance(value, int) else None


def check_labels(
    loss: LossKind, units: int | None, labels: np.ndarray, ignore_class: int | None = None
) -> list[LintEvent]:
    """Labels that do not fit the loss (each check as Keras' losses define their targets)."""
    if labels.size == 0 or not np.issubdtype(labels.dtype, np.number):
        return []
    if ignore_class is not None and loss == LossKind.SPARSE_CATEGORICAL_CROSSENTROPY:
        labels = labels[labels != ignore_class]
        if labels.size == 0:
            return []
    low, high = float(np.min(labels)), float(np.max(labels))

    def found(check: LintCheck, classes: int | None = None) -> list[LintEvent]:
        shape = tuple(int(n) for n in labels.shape)
        return [
            LintEvent(
                0, check, loss=loss, units=units, label_min=low, label_max=high, label_shape=shape, classes=classes
            )
        ]

    one_column = labels.ndim == 1 or labels.shape[-1] == 1
    if loss == LossKind.MEAN_ABSOLUTE_PERCENTAGE_ERROR:
        zero = float(np.mean(np.abs(labels) < PERCENTAGE_ZERO))
        if zero >= ROWS_OFF_SHARE:  # each such error is divided by ~1e-7: it drowns every other
            return [LintEvent(0, LintCheck.ZERO_TARGETS_FOR_PERCENTAGE, loss=loss, units=units, share=zero)]
    if loss == LossKind.POISSON and low < 0:  # (rates of counts: y_pred - y * log(y_pred) has no floor for y < 0)
        return [
            LintEvent(
                0,
                LintCheck.NEGATIVE_TARGETS_FOR_POISSON,
                loss=loss,
                units=units,
                label_min=low,
                label_max=high,
                share=float(np.mean(labels < 0)),
            )
        ]
    if loss == LossKind.CATEGORICAL_CROSSENTROPY and (units or 0) > 1 and one_column and is_integral(labels):
        return found(LintCheck.INTEGER_LABELS_FOR_CATEGORICAL)
    # One-hot rows are as wide as the output; sparse labels of sequences or images also have
    # extra axes, but their last axis is time or width.
    if (
        loss == LossKind.CATEGORICAL_CROSSENTROPY
        and (units or 0) > 1
        and labels.ndim >= 2
        and labels.shape[-1] == units
    ):
        rows = labels.reshape(-1, units).astype(np.float64)
        off = np.abs(rows.sum(axis=1) - 1) > ROW_SUM_TOLERANCE
        if off.mean() >= ROWS_OFF_SHARE:  # multi-hot rows (or empty ones): not a distribution over classes
            most = int(np.max(np.count_nonzero(rows > 0.5, axis=1)))
            return [
                LintEvent(
                    0,
                    LintCheck.ROWS_NOT_ONE_CLASS,
                    loss=loss,
                    units=units,
                    label_shape=tuple(int(n) for n in labels.shape),
                    share=float(off.mean()),
                    classes=most,
                )
            ]
    sparse = loss == LossKind.SPARSE_CATEGORICAL_CROSSENTROPY
    if sparse and np.issubdtype(labels.dtype, np.floating) and not is_integral(labels):
        # The sparse loss casts labels to integer class ids: 0.3 and 0.9 both become class 0.
        classes = int(np.unique(np.floor(labels[np.isfinite(labels)])).size)
        return found(LintCheck.FRACTIONAL_SPARSE_LABELS, classes)
    if sparse and labels.ndim >= 2 and labels.shape[-1] == units:
        rows_one_hot = is_integral(labels) and low >= 0 and high <= 1 and np.all(labels.sum(axis=-1) == 1)
        if rows_one_hot:
            return found(LintCheck.ONEHOT_LABELS_FOR_SPARSE)
    if sparse and units and (high >= units or low < 0):
        return found(LintCheck.LABEL_OUT_OF_RANGE)
    if loss == LossKind.BINARY_CROSSENTROPY and (low < 0 or high > 1):
        classes = int(high) + 1 if is_integral(labels) and low >= 0 else None
        return found(LintCheck.LABELS_OUTSIDE_UNIT_INTERVAL, classes)
    return []


def check_output_range(loss: LossKind, activation: str, layer: str, targets: np.ndarray) -> list[LintEvent]:
    """Regression targets the last layer's activation cannot produce."""
    if loss not in REGRESSION_LOSSES or activation not in OUTPUT_RANGES or targets.size == 0:
        return []
    low, high = OUTPUT_RANGES[activation]
    target_low, target_high = float(np.min(targets)), float(np.max(targets))
    below = low is not None and target_low < low - 1e-6
    above = high is not None and target_high > high + 1e-6
    if not (below or above):
        return []
    return [
        LintEvent(
            0,
            LintCheck.TARGETS_OUT_OF_OUTPUT_RANGE,
            loss=loss,
            layer=layer,
            activation=activation,
            output_range=(low, high),
            label_min=target_low,
            label_max=target_high,
        )
    ]
