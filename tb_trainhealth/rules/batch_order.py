"""`label_problem` where the batches come in class order: each batch holds one class, while
shuffled batches of that size would hold several. Every step then pulls the model toward one
class (and an epoch ends on the last classes read): a loader that reads class folder by class
folder, a tf.data pipeline over sorted arrays without `shuffle()`, a `keras.utils.PyDataset`
that never shuffles its index (fit's `shuffle=` reorders a PyDataset's batches, not the samples
inside them).

The callback counts the classes in each of the first batches (`label_statistics`' batch_classes
and batch_rows, one class per sample). A batch of n rows drawn from class shares p holds a single
class with probability sum(p_k ** n): this is what the run's own class mix would give. The batches
are in class order where most of them hold one class and that probability says few would.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.findings import ADD_SHUFFLE, Evidence, Fact, Finding, Fix, Severity
from tb_trainhealth.signals import RunSignals
from tb_trainhealth.yardstick import label_statistics

# Judged on at least this many sampled batches of at least MIN_ROWS rows each.
MIN_BATCHES = 8
MIN_ROWS = 8
# Batches of one class: at least this share of the sampled ones, where shuffled batches of the run's
# class mix would give at most SHUFFLED_SINGLE_MAX and at most a SINGLE_RATIO-th of what was seen.
# Real-bug zoo taxonomy_unshuffled_class_folders (10 digit classes, batches of 64, Keras' shuffled
# batch order): 20 of 20 sampled batches hold one class, where shuffled ones would hold one with
# probability ~1e-60; 0 of the healthy sweep's 81 runs and the rule zoo's healthy runs.
SINGLE_SHARE = 0.5
SHUFFLED_SINGLE_MAX = 0.2
SINGLE_RATIO = 3.0
# The harm the run shows: the per-step training loss jumps from batch to batch (median step-to-step
# change of its log at least ROUGH_STEPS: 0.43 in that zoo case, 0.16 in its fix, 0.14 the median
# of the zoo's fixed programs). Without it, a note.
ROUGH_STEPS = 0.25

SHUFFLE_FIXES = {
    "tf.data": Fix(
        "Shuffle the samples before batching, with a buffer that covers the data (or at least many classes' worth).",
        "dataset = dataset.shuffle(buffer_size=len(x_train), reshuffle_each_iteration=True).batch(32)",
        intents=(ADD_SHUFFLE,),
    ),
    "PyDataset": Fix(
        "Shuffle the sample index in your PyDataset/Sequence, at the start and after every epoch: fit's "
        "shuffle= only reorders whole batches.",
        "def on_epoch_end(self):\n    np.random.shuffle(self.index)  # and __getitem__ reads self.index[i * bs:(i + 1) * bs]",
        intents=(ADD_SHUFFLE,),
    ),
    "arrays": Fix(
        "Let fit shuffle the arrays (the default), or shuffle them once before fit.",
        "order = np.random.permutation(len(x_train))\nmodel.fit(x_train[order], y_train[order], shuffle=True, ...)",
        intents=(ADD_SHUFFLE,),
    ),
}


def batches_in_class_order(run: RunSignals) -> list[Finding]:
    stats = label_statistics(run)
    if stats is None or not stats.class_counts or len(stats.batch_classes) < MIN_BATCHES:
        return []
    rows = np.asarray(stats.batch_rows, np.float64)
    single = np.asarray(stats.batch_classes) == 1
    kept = rows >= MIN_ROWS
    if kept.sum() < MIN_BATCHES:
        return []
    counts = np.asarray(stats.class_counts, np.float64)
    shares = counts[counts > 0] / counts.sum()
    if len(shares) < 2:  # one class in every sampled label: single_class says so
        return []
    seen = float(single[kept].mean())
    shuffled = float(np.mean([np.sum(shares**n) for n in rows[kept]]))
    if seen < SINGLE_SHARE or shuffled > SHUFFLED_SINGLE_MAX or seen < SINGLE_RATIO * shuffled:
        return []
    rough = _roughness(run)
    harmed = rough is not None and rough >= ROUGH_STEPS
    source = run.info.input.type if run.info.input is not None else "?"
    fixes = [SHUFFLE_FIXES[source]] if source in SHUFFLE_FIXES else list(SHUFFLE_FIXES.values())[:2]
    loss_text = (
        f" The training loss jumps from batch to batch as the class changes (its log moves {rough:.2f} a step, median)."
        if harmed
        else " The training loss does not show the harm yet."
    )
    return [
        Finding(
            code=Code.LABEL_PROBLEM,
            severity=Severity.WARNING if harmed else Severity.INFO,
            step=0,
            title=(
                f"Batches come in class order: {int(single[kept].sum())} of {int(kept.sum())} sampled batches hold "
                f"a single class; shuffled, {shuffled:.0%} would"
            ),
            detail=(
                f"The first {len(single)} batches held {len(shares)} classes between them, but each batch one class "
                "(median rows per batch "
                f"{int(np.median(rows))}). Every step then pulls the model toward one class, and each epoch ends "
                f"on the last classes read: the data is not shuffled before batching.{loss_text}"
            ),
            evidence=Evidence(
                series=(sig.LOSS,),
                facts=(
                    Fact("batches holding one class", f"{seen:.0%} of {int(kept.sum())} sampled"),
                    Fact("shuffled batches would", f"{shuffled:.1%}"),
                    Fact("classes in the sampled batches", str(len(shares))),
                ),
            ),
            fixes=tuple(fixes),
        )
    ]


def _roughness(run: RunSignals) -> float | None:
    """Median step-to-step change of the log training loss (finite, positive values)."""
    loss = run.get(sig.LOSS)
    if loss is None:
        return None
    values = loss.values[np.isfinite(loss.values) & (loss.values > 0)]
    return float(np.median(np.abs(np.diff(np.log(values))))) if len(values) >= MIN_BATCHES else None
