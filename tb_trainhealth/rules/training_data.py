"""`label_problem`: labels that cannot teach the model as given.

From the callback's first-batch lint events (labels vs the loss, sampled class
counts) and from the run's own curves: a cross-entropy loss below zero
(only possible with labels outside their range) and a validation accuracy near zero
while training accuracy is high (validation classes never seen in training, e.g.
`validation_split` on class-sorted data). From the recorded data settings (`label_data`): class
shares unlike the validation labels', and inputs repeated with other labels. Also
`constant_baseline`, the loss of a model that ignores its input, which the plateau rule uses too.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import LintEvent
from tb_trainhealth.contract.vocab import PROBABILISTIC_LOSSES, LintCheck, LossKind
from tb_trainhealth.findings import Evidence, Fact, Finding, Fix, Severity
from tb_trainhealth.rules.constant_yardstick import beats_constant, constant_baseline
from tb_trainhealth.rules.fact_text import LINT_NOT_FACTS, event_facts
from tb_trainhealth.rules.label_data import class_shares_differ, conflicting_duplicates
from tb_trainhealth.series_math import finite_part
from tb_trainhealth.signals import RunSignals, Series

# Cross-entropy cannot go below 0; allow float round-off.
NEGATIVE_LOSS = -1e-4
# Validation accuracy this far below chance (1/K), with training accuracy at least
# TRAINED_ACCURACY: the validation classes were never in training.
BELOW_CHANCE = 0.5
TRAINED_ACCURACY = 0.6
MIN_EPOCHS_BELOW_CHANCE = 2
UNKNOWN_CLASSES_FLOOR = 0.05

SHUFFLE_SPLIT_FIX = Fix(
    "Shuffle before splitting (Keras' validation_split takes the last rows, before any shuffling), "
    "or split with stratification.",
    "from sklearn.model_selection import train_test_split\n"
    "x_train, x_val, y_train, y_val = train_test_split(x, y, test_size=0.2, stratify=y, random_state=0)\n"
    "model.fit(x_train, y_train, validation_data=(x_val, y_val), ...)",
)
SPARSE_LOSS = "keras.losses.SparseCategoricalCrossentropy(from_logits=True)  # y like [2, 0, 1]"

_LABEL_CHECKS: dict[LintCheck, tuple[str, str, tuple[Fix, ...], Severity]] = {
    LintCheck.INTEGER_LABELS_FOR_CATEGORICAL: (
        "Integer class labels given to categorical_crossentropy",
        "The labels are class ids (shape {label_shape}, values {label_min:g}-{label_max:g}), but "
        "categorical_crossentropy expects one-hot rows of {units} values.",
        (
            Fix("Use the sparse loss, which takes class ids.", SPARSE_LOSS),
            Fix("Or one-hot encode the labels.", "y = keras.utils.to_categorical(y, num_classes={units})"),
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
            ),
            Fix("Or turn the rows into class ids.", "y = np.argmax(y, axis=-1)"),
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
            ),
            Fix(
                "Or map the labels to 0..K-1 (e.g. labels starting at 1).",
                "classes, y = np.unique(y, return_inverse=True)",
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
            ),
            Fix(
                "Regression targets: a linear output and a regression loss.",
                "keras.layers.Dense(1)  # with loss='mse'",
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
            ),
            Fix(
                "Two classes coded differently (e.g. -1/1 or 1/2): map them to 0/1.",
                "y = (y == y.max()).astype('float32')",
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
            ),
            Fix(
                "Regression with zeros among the targets: an absolute or squared error.",
                'model.compile(loss="mae")  # or "mse", or keras.losses.Huber()',
            ),
        ),
        Severity.WARNING,
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
            ),
        ),
        Severity.WARNING,
    ),
}


def _lint(run: RunSignals, checks: Collection[LintCheck]) -> list[LintEvent]:
    return run.first_of_each_check(LintEvent, checks)


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


def _label_lint_findings(run: RunSignals) -> list[Finding]:
    findings = []
    for event in _lint(run, _LABEL_CHECKS):
        title, detail, fixes, severity = _LABEL_CHECKS[event.check]
        findings.append(
            Finding(
                code="label_problem",
                severity=severity,
                step=event.step,
                title=_format(title, event),
                detail=_format(detail, event),
                evidence=Evidence((), facts=event_facts(event, LINT_NOT_FACTS), check=event.check.value),
                fixes=tuple(Fix(_format(f.text, event), _format(f.code, event)) for f in fixes),
            )
        )
    return findings


def _negative_loss(run: RunSignals) -> list[Finding]:
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
            code="label_problem",
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


def validation_never_seen(run: RunSignals) -> list[Finding]:
    train, val = run.get(sig.EPOCH_ACCURACY), run.get(sig.EPOCH_VAL_ACCURACY)
    if train is None or val is None:
        return []
    units = next((e.units for e in _lint(run, {LintCheck.LABEL_STATISTICS})), None)
    classes = units if units is not None and units > 1 else None
    # Without the number of classes, only a validation accuracy near zero counts.
    floor = BELOW_CHANCE / classes if classes else UNKNOWN_CLASSES_FLOOR
    common, train_at, val_at = np.intersect1d(train.steps, val.steps, return_indices=True)
    bad = (val.values[val_at] <= floor) & (train.values[train_at] >= TRAINED_ACCURACY)
    if bad.sum() < MIN_EPOCHS_BELOW_CHANCE or not bad[-1]:
        return []
    step = int(common[np.argmax(bad)])
    return [
        Finding(
            code="label_problem",
            severity=Severity.CRITICAL,
            step=step,
            title=(
                f"Validation accuracy {val.values[val_at][-1]:.1%} while training accuracy is "
                f"{train.values[train_at][-1]:.1%}: validation classes never seen in training"
            ),
            detail=(
                f"Validation accuracy stays below {floor:.1%} "
                + (f"(half of chance for {classes} classes) " if classes else "")
                + f"for "
                f"{int(bad.sum())} epochs while training accuracy is high. The model is not overfitting: it "
                "never saw the validation classes. The classic cause is validation_split on data sorted by "
                "class (Keras takes the last rows as validation, before shuffling)."
            ),
            evidence=Evidence((sig.EPOCH_ACCURACY, sig.EPOCH_VAL_ACCURACY), step, int(common[-1])),
            fixes=(SHUFFLE_SPLIT_FIX,),
        )
    ]


# Labels that do not belong to their inputs (x and y shuffled separately): validation accuracy
# never more than CHANCE_MARGIN above chance (between guessing by the class frequencies, sum p^2,
# and always answering the majority class; 1/K without class counts), its median at chance,
# at least MIN_CHANCE_EPOCHS of them, while training accuracy ends at least MEMORISED above
# chance (the model memorises the training pairs). Measured (`python bench/rule_zoo.py --only
# shuffled`, seeds 0-1): broken MLP and CNN runs (160 validation samples) never go more than
# 0.01 above the majority share, one epoch down to 0.16 (4 classes), while training accuracy
# climbs to 0.96-1.0; the healthy twins' validation accuracy is 0.29+ above chance after their
# first epoch, the overfitting scenario's 0.6 above it.
CHANCE_MARGIN = 0.07
MIN_CHANCE_EPOCHS = 4
MEMORISED = 0.15
# Without a constant prediction's loss (an unknown loss), a chance band (sum p^2 to max p) at most
# this wide is judged on its own.
NARROW_CHANCE_BAND = 0.1
# A model that memorises slowly (a CNN on shuffled labels, 25 epochs) reaches less: training
# accuracy MEMORISED_SLOWLY above chance is enough where the losses confirm it, the training loss
# at least LOSS_MEMORISED below the constant prediction's while the validation loss never beats
# it. Then validation accuracy below chance counts too (predicting the training prior's classes on
# another mix). Measured (`python bench/learn_less_zoo.py --only labels_shuffled_cnn --seeds 3`):
# seed 1 ends at training accuracy 14.6 points above chance, its loss 8% below the prior's entropy,
# validation accuracy 2-18% (median 9%) with its loss rising from 1.40 to 1.63, where overfitting
# was named; the twins' validation loss beats the entropy from the first epoch (0.98-1.18 vs 1.39).
MEMORISED_SLOWLY = 0.10
LOSS_MEMORISED = 0.05

PAIRING_FIXES = (
    Fix(
        "Shuffle inputs and labels together (one permutation for both), or let fit shuffle.",
        "order = np.random.permutation(len(x))\nx, y = x[order], y[order]  # never shuffle x and y separately",
    ),
    Fix(
        "Check a few pairs by eye: do the labels belong to the inputs?",
        "for i in range(5): print(y_train[i], x_train[i][:8])  # or plt.imshow(x_train[i]); plt.title(y_train[i])",
    ),
    Fix(
        "tf.data: zip datasets that keep the same order (shuffle after zipping, not each side).",
        "ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x))  # not zip(x_ds.shuffle(), y_ds.shuffle())",
    ),
)


def chance_band(run: RunSignals) -> tuple[float, float, str] | None:
    """The accuracy band of a model that learned nothing about the inputs: (low, high, how). Between
    guessing by the label frequencies (sum of p squared) and always answering the majority class."""
    stats = next(iter(_lint(run, {LintCheck.LABEL_STATISTICS})), None)
    if stats is None:
        return None
    if stats.class_counts and sum(stats.class_counts) > 0:
        p = np.asarray(stats.class_counts, np.float64)
        p = p / p.sum()
        low, high = float(np.square(p).sum()), float(p.max())
        return low, high, f"{low:.1%}-{high:.1%} for these class frequencies"
    if stats.units is not None and stats.units > 1:
        return 1.0 / stats.units, 1.0 / stats.units, f"1/{stats.units}"
    if stats.loss == LossKind.BINARY_CROSSENTROPY and stats.mean is not None and 0 < stats.mean < 1:
        high = max(stats.mean, 1 - stats.mean)
        low = stats.mean**2 + (1 - stats.mean) ** 2
        return low, high, f"{low:.1%}-{high:.1%} for a {stats.mean:.0%} positive rate"
    return None


def _epochs_of_both(train: Series, val: Series) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(epochs, training values, validation values) where both were logged, all finite, over at
    least MIN_CHANCE_EPOCHS; else None."""
    common, train_at, val_at = np.intersect1d(train.steps, val.steps, return_indices=True)
    train_values, val_values = train.values[train_at], val.values[val_at]
    if len(common) < MIN_CHANCE_EPOCHS or not (np.isfinite(train_values).all() and np.isfinite(val_values).all()):
        return None
    return common, train_values, val_values


