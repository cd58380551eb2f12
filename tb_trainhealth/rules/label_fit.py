"""`label_problem` from the first batches: labels that do not fit the loss as given.

The callback's label lint (`callback/lint/label_lint.py`) records each mismatch it finds (integer
labels for a one-hot loss, class ids beyond the output, multi-hot rows, targets outside what the
loss is defined for); this module says each in words with its fix. Also a cross-entropy recorded
below zero, which only labels outside their range make possible.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.events import LintEvent
from tb_trainhealth.contract.vocab import PROBABILISTIC_LOSSES, LintCheck
from tb_trainhealth.findings import (
    ADD_SHUFFLE,
    CHANGE_LABELS,
    CHANGE_LOSS,
    CHANGE_OUTPUT,
    SCALE_TARGETS,
    Evidence,
    Finding,
    Fix,
    Severity,
)
from tb_trainhealth.rules.fact_text import LINT_NOT_FACTS, event_facts
from tb_trainhealth.series_math import finite_part
from tb_trainhealth.signals import RunSignals

# Cross-entropy cannot go below 0; allow float round-off.
NEGATIVE_LOSS = -1e-4

SPARSE_LOSS = "keras.losses.SparseCategoricalCrossentropy(from_logits=True)  # y like [2, 0, 1]"

_LABEL_CHECKS: dict[LintCheck, tuple[str, str, tuple[Fix, ...], Severity]] = {
    LintCheck.INTEGER_LABELS_FOR_CATEGORICAL: (
        "Integer class labels given to categorical_crossentropy",
        "The labels are class ids (shape {label_shape}, values {label_min:g}-{label_max:g}), but "
        "categorical_crossentropy expects one-hot rows of {units} values.",
        (
            Fix("Use the sparse loss, which takes class ids.", SPARSE_LOSS, intents=(CHANGE_LOSS,)),
            Fix(
                "Or one-hot encode the labels.",
                "y = keras.utils.to_categorical(y, num_classes={units})",
                intents=(CHANGE_LABELS,),
            ),
        ),
        Severity.CRITICAL,
    ),
    LintCheck.ONEHOT_LABELS_FOR_SPARSE: (
        "One-hot labels given to sparse_categorical_crossentropy",
        "The labels are one-hot rows (shape {label_shape}), but the sparse loss expects one class id per sample.",
        (
            Fix(
                "Use the categorical loss for one-hot labels.",
                "keras.losses.CategoricalCrossentropy(from_logits=True)",
                intents=(CHANGE_LOSS,),
            ),
            Fix("Or turn the rows into class ids.", "y = np.argmax(y, axis=-1)", intents=(CHANGE_LABELS,)),
        ),
        Severity.CRITICAL,
    ),
    LintCheck.LABEL_OUT_OF_RANGE: (
        "Class ids outside the {units} output units",
        "Labels range {label_min:g}-{label_max:g}, but the last layer has {units} units (ids 0-{max_id}). "
        "On CPU this crashes; on GPU it silently gives NaN or garbage losses.",
        (
            Fix(
                "Give the last layer one unit per class.",
                "keras.layers.Dense(int(y.max()) + 1)  # with SparseCategoricalCrossentropy(from_logits=True)",
                intents=(CHANGE_OUTPUT,),
            ),
            Fix(
                "Or map the labels to 0..K-1 (e.g. labels starting at 1).",
                "classes, y = np.unique(y, return_inverse=True)",
                intents=(CHANGE_LABELS,),
            ),
        ),
        Severity.CRITICAL,
    ),
    LintCheck.FRACTIONAL_SPARSE_LABELS: (
        "Fractional labels given to sparse_categorical_crossentropy: cut to {classes} class id(s)",
        "The labels hold fractions ({label_min:g}-{label_max:g}), but the sparse loss casts each label to an "
        "integer class id, so they collapse into {classes} class id(s) (0.3 and 0.9 are both class 0): the "
        "model learns the wrong thing, or nothing. Labels scaled like inputs (y / 255) do this.",
        (
            Fix(
                "Give the sparse loss integer class ids (undo any scaling of y).",
                "y = np.round(y * 255).astype('int32')  # whatever scaling was applied to the labels",
                intents=(CHANGE_LABELS,),
            ),
            Fix(
                "Regression targets: a linear output and a regression loss.",
                "keras.layers.Dense(1)  # with loss='mse'",
                intents=(
                    CHANGE_OUTPUT,
                    CHANGE_LOSS,
                ),
            ),
        ),
        Severity.CRITICAL,
    ),
    LintCheck.LABELS_OUTSIDE_UNIT_INTERVAL: (
        "Labels outside [0, 1] given to binary_crossentropy",
        "binary_crossentropy needs targets in [0, 1]; these range {label_min:g}-{label_max:g}, which makes "
        "the loss meaningless (it can go negative).{classes_note}",
        (
            Fix(
                "Several classes: one softmax unit per class and the sparse loss.",
                "keras.layers.Dense(n_classes)  # logits\n" + SPARSE_LOSS,
                intents=(
                    CHANGE_OUTPUT,
                    CHANGE_LOSS,
                ),
            ),
            Fix(
                "Two classes coded differently (e.g. -1/1 or 1/2): map them to 0/1.",
                "y = (y == y.max()).astype('float32')",
                intents=(CHANGE_LABELS,),
            ),
        ),
        Severity.CRITICAL,
    ),
    LintCheck.ROWS_NOT_ONE_CLASS: (
        "Label rows are not one class each: multi-hot targets under categorical_crossentropy",
        "{share:.0%} of the first batch's label rows (shape {label_shape}) do not sum to 1 (up to {classes} "
        "classes marked in one row): categorical_crossentropy and a softmax share one unit of probability "
        "among the classes, so a sample with several labels can never be predicted right, and its loss "
        "never reaches 0. Several labels per sample is a multi-label task.",
        (
            Fix(
                "Multi-label: one sigmoid per class and binary cross-entropy.",
                "keras.layers.Dense(n_classes)  # logits\n"
                "loss = keras.losses.BinaryCrossentropy(from_logits=True)\n"
                "metrics = [keras.metrics.BinaryAccuracy(threshold=0.0)]",
                intents=(
                    CHANGE_OUTPUT,
                    CHANGE_LOSS,
                ),
            ),
            Fix(
                "One class per sample: keep one 1 per row.",
                "assert (y.sum(axis=1) == 1).all(), np.unique(y.sum(axis=1), return_counts=True)",
            ),
        ),
        Severity.WARNING,
    ),
    LintCheck.ZERO_TARGETS_FOR_PERCENTAGE: (
        "Targets of 0 under mean_absolute_percentage_error: the loss divides by them",
        "{share:.0%} of the first batch's targets are 0. MAPE divides each error by its target (Keras by "
        "max(|y|, 1e-7)), so one wrong prediction on a 0 target weighs ~1e7 times a wrong one elsewhere: the "
        "loss measures almost nothing but those, and the model cannot learn the task. 0/1 class labels are a "
        "classification task, not a percentage.",
        (
            Fix(
                "Class labels: a classification loss.",
                'model.compile(loss="binary_crossentropy", metrics=["accuracy"])  # sigmoid output; sparse CE for K',
                intents=(CHANGE_LOSS,),
            ),
            Fix(
                "Regression with zeros among the targets: an absolute or squared error.",
                'model.compile(loss="mae")  # or "mse", or keras.losses.Huber()',
                intents=(CHANGE_LOSS,),
            ),
        ),
        Severity.WARNING,
    ),
    LintCheck.NEGATIVE_TARGETS_FOR_POISSON: (
        "Negative targets under the poisson loss: it has no minimum for them",
        "{share:.0%} of the first batch's targets are below 0 (they range {label_min:g} to {label_max:g}). The "
        "poisson loss, y_pred - y * log(y_pred), is for counts and rates (y >= 0): for a negative y it falls "
        "without end as the prediction goes to 0, so the loss runs negative and the model learns nothing about "
        "those targets.",
        (
            Fix(
                "Signed real-valued targets: a linear output and a squared or absolute error.",
                'keras.layers.Dense(n_targets)  # linear\nmodel.compile(loss="mse")',
                intents=(
                    CHANGE_OUTPUT,
                    CHANGE_LOSS,
                ),
            ),
            Fix(
                "Counts: check how the targets were made; they must be >= 0.",
                "assert (y_train >= 0).all(), y_train.min()",
            ),
        ),
        Severity.CRITICAL,
    ),
    LintCheck.SINGLE_CLASS: (
        "Labels are (nearly) all one class",
        "{share:.1%} of the {labels} labels in the first {batches} batches are class {class}: the model can "
        "minimise the loss by always predicting it. Either the labels are broken, or the data is sorted by "
        "class and not shuffled.",
        (
            Fix("Check the class balance of what you feed fit().", "print(np.unique(y_train, return_counts=True))"),
            Fix(
                "Shuffle sorted data (numpy: fit shuffles by default; tf.data: shuffle before batch).",
                "dataset = dataset.shuffle(len_of_data).batch(32).prefetch(tf.data.AUTOTUNE)",
                intents=(ADD_SHUFFLE,),
            ),
        ),
        Severity.WARNING,
    ),
}


def _format(text: str, event: LintEvent) -> str:
    units = event.units or "K"
    classes = event.classes
    fields = {
        "label_shape": event.label_shape,
        "label_min": event.label_min or 0.0,
        "label_max": event.label_max or 0.0,
        "units": units,
        "max_id": units - 1 if isinstance(units, int) else "K-1",
        "classes_note": f" They look like {classes} class ids." if classes is not None and classes > 2 else "",
        "classes": "?" if classes is None else classes,
        "share": 1.0 if event.share is None else event.share,
        "labels": "?" if event.labels is None else event.labels,
        "batches": "?" if event.batches is None else event.batches,
        "class": "?" if event.label_class is None else event.label_class,
    }
    return text.format(**fields)


REAL_VALUED_TO_UNIT = Fix(
    "Real-valued targets are a regression: a linear output with mse on standardised targets (or, to keep the "
    "sigmoid, targets scaled into [0, 1]).",
    "keras.layers.Dense(1)  # linear output\nmodel.compile(optimizer=..., loss='mse')\n"
    "y_mean, y_std = y_train.mean(), y_train.std()\ny_train = (y_train - y_mean) / y_std  # predictions: pred * y_std + y_mean",
    (CHANGE_OUTPUT, CHANGE_LOSS, SCALE_TARGETS),
)


def _fitting(event: LintEvent, fixes: tuple[Fix, ...]) -> tuple[Fix, ...]:
    """Labels outside [0, 1]: the fix for what they are first (real values, two codes, class ids)."""
    if event.check is not LintCheck.LABELS_OUTSIDE_UNIT_INTERVAL:
        return fixes
    several, two = fixes
    if event.classes is None:
        return (REAL_VALUED_TO_UNIT, two)
    low, high = event.label_min, event.label_max
    two_codes = low is not None and high is not None and high - low == 1  # (1/2, -1/0: two values)
    return (two, several) if event.classes <= 2 or two_codes else (several, two)


def label_lint_findings(run: RunSignals) -> list[Finding]:
    findings = []
    for event in run.first_of_each_check(LintEvent, _LABEL_CHECKS):
        title, detail, fixes, severity = _LABEL_CHECKS[event.check]
        findings.append(
            Finding(
                code=Code.LABEL_PROBLEM,
                severity=severity,
                step=event.step,
                title=_format(title, event),
                detail=_format(detail, event),
                evidence=Evidence((), facts=event_facts(event, LINT_NOT_FACTS), check=event.check.value),
                fixes=tuple(
                    Fix(_format(f.text, event), _format(f.code, event), f.intents) for f in _fitting(event, fixes)
                ),
            )
        )
    return findings


def negative_loss(run: RunSignals) -> list[Finding]:
    loss_name = run.info.loss
    loss = run.get(sig.LOSS) or run.get(sig.EPOCH_LOSS)
    if loss_name not in PROBABILISTIC_LOSSES or loss is None:
        return []
    loss = finite_part(loss)
    below = np.flatnonzero(loss.values < NEGATIVE_LOSS)
    if below.size == 0:
        return []
    step = int(loss.steps[below[0]])
    return [
        Finding(
            code=Code.LABEL_PROBLEM,
            severity=Severity.CRITICAL,
            step=step,
            title=f"{loss_name} went negative ({loss.values[below[0]]:.3g} at {run.at(step)})",
            detail=(
                f"Cross-entropy is never below 0 for valid targets; {below.size} recorded values are. The labels "
                "are outside the range the loss is defined for (e.g. binary labels that are not 0/1, or "
                "probability targets that do not sum to 1)."
            ),
            evidence=Evidence((sig.LOSS if run.get(sig.LOSS) is not None else sig.EPOCH_LOSS,), step, step),
            fixes=_LABEL_CHECKS[LintCheck.LABELS_OUTSIDE_UNIT_INTERVAL][2],
        )
    ]
