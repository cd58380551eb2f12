"""`label_problem` from the recorded data settings (`RunSettings`, written once per fit from the
in-memory arrays): training labels whose class shares differ from the validation labels', and
inputs that occur more than once with different labels. Each needs the run's curves to agree
before it speaks: a split whose shares differ on purpose, or a data set whose labels are noisy
by nature, still learns; a filter, join or merge bug shows in the accuracies.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.vocab import REGRESSION_LOSSES, LossKind
from tb_trainhealth.findings import Evidence, Fact, Finding, Fix, Severity
from tb_trainhealth.series_math import finite_part
from tb_trainhealth.signals import RunSignals, Series

# Class shares are a distribution: they sum to 1 within the writer's rounding (4 decimals per class).
SHARES_SUM_TOLERANCE = 0.01

# (a) Training and validation labels of other class shares (a filter or join that dropped or
# thinned classes on one side). Their total variation distance (half the summed absolute share
# differences: the share of validation labels that would have to change class to match) must be
# at least MIN_SHARE_DISTANCE and at least SAMPLING_TIMES what drawing both sets at random from one
# distribution gives (`sampling_distance`), and at the epoch of its best validation accuracy the
# model must score at least MIN_ACCURACY_GAP less on validation than on training. Measured
# (`bench/learn_less_zoo.py`, seeds 0-1): train_class_filtered_mlp 0.26 apart (class 3 missing),
# validation 0.25-0.26 below training; train_join_drops_classes_cnn 0.42-0.45 apart, 0.18-0.20
# below; train_positives_thinned_binary 0.37-0.38 apart, 0.22 below; their twins (random
# subsets of the same size) 0.02-0.05 apart, at most 1.2x sampling. A split that differs on purpose
# and learns every class (healthy_sweep's labels_balanced_training_natural_validation: 0.47 apart)
# is 0.003-0.012 below; a random split of 200 samples (labels_small_random_split_shares_differ):
# 0.09 apart against 0.12 by sampling alone, 0.1 below.
MIN_SHARE_DISTANCE = 0.15
SAMPLING_TIMES = 3.0
MIN_ACCURACY_GAP = 0.05
MIN_ACCURACY_EPOCHS = 3

SHARE_FIXES = (
    Fix(
        "Compare the class shares of what you pass as training and as validation data; a filter, join or "
        "merge that runs on one side only shows here.",
        "import numpy as np\n"
        "classes = int(max(y_train.max(), y_val.max())) + 1  # one-hot labels: y = y.argmax(-1) first\n"
        "print(np.round(np.bincount(y_train, minlength=classes) / len(y_train), 3))\n"
        "print(np.round(np.bincount(y_val, minlength=classes) / len(y_val), 3))  # should be close",
    ),
    Fix(
        "Filter or join the whole data set first, then split it at random, stratified by class.",
        "from sklearn.model_selection import train_test_split\n"
        "x_train, x_val, y_train, y_val = train_test_split(x, y, test_size=0.2, stratify=y, random_state=0)",
    ),
)

# (b) Inputs that occur more than once with different labels (a join that matched a row to
# several labels, a merge of two label sources). The duplicates must cap the training accuracy
# at most MAX_CEILING (at least 10% of the samples cannot be fitted by any model), the training
# accuracy must reach within CEILING_REACH of that cap (the cap is what holds it), and at least
# MIN_DISTINCT_SHARE of the inputs must be distinct: data made of a few repeated inputs (a handful
# of categorical features) has conflicting labels by nature, its Bayes error, not a bug.
# Measured (`bench/learn_less_zoo.py`, seeds 0-1): conflicting_duplicates_mlp/_cnn, 40-50% of the
# rows copied with another label, cap 0.67-0.71, training accuracy ends 0.04-0.06 below it
# (0.61-0.68) while validation accuracy is 0.88-0.92; their twins (copies with their own label)
# cap 1.0. Distinct share of those runs 0.67-0.71; the sweep's categorical data set: below 0.05.
MAX_CEILING = 0.9
CEILING_REACH = 0.12
MIN_DISTINCT_SHARE = 0.3

DUPLICATE_FIXES = (
    Fix(
        "Find the inputs that occur with more than one label (numpy), and drop or correct them.",
        "import numpy as np\n"
        "rows = x_train.reshape(len(x_train), -1)\n"
        "labels = y_train.argmax(-1) if y_train.ndim > 1 else y_train\n"
        "_, row_id = np.unique(rows, axis=0, return_inverse=True)\n"
        "row_id = row_id.ravel()\n"
        "pairs = np.unique(np.stack([row_id, labels], axis=1), axis=0)  # distinct (input, label) pairs\n"
        "conflicting = np.bincount(pairs[:, 0], minlength=row_id.max() + 1)[row_id] > 1\n"
        "print(f'{conflicting.mean():.1%} of samples share their input with another label')\n"
        "x_train, y_train = x_train[~conflicting], y_train[~conflicting]",
    ),
    Fix(
        "The same with pandas, on the table before it becomes arrays; then fix the join or merge that "
        "matched one input to several labels (a key that is not unique on one side).",
        "features = [c for c in df.columns if c != 'label']\n"
        "labels_per_input = df.groupby(features)['label'].transform('nunique')\n"
        "print(df[labels_per_input > 1].sort_values(features).head(20))\n"
        "df = df[labels_per_input == 1]  # or: df.drop_duplicates(subset=features, keep=False)",
    ),
)


# -- (a) training and validation class shares --------------------------------------------------


def _class_labels(run: RunSignals) -> bool:
    """Whether the labels are classes (the loss is not a known regression loss)."""
    loss = run.info.loss or ""
    kind = LossKind.named(loss) or LossKind.of_class(loss)
    return kind not in REGRESSION_LOSSES


def recorded_shares(run: RunSignals, name: str) -> np.ndarray | None:
    """A recorded class-share setting, when it is a distribution (multi-label columns are not)."""
    value = run.settings.get(name)
    if not isinstance(value, list) or len(value) < 2:
        return None
    shares = np.asarray(value, np.float64)
    if (shares < 0).any() or (shares > 1).any() or abs(shares.sum() - 1.0) > SHARES_SUM_TOLERANCE:
        return None
    return shares


def share_distance(train: np.ndarray, validation: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Both share vectors padded to one length (an id past the last one present has share 0), and
    their total variation distance."""
    size = max(len(train), len(validation))
    train, validation = np.pad(train, (0, size - len(train))), np.pad(validation, (0, size - len(validation)))
    return train, validation, float(0.5 * np.abs(train - validation).sum())


