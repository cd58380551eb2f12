"""The yardstick every run carries: what a constant prediction scores under the run's own loss,
and how far below it the run got.

The callback scores the compiled loss on a constant prediction (the class frequencies, the
targets' mean or median) over the first batches' targets (`callback/lint/constant_prediction.py`)
and records it with the label statistics. The rules judge runs against it (`worse_than_constant`,
harm gating), and `compare` puts runs under different losses on one scale with it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import LintEvent
from tb_trainhealth.contract.vocab import CATEGORICAL_LOSSES, LintCheck, LossKind
from tb_trainhealth.series_math import finite_part, rolling_median
from tb_trainhealth.signals import RunSignals, Series

# Epochs (or logged points) the judgement needs: one epoch is the untrained model's start; or
# per-step losses, where there is no validation loss.
MIN_POINTS = 2
MIN_STEPS = 20
# A yardstick at or below this is no yardstick (one class in every label, constant targets).
MIN_YARDSTICK = 1e-6
# A loss at least this share below the constant prediction's is clear of it: something learned
# carries over (the plateau rule's BASELINE_TOLERANCE).
VAL_LOSS_TOLERANCE = 0.03


def label_statistics(run: RunSignals) -> LintEvent | None:
    """The first batches' label statistics the callback recorded (class counts, target moments, the
    constant prediction's and a perfect prediction's loss), where it did."""
    return next(iter(run.first_of_each_check(LintEvent, {LintCheck.LABEL_STATISTICS})), None)


def beats_constant(loss: float, baseline: float) -> bool:
    """A loss clear of what the constant prediction costs: something learned carries over."""
    return loss < (1 - VAL_LOSS_TOLERANCE) * baseline


def constant_baseline(run: RunSignals) -> tuple[float, str] | None:
    """The loss a model that ignores its input reaches: (value, how it is made). For cross-entropy
    and MSE from the label statistics (the entropy of the label frequencies, the targets'
    variance); for every other loss, what the callback measured with the loss itself."""
    stats = label_statistics(run)
    if stats is None:
        return None
    loss, mean, variance = stats.loss, stats.mean, stats.variance
    if loss in CATEGORICAL_LOSSES and stats.class_counts:
        p = np.asarray(stats.class_counts, np.float64)
        p = p[p > 0] / p.sum() if p.sum() > 0 else p
        if len(p) < 2:
            return None
        entropy = float(-(p * np.log(p)).sum())
        return (
            entropy,
            f"the entropy of the label frequencies over {len(p)} classes (ln {len(p)} = {np.log(len(p)):.3g} if balanced)",
        )
    if loss == LossKind.BINARY_CROSSENTROPY and mean is not None and 0 < mean < 1:
        entropy = float(-(mean * np.log(mean) + (1 - mean) * np.log(1 - mean)))
        return entropy, f"the entropy of a {mean:.0%} positive rate"
    if loss == LossKind.MEAN_SQUARED_ERROR and variance is not None and variance > 0:
        return variance, "the variance of the targets (predicting their mean)"
    stick = yardstick(run)
    return (stick.value, stick.how) if stick is not None else None


@dataclasses.dataclass(frozen=True)
class Yardstick:
    value: float
    how: str
    stats: LintEvent


def yardstick(run: RunSignals) -> Yardstick | None:
    """What a constant prediction scores under the run's own loss, where the callback measured it
    (and it is not ~0: labels of one class, or constant targets, leave nothing to measure against)."""
    stats = label_statistics(run)
    if stats is None or stats.constant_loss is None or not stats.constant_loss > MIN_YARDSTICK:
        return None
    return Yardstick(float(stats.constant_loss), stats.constant_how or "a constant prediction", stats)


def loss_floor(run: RunSignals) -> float:
    """What a perfect prediction scores under the run's loss: 0, but for soft targets under a
    cross-entropy (their entropy). Progress is measured on the way down to it, not to 0."""
    stats = label_statistics(run)
    return float(stats.floor_loss) if stats is not None and stats.floor_loss else 0.0


def judged_loss(run: RunSignals) -> tuple[str, Series] | None:
    """(series name, finite values) the yardstick is held against: the validation loss; else the
    per-step training loss as rolling medians over a tenth of the run (an epoch's mean carries the
    untrained model's first steps: a 2-epoch run's first epoch is mostly that); else the epoch's."""
    val = run.get(sig.EPOCH_VAL_LOSS)
    if val is not None and len(finite_part(val)) >= MIN_POINTS:
        return sig.EPOCH_VAL_LOSS, finite_part(val)
    steps = run.get(sig.LOSS)
    if steps is not None and len(finite_part(steps)) >= MIN_STEPS:
        finite = finite_part(steps)
        window = max(1, len(finite) // 10)
        return sig.LOSS, Series(finite.steps, rolling_median(finite.values, window))
    train = run.get(sig.EPOCH_LOSS)
    if train is not None and len(finite_part(train)) >= MIN_POINTS:
        return sig.EPOCH_LOSS, finite_part(train)
    return None


def gain_over_constant(run: RunSignals) -> float | None:
    """How far below the yardstick the run's best loss got, as a share of it (0.6: 60% below;
    negative: above it). For other rules: a run with a clear gain learned, whatever else is odd."""
    judged = judged_run(run)
    if judged is None:
        return None
    floor = loss_floor(run)
    reach = judged[0].value - floor
    return 1.0 - (judged[3] - floor) / reach if reach > MIN_YARDSTICK else 1.0 - judged[3] / judged[0].value


def judged_run(run: RunSignals) -> tuple[Yardstick, str, Series, float, float] | None:
    """(yardstick, series name, its values, best, last) where both the yardstick and a loss exist."""
    stick, judged = yardstick(run), judged_loss(run)
    if stick is None or judged is None:
        return None
    name, series = judged
    return stick, name, series, float(np.min(series.values)), float(series.values[-1])
