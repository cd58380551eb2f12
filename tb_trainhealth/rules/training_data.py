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

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.vocab import PROBABILISTIC_LOSSES, LossKind
from tb_trainhealth.findings import ADD_SHUFFLE, CHANGE_LABELS, Evidence, Fact, Finding, Fix, Severity
from tb_trainhealth.rules.batch_order import batches_in_class_order
from tb_trainhealth.rules.label_data import class_shares_differ, conflicting_duplicates
from tb_trainhealth.rules.label_fit import label_lint_findings, negative_loss
from tb_trainhealth.series_math import finite_part
from tb_trainhealth.signals import RunSignals, Series
from tb_trainhealth.yardstick import beats_constant, constant_baseline, label_statistics

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
    intents=(ADD_SHUFFLE,),
)


def validation_never_seen(run: RunSignals) -> list[Finding]:
    train, val = run.get(sig.EPOCH_ACCURACY), run.get(sig.EPOCH_VAL_ACCURACY)
    if train is None or val is None:
        return []
    units = getattr(label_statistics(run), "units", None)
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
            code=Code.LABEL_PROBLEM,
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
        intents=(
            ADD_SHUFFLE,
            CHANGE_LABELS,
        ),
    ),
    Fix(
        "Check a few pairs by eye: do the labels belong to the inputs?",
        "for i in range(5): print(y_train[i], x_train[i][:8])  # or plt.imshow(x_train[i]); plt.title(y_train[i])",
    ),
    Fix(
        "tf.data: zip datasets that keep the same order (shuffle after zipping, not each side).",
        "ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x))  # not zip(x_ds.shuffle(), y_ds.shuffle())",
        intents=(
            ADD_SHUFFLE,
            CHANGE_LABELS,
        ),
    ),
)


def chance_band(run: RunSignals) -> tuple[float, float, str] | None:
    """The accuracy band of a model that learned nothing about the inputs: (low, high, how). Between
    guessing by the label frequencies (sum of p squared) and always answering the majority class."""
    stats = label_statistics(run)
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
            code=Code.LABEL_PROBLEM,
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
    stats = label_statistics(run)
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
            code=Code.LABEL_PROBLEM,
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
    found = label_lint_findings(run) + negative_loss(run) + validation_never_seen(run)
    first = found or labels_unrelated(run) or class_mix_differs(run) or class_shares_differ(run)
    return first + conflicting_duplicates(run) + batches_in_class_order(run)


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
    stats = label_statistics(run)
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
            code=Code.LABEL_PROBLEM,
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
