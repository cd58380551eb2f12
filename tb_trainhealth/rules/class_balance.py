"""`majority_class`: on imbalanced classes, the model predicts the largest class for everything.

From the first batches' class counts (the `label_statistics` lint event) and the per-epoch
training accuracy and loss. A model that outputs the class prior for every input is right
on exactly the majority's share of the samples, every epoch: its accuracy does not move
(the same samples each epoch) and sits at that share, and its cross-entropy sits at the
entropy of the class prior. A learning model's accuracy moves from epoch to epoch.

Measured (`python bench/rule_zoo.py --only majority`): broken runs (MLP and CNN, 93-94%
one class, seeds 0-1) hold accuracy within 0.12 points of one value over the last half,
within 1 point of the sampled majority share (the loss ends at 0.77-1.0x the prior's entropy:
not a gate, a weakly informative feature lowers it without flipping any prediction); their
healthy twins trained with class_weight move by 1.7 points over their last half (MLP) or sit
at 100%, 7 points above the share (CNN); balanced classes never reach MIN_MAJORITY_SHARE.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.vocab import CATEGORICAL_LOSSES, LossKind
from tb_trainhealth.findings import ADD_CLASS_WEIGHTS, Evidence, Finding, Fix, Severity
from tb_trainhealth.rules.fact_text import fact
from tb_trainhealth.signals import RunSignals
from tb_trainhealth.yardstick import label_statistics

# Imbalanced: the largest class holds at least this share of the sampled labels (with balanced
# classes, binary ones included, a model stuck at chance is a plateau, not a majority-class
# predictor; 0.6 leaves 0.5 of a balanced binary task well apart, with its sampling error).
MIN_MAJORITY_SHARE = 0.6
# The last epochs (at least MIN_EPOCHS, at least half the run) must hold accuracy within this
# many points of one value: the same prediction for every sample.
MIN_EPOCHS = 3
FLAT_ACCURACY = 0.002
# ...at the majority share, within this many standard errors of the sampled share (the first
# 20 batches estimate the training set's share), and at least this close.
SHARE_ERRORS = 3.0
SHARE_TOLERANCE = 0.01

FIXES = (
    Fix(
        "Weight the classes so the rare ones count (inverse frequency).",
        "counts = np.bincount(y_train)\n"
        "class_weight = {i: len(y_train) / (len(counts) * c) for i, c in enumerate(counts)}\n"
        "model.fit(x_train, y_train, class_weight=class_weight, ...)",
        intents=(ADD_CLASS_WEIGHTS,),
    ),
    Fix(
        "Or resample so each batch holds every class.",
        "ds = tf.data.Dataset.sample_from_datasets([ds_class0, ds_class1], weights=[0.5, 0.5])",
    ),
    Fix(
        "Judge it by what accuracy hides: per-class recall.",
        "metrics=[keras.metrics.SparseCategoricalAccuracy(), keras.metrics.Recall(class_id=1)]  # or F1Score",
    ),
)


def check_majority_class(run: RunSignals) -> list[Finding]:
    stats = label_statistics(run)
    accuracy = run.get(sig.EPOCH_ACCURACY)
    if stats is None or accuracy is None:
        return []
    if stats.loss in CATEGORICAL_LOSSES and stats.class_counts:
        counts = np.asarray(stats.class_counts, np.float64)
    elif stats.loss == LossKind.BINARY_CROSSENTROPY and stats.mean is not None and 0 <= stats.mean <= 1 and stats.count:
        counts = np.array([1 - stats.mean, stats.mean]) * stats.count  # positive rate of 0/1 labels
    else:
        return []
    total = counts.sum()
    if total <= 0 or len(counts) < 2:
        return []
    top = int(np.argmax(counts))
    share = float(counts[top] / total)
    if share < MIN_MAJORITY_SHARE:
        return []
    values = accuracy.values[np.isfinite(accuracy.values)]
    if len(values) < MIN_EPOCHS:
        return []
    late = values[-max(MIN_EPOCHS, len(values) // 2) :]
    if float(late.max() - late.min()) > FLAT_ACCURACY:
        return []
    level = float(np.median(late))
    tolerance = max(SHARE_TOLERANCE, SHARE_ERRORS * float(np.sqrt(share * (1 - share) / total)))
    if abs(level - share) > tolerance:
        return []
    p = counts[counts > 0] / total
    entropy = float(-(p * np.log(p)).sum())
    loss = run.get(sig.EPOCH_LOSS)
    loss_note = ""
    if loss is not None and np.isfinite(loss.values[-1]) and entropy > 0:
        end = float(loss.values[-1])
        loss_note = (
            f" The loss ends at {end:.4g} against {entropy:.4g} for predicting the class prior: whatever it learned "
            f"never tips a sample over to another class."
        )
    first, last = int(accuracy.steps[0]), int(accuracy.steps[-1])
    return [
        Finding(
            code=Code.MAJORITY_CLASS,
            severity=Severity.WARNING,
            step=first,
            title=(
                f"The model predicts only the majority class: accuracy {level:.1%} = the share of class {top} "
                f"({share:.1%}), every epoch"
            ),
            detail=(
                f"Class {top} holds {share:.1%} of the {int(total)} labels sampled from the first batches. Training "
                f"accuracy sits at {level:.1%} for the last {len(late)} epochs, never moving more than "
                f"{FLAT_ACCURACY:.1%}: the model answers class {top} for every sample and never predicts the "
                f"other {len(counts) - 1} class(es). Accuracy looks fine only because the classes are imbalanced."
                + loss_note
            ),
            evidence=Evidence(
                (sig.EPOCH_ACCURACY, sig.EPOCH_LOSS),
                first,
                last,
                facts=fact("labels per class (first batches)", tuple(int(c) for c in counts))
                + fact(f"share of class {top}", f"{share:.1%}")
                + fact("training accuracy (last epochs)", f"{level:.1%}"),
            ),
            fixes=FIXES,
        )
    ]