def labels_unrelated(run: RunSignals) -> list[Finding]:
    train, val = run.get(sig.EPOCH_ACCURACY), run.get(sig.EPOCH_VAL_ACCURACY)
    if train is None or val is None:
        return labels_unrelated_by_loss(run)
    chance = chance_band(run)
    if chance is None:
        return []
    low, high, how = chance
    aligned = _epochs_of_both(train, val)
    if aligned is None:
        return []
    common, train_values, val_values = aligned
    if not (val_values <= high + CHANCE_MARGIN).all():
        return []  # never above chance is what counts
    # On imbalanced classes, accuracy near the majority share is also what a weak real model gets:
    # the validation loss tells them apart (a model that learned anything that carries over beats
    # the constant prediction's loss, the prior's entropy, at some epoch). Without that baseline,
    # only a narrow chance band (near-balanced classes) is judged.
    baseline = constant_baseline(run)
    val_loss, train_loss = run.get(sig.EPOCH_VAL_LOSS), run.get(sig.EPOCH_LOSS)
    memorising = False
    if baseline is not None and val_loss is not None and np.isfinite(val_loss.values).any():
        best = float(np.nanmin(val_loss.values))
        if beats_constant(best, baseline[0]):
            return []
        loss_note = f" Validation loss never beats {baseline[0]:.4g}, {baseline[1]} (best {best:.4g})."
        memorising = bool(
            train_loss is not None and len(train_loss) and train_loss.values[-1] <= (1 - LOSS_MEMORISED) * baseline[0]
        )
    elif high - low <= NARROW_CHANCE_BAND:
        loss_note = ""
    else:
        return []
    if memorising:
        at_chance, memorised = True, train_values[-1] >= high + MEMORISED_SLOWLY
    else:  # below chance, small validation sets wander (160 samples: 0.16 for 4 classes): the median
        at_chance, memorised = np.median(val_values) >= low - CHANCE_MARGIN, train_values[-1] >= high + MEMORISED
    if not (at_chance and memorised):
        return []
    first, last = int(common[0]), int(common[-1])
    return [
        Finding(
            code="label_problem",
            severity=Severity.CRITICAL,
            step=first,
            title=(
                f"Labels do not belong to their inputs: validation accuracy never above chance (best "
                f"{val_values.max():.1%}) while training accuracy climbs to {train_values[-1]:.1%}"
            ),
            detail=(
                f"Validation accuracy is never more than {CHANCE_MARGIN:.0%} above chance, {how}, in all {len(common)} "
                f"epochs (from {val_values[0]:.1%} to {val_values[-1]:.1%}), while training accuracy rises from "
                f"{train_values[0]:.1%} to {train_values[-1]:.1%}. The model is not overfitting a real signal: "
                "nothing it learns carries over to new samples from the first epoch on, so it can only be memorising "
                "the training pairs. Inputs and labels that were shuffled (or sorted, filtered, augmented) "
                "separately do this." + loss_note
            ),
            evidence=Evidence((sig.EPOCH_ACCURACY, sig.EPOCH_VAL_ACCURACY), first, last),
            fixes=PAIRING_FIXES,
        )
    ]