def sampling_distance(shares: np.ndarray, train_samples: float, validation_samples: float) -> float:
    """The total variation distance expected between two random samples of these sizes from one
    distribution: each share's difference is ~normal with variance p(1-p)(1/n + 1/m), and the mean
    absolute value of a normal is sqrt(2/pi) times its standard deviation."""
    spread = np.sqrt(shares * (1 - shares) * (1 / train_samples + 1 / validation_samples))
    return float(0.5 * np.sqrt(2 / np.pi) * spread.sum())


def accuracy_gap(run: RunSignals) -> tuple[float, float, Series] | None:
    """(training accuracy, validation accuracy, the validation series) at the epoch of the best
    validation accuracy: the gap there is what the model carries over at its best, before any later
    overfitting widens it."""
    train, val = run.get(sig.EPOCH_ACCURACY), run.get(sig.EPOCH_VAL_ACCURACY)
    if train is None or val is None:
        return None
    train, val = finite_part(train), finite_part(val)
    common, train_at, val_at = np.intersect1d(train.steps, val.steps, return_indices=True)
    if len(common) < MIN_ACCURACY_EPOCHS:
        return None
    best = int(np.argmax(val.values[val_at]))
    return float(train.values[train_at][best]), float(val.values[val_at][best]), val


def class_shares_differ(run: RunSignals) -> list[Finding]:
    train, validation = (
        recorded_shares(run, "label_distribution"),
        recorded_shares(run, "validation_label_distribution"),
    )
    samples, val_samples = run.settings.number("train_samples"), run.settings.number("validation_samples")
    if train is None or validation is None or not samples or not val_samples or not _class_labels(run):
        return []
    train, validation, distance = share_distance(train, validation)
    chance = sampling_distance(np.maximum(train, validation), samples, val_samples)
    accuracies = accuracy_gap(run)
    if distance < max(MIN_SHARE_DISTANCE, SAMPLING_TIMES * chance) or accuracies is None:
        return []
    train_accuracy, best_val, val = accuracies
    if train_accuracy - best_val < MIN_ACCURACY_GAP:
        return []
    return [_shares_finding(train, validation, distance, chance, train_accuracy, best_val, val)]


