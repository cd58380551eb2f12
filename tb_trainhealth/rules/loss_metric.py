"""`loss_metric_mismatch`: a hand-written loss that does not measure what the accuracy measures.

For a loss of the user's own on a classifier (the `label_statistics` lint event gives the
classes and, over its 20 batches, the batch size), two contradictions no correct
cross-entropy can produce:

- Stuck above the uniform guess: training accuracy ends >= HIGH_ACCURACY while the loss ends
  at or above ln K, what predicting 1/K for every class costs. With the true class on top for
  90% of the samples, a mean cross-entropy is below ln K (the top class has p >= 1/K). A softmax
  over the wrong axis (the batch instead of the classes) or a loss on the wrong outputs does this.
- Summed, not averaged: the first recorded loss is about batch-size x ln K (between
  SUM_LOW and SUM_HIGH times the batch size), where a mean cross-entropy starts near ln K. The
  effective learning rate and any regularisation weight then scale with the batch size.

Measured (`python bench/rule_zoo.py --only loss_`, seeds 0-1, MLP and CNN): softmax over
axis 0 ends at 2.2-2.4 nats with accuracy 0.985-1.0 (ln 4 = 1.39, ln 3 = 1.10); a summed loss
starts at 1.0-1.4x batch x ln K; the correct hand-written twins start at 0.9-1.1 (first-epoch
mean, about ln K) and end at 0.002-0.015 with the same accuracies.
Built-in losses are never judged here (Keras computes them right).
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.findings import Evidence, Finding, Fix, Severity
from tb_trainhealth.rules.fact_text import fact
from tb_trainhealth.signals import RunSignals
from tb_trainhealth.yardstick import label_statistics

HIGH_ACCURACY = 0.9
SUM_LOW, SUM_HIGH = 0.5, 2.0
MIN_BATCH = 8  # below this a summed loss is not told apart from a badly initialised mean

MEAN_CE_FIX = Fix(
    "Use Keras' own cross-entropy (softmax over the last axis, mean over the batch).",
    "loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)",
)
AXIS_FIX = Fix(
    "Writing it by hand: softmax over the classes (axis=-1), then average over the batch.",
    "def loss(y_true, logits):\n"
    "    log_p = tf.nn.log_softmax(logits, axis=-1)  # not axis=0: that is over the batch\n"
    "    nll = -tf.gather(log_p, tf.cast(y_true, tf.int32), axis=-1, batch_dims=1)\n"
    "    return tf.reduce_mean(nll)",
)
MEAN_FIX = Fix(
    "Average over the batch (reduce_mean), or return one loss per sample and let Keras reduce it.",
    "def loss(y_true, logits):\n"
    "    per_sample = keras.losses.sparse_categorical_crossentropy(y_true, logits, from_logits=True)\n"
    "    return per_sample  # or tf.reduce_mean(per_sample); not tf.reduce_sum",
)


def _classifier(run: RunSignals) -> tuple[int, float | None] | None:
    """(classes, batch size) for a run trained with a loss of the user's own on several classes."""
    stats = label_statistics(run)
    if stats is None or stats.loss is not None or not stats.class_counts:
        return None
    classes = max(stats.units or 0, len(stats.class_counts))
    if classes < 2:
        return None
    samples = float(sum(stats.class_counts))
    batch = samples / stats.batches if stats.batches else None
    return classes, batch


def check_loss_metric_mismatch(run: RunSignals) -> list[Finding]:
    found = _classifier(run)
    if found is None:
        return []
    classes, batch = found
    uniform = float(np.log(classes))
    return _above_uniform(run, classes, uniform) or _summed(run, classes, uniform, batch)


def _above_uniform(run: RunSignals, classes: int, uniform: float) -> list[Finding]:
    accuracy, loss = run.get(sig.EPOCH_ACCURACY), run.get(sig.EPOCH_LOSS)
    if accuracy is None or loss is None:
        return []
    acc, end = float(accuracy.values[-1]), float(loss.values[-1])
    if not (np.isfinite(acc) and np.isfinite(end)) or acc < HIGH_ACCURACY or end < uniform:
        return []
    step = int(loss.steps[-1])
    return [
        Finding(
            code=Code.LOSS_METRIC_MISMATCH,
            severity=Severity.WARNING,
            step=step,
            title=(
                f"The loss contradicts the accuracy: {end:.3g} at {acc:.1%} accuracy, above the {uniform:.3g} "
                f"(ln {classes}) of a uniform guess: the custom loss is wrong"
            ),
            detail=(
                f"Training accuracy ends at {acc:.1%}, yet the loss ends at {end:.4g}, at or above ln {classes} = "
                f"{uniform:.3g}, what predicting 1/{classes} for every class costs. A mean cross-entropy of a model "
                "that ranks the true class first this often is below that. The hand-written loss does not measure "
                "the predictions the metric scores: a softmax over the wrong axis (axis=0 is the batch), a loss "
                "on the wrong output, or labels and logits paired in the wrong order."
            ),
            evidence=Evidence((sig.EPOCH_LOSS, sig.EPOCH_ACCURACY), int(loss.steps[0]), step),
            fixes=(AXIS_FIX, MEAN_CE_FIX),
        )
    ]


def _summed(run: RunSignals, classes: int, uniform: float, batch: float | None) -> list[Finding]:
    loss = run.get(sig.LOSS)
    if loss is None or batch is None or batch < MIN_BATCH or not np.isfinite(loss.values[0]):
        return []
    start = float(loss.values[0])
    ratio = start / (batch * uniform)
    if not SUM_LOW <= ratio <= SUM_HIGH:
        return []
    step = int(loss.steps[0])
    return [
        Finding(
            code=Code.LOSS_METRIC_MISMATCH,
            severity=Severity.WARNING,
            step=step,
            title=(
                f"The loss is summed over the batch, not averaged: it starts at {start:.4g}, about "
                f"{batch:.0f} (batch size) x ln {classes}"
            ),
            detail=(
                f"An untrained classifier's mean cross-entropy starts near ln {classes} = {uniform:.3g}; this loss "
                f"starts at {start:.4g}, {start / uniform:.3g}x that, and the batches hold {batch:.0f} samples. The "
                "custom loss adds the samples up: the gradients (so the effective learning rate and the weight of "
                "any regulariser) change with the batch size, and the loss is not comparable across runs."
            ),
            evidence=Evidence(
                (sig.LOSS,),
                step,
                step,
                facts=fact("first loss", start)
                + fact(f"ln {classes} (a uniform guess)", uniform)
                + fact("batch size", f"{batch:.0f}")
                + fact("first loss / (batch size x ln K)", ratio),
            ),
            fixes=(MEAN_FIX, MEAN_CE_FIX),
        )
    ]