# Without an accuracy metric, the losses alone: a classification loss whose validation value never
# beats the constant prediction's (VAL_LOSS_TOLERANCE) over MIN_CHANCE_EPOCHS or more epochs, while
# the training loss ends LOSS_MEMORISED_ALONE below it (twice LOSS_MEMORISED: no accuracy confirms it).
# Measured (`python bench/labels_without_accuracy.py` on the kept learn-less zoo, seeds 0-1, and the
# healthy sweep, accuracy removed): 0 of 129 healthy runs; shuffled labels (MLP), one-class and thinned
# training labels found, the slow CNN memoriser (8% below) not; healthy validation losses beat the
# constant prediction from their first epoch.
LOSS_MEMORISED_ALONE = 0.10


def labels_unrelated_by_loss(run: RunSignals) -> list[Finding]:
    stats = next(iter(_lint(run, {LintCheck.LABEL_STATISTICS})), None)
    baseline = constant_baseline(run)
    train, val = run.get(sig.EPOCH_LOSS), run.get(sig.EPOCH_VAL_LOSS)
    if stats is None or stats.loss not in PROBABILISTIC_LOSSES or baseline is None or train is None or val is None:
        return []
    aligned = _epochs_of_both(train, val)
    if aligned is None:
        return []
    common, train_values, val_values = aligned
    entropy, how = baseline
    best_val, last_train = float(val_values.min()), float(train_values[-1])
    if beats_constant(best_val, entropy) or last_train > (1 - LOSS_MEMORISED_ALONE) * entropy:
        return []
    first, last = int(common[0]), int(common[-1])
    return [
        Finding(
            code="label_problem",
            severity=Severity.WARNING,
            step=first,
            title=(
                f"Nothing learned carries over to validation: its loss never beats the constant prediction "
                f"({entropy:.4g}) while training loss falls to {last_train:.4g}"
            ),
            detail=(
                f"Predicting the label frequencies for every input costs {entropy:.4g}, {how}. In all {len(common)} "
                f"epochs the validation loss stays at or above that (best {best_val:.4g}), while the training loss "
                f"falls {1 - last_train / entropy:.0%} below it: the model memorises the training pairs and nothing "
                "it learns carries over to new samples. Labels that do not belong to their inputs (shuffled, "
                "sorted or augmented apart from them) do this, and so do training labels of another class mix "
                "than the validation labels (a filter or join). Add metrics=['accuracy'] to compile() for a "
                "firmer diagnosis."
            ),
            evidence=Evidence((sig.EPOCH_LOSS, sig.EPOCH_VAL_LOSS), first, last),
            fixes=(PAIRING_FIXES[0], MIX_FIXES[0], PAIRING_FIXES[1]),
        )
    ]