def _largest_differences(train: np.ndarray, validation: np.ndarray, count: int = 3) -> str:
    order = np.argsort(-np.abs(train - validation))[:count]
    return "; ".join(f"class {k}: {train[k]:.1%} of training labels, {validation[k]:.1%} of validation" for k in order)


def _shares_finding(
    train: np.ndarray,
    validation: np.ndarray,
    distance: float,
    chance: float,
    train_accuracy: float,
    best_val: float,
    val: Series,
) -> Finding:
    first, last = int(val.steps[0]), int(val.steps[-1])
    return Finding(
        code=Code.LABEL_PROBLEM,
        severity=Severity.WARNING,
        step=first,
        title=(
            f"Training and validation labels have different class shares ({distance:.0%} of the labels apart), "
            f"and validation accuracy stays {train_accuracy - best_val:.0%} below training at its best"
        ),
        detail=(
            f"{_largest_differences(train, validation)}. Total variation distance {distance:.2f}; two random "
            f"samples of these sizes from one data set would be about {chance:.2f} apart. At the epoch of its best "
            f"validation accuracy ({best_val:.1%}) training accuracy is {train_accuracy:.1%}: the model learns the class mix "
            "it was given, and the validation set has another one. A filter, join or sampling step that ran on "
            "one side only (e.g. `x_train = x[y != 3]`) does this."
        ),
        evidence=Evidence(
            (sig.EPOCH_ACCURACY, sig.EPOCH_VAL_ACCURACY),
            first,
            last,
            facts=(
                Fact("training label shares", ", ".join(f"{p:.1%}" for p in train[:10])),
                Fact("validation label shares", ", ".join(f"{p:.1%}" for p in validation[:10])),
            ),
        ),
        fixes=SHARE_FIXES,
    )


# -- (b) one input, several labels --------------------------------------------------------------


def conflicting_duplicates(run: RunSignals) -> list[Finding]:
    conflict, ceiling = run.settings.number("duplicate_label_conflict"), run.settings.number("duplicate_label_ceiling")
    distinct = run.settings.number("distinct_input_share")
    train = run.get(sig.EPOCH_ACCURACY)
    if conflict is None or ceiling is None or distinct is None or train is None:
        return []
    if ceiling > MAX_CEILING or distinct < MIN_DISTINCT_SHARE:
        return []
    values = finite_part(train).values
    if len(values) < MIN_ACCURACY_EPOCHS or values[-1] < ceiling - CEILING_REACH:
        return []
    best_val = run.get(sig.EPOCH_VAL_ACCURACY)
    val_note = (
        f" Validation accuracy reaches {np.nanmax(best_val.values):.1%}, above what training can: the validation "
        "labels do not have these conflicts."
        if best_val is not None and np.isfinite(best_val.values).any() and np.nanmax(best_val.values) > ceiling
        else ""
    )
    first, last = int(train.steps[0]), int(train.steps[-1])
    return [
        Finding(
            code=Code.LABEL_PROBLEM,
            severity=Severity.WARNING,
            step=first,
            title=(
                f"{conflict:.0%} of training samples share their exact input with a sample of another label: "
                f"training accuracy cannot pass {ceiling:.0%} (it ends at {values[-1]:.1%})"
            ),
            detail=(
                f"Among the training samples, {conflict:.1%} have an input row that occurs again with a different "
                f"label, so even a perfect model can fit at most {ceiling:.1%} of them; training accuracy ends at "
                f"{values[-1]:.1%}, held by that cap. {distinct:.0%} of the input rows are distinct, so these are "
                "not a few categorical inputs with noisy outcomes but duplicated rows: a join that matched rows to "
                "several labels, or two label sources merged." + val_note
            ),
            evidence=Evidence(
                (sig.EPOCH_ACCURACY,),
                first,
                last,
                facts=(
                    Fact("samples whose input has another label", f"{conflict:.1%}"),
                    Fact("highest training accuracy these labels allow", f"{ceiling:.1%}"),
                    Fact("distinct input rows", f"{distinct:.1%}"),
                ),
            ),
            fixes=DUPLICATE_FIXES,
        )
    ]