def check_label_problem(run: RunSignals) -> list[Finding]:
    found = _label_lint_findings(run) + _negative_loss(run) + validation_never_seen(run)
    first = found or labels_unrelated(run) or class_mix_differs(run) or class_shares_differ(run)
    return first + conflicting_duplicates(run)


# Training labels dominated by one class (at least DOMINANT_SHARE of them, from the label statistics)
# while the validation accuracy stays at least MIX_GAP below that share at every epoch, training
# accuracy at or above it: on a validation set with the training set's class mix, answering the
# majority class alone scores the share, so a model that fits its training labels cannot score
# far below it at its best. The validation set holds another class mix: a filter or join bug
# dropped classes from training. Measured (`bench/learn_less_zoo.py` labels_one_class): 96% class 0
# in training, validation accuracy 0.36-0.61 (35+ points below) while training accuracy reaches 0.98;
# imbalanced healthy runs (rule_zoo class_weighted, the sweep's imbalanced configs) score within a few
# points of the share or above it.
DOMINANT_SHARE = 0.7
MIX_GAP = 0.25

MIX_FIXES = (
    Fix(
        "Compare the class counts of the training and validation labels: a filter or join dropped classes.",
        "print(np.unique(y_train, return_counts=True), np.unique(y_val, return_counts=True))",
    ),
    SHUFFLE_SPLIT_FIX,
)


def _training_shares(run: RunSignals) -> np.ndarray | None:
    stats = next(iter(_lint(run, {LintCheck.LABEL_STATISTICS})), None)
    if stats is not None and stats.class_counts and sum(stats.class_counts) > 0:
        counts = np.asarray(stats.class_counts, np.float64)
        return counts / counts.sum()
    if stats is not None and stats.loss == LossKind.BINARY_CROSSENTROPY and stats.mean is not None:
        return np.array([1 - stats.mean, stats.mean]) if 0 <= stats.mean <= 1 else None
    return None


def class_mix_differs(run: RunSignals) -> list[Finding]:
    train, val = run.get(sig.EPOCH_ACCURACY), run.get(sig.EPOCH_VAL_ACCURACY)
    shares = _training_shares(run)
    if train is None or val is None or shares is None or len(shares) < 2:
        return []
    top, share = int(np.argmax(shares)), float(np.max(shares))
    val_values = finite_part(val).values
    if share < DOMINANT_SHARE or len(val_values) < MIN_EPOCHS_BELOW_CHANCE:
        return []
    best_val, train_last = float(np.max(val_values)), float(train.values[-1])
    if best_val > share - MIX_GAP or train_last < share:
        return []
    first, last = int(val.steps[0]), int(val.steps[-1])
    return [
        Finding(
            code="label_problem",
            severity=Severity.WARNING,
            step=first,
            title=(
                f"Training labels are {share:.0%} class {top}, but validation accuracy never gets near that "
                f"(best {best_val:.1%}): validation holds another class mix"
            ),
            detail=(
                f"Class {top} holds {share:.1%} of the training labels sampled. Answering class {top} for every "
                f"sample would score about {share:.0%} on data with that mix, and training accuracy reaches "
                f"{train_last:.1%}, yet validation accuracy is at most {best_val:.1%} over {len(val_values)} epochs. "
                "The validation labels have other class shares than the training labels: a filter, join or "
                "sampling step dropped most of the other classes from the training set, so the model barely "
                "learns them."
            ),
            evidence=Evidence(
                (sig.EPOCH_ACCURACY, sig.EPOCH_VAL_ACCURACY),
                first,
                last,
                facts=(Fact("training label shares", ", ".join(f"{p:.1%}" for p in shares[:10])),),
            ),
            fixes=MIX_FIXES,
        )
    ]
