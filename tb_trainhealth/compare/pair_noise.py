"""How far apart two runs of one set-up would land, estimated from what these two runs show, not
the widest gap seen anywhere: the band the verdict judges the deciding metric against.

Estimates, the widest decides (and the verdict says which):

- the seed spread measured for the model family (MLP, CNN or RNN): two seeds of one healthy set-up
  on the same data (`SAME_DATA_SPREAD`), or of a program that draws its data from the seed where
  the runs saw two draws (`DRAW_SPREAD`);
- the runs' own epoch-to-epoch spread of the deciding metric over their last epochs (`jitter`):
  a run whose validation loss swings 1.3x from epoch to epoch can land 1.3x from its twin by
  chance alone; a smooth one cannot;
- where the two runs saw different draws of the data (`resample.resampled`), the metric's
  sampling error on validation sets of their size: an accuracy on 400 rows is good to
  ~sqrt(p(1-p)/400), a mean loss to a share of itself ~`LOSS_SPREAD`/sqrt(rows). On the same rows
  that error is shared by both runs and cancels in their difference; and, there too, how far each
  run's validation metric ends from its training one (what a model owes its own draw).

Each estimate is a standard deviation of the gap between the two runs, times `SIGMAS`.
"""

from __future__ import annotations

import math

import numpy as np

from tb_trainhealth.compare.curves import MetricPair
from tb_trainhealth.compare.noise import Noise
from tb_trainhealth.contract import series as sig
from tb_trainhealth.signals import RunSignals

# Bands are this many standard deviations of the gap between the two runs.
SIGMAS = 3.0
# Two seeds of one healthy set-up on the same data, per model family: (accuracy points, a loss's
# log ratio), final and best. `python bench/compare_zoo.py` (4 seeds, 6 pairs per set-up): MLP
# 0.013, CNN 0.000, GRU 0.025 accuracy, the regression 1.07x validation loss; its benign changes
# (Nadam, batch 64, the rate x2, mild dropout) up to 0.025 and 1.09x. What a bug costs starts at 1.2x.
SAME_DATA_SPREAD = {
    "mlp": (0.04, math.log(1.2)),
    "cnn": (0.04, math.log(1.2)),
    "rnn": (0.05, math.log(1.2)),
}
# Two seeds of a program that draws its data from the seed (another sample, often another task: a
# generator's random directions): the real-bug zoo's fixed programs against a second seed
# (`python bench/compare_real_bugs.py`, 2026-12-08): MLP up to 0.106 accuracy (0.090 best), the
# masked LSTM 0.20, losses up to 1.43x where the runs' own jitter does not cover more (polynomial
# targets on 400 rows: 1.72x, its jitter band 2.2x). The sampling error and the runs' jitter and
# generalisation gap widen it where they show more.
DRAW_SPREAD = {
    "mlp": (0.15, math.log(1.8)),
    "cnn": (0.15, math.log(1.8)),
    "rnn": (0.25, math.log(1.8)),
}
# Per-sample losses spread about their mean by about this share of it (a squared error of Gaussian
# residuals: sqrt(2); cross-entropies are more skewed): a mean over n rows is good to LOSS_SPREAD/sqrt(n).
LOSS_SPREAD = 2.0
# Epochs at the end of a run whose step-to-step moves measure its jitter (at least 3 moves).
JITTER_SHARE = 0.5
MIN_JITTER_POINTS = 4
# Classifiers' layer classes; recurrent ones first.
RECURRENT = ("LSTM", "GRU", "RNN")


def family(signals: RunSignals) -> str:
    """mlp, cnn or rnn, from the layer classes recorded (mlp where none is)."""
    classes = " ".join(cls for _, cls in signals.settings.layers)
    if any(word in classes for word in RECURRENT):
        return "rnn"
    return "cnn" if "Conv" in classes else "mlp"


def pair_noise(run: RunSignals, baseline: RunSignals, deciding: MetricPair, resampled: bool) -> Noise:
    """The band for `deciding` between these two runs (in its units: points of accuracy, or a
    loss's log ratio), the widest estimate, named in `source`."""
    kind = family(baseline)
    which = 0 if deciding.higher_is_better else 1
    if resampled:
        estimates = [(DRAW_SPREAD[kind][which], f"two seeds of one {kind.upper()} program that draws its data")]
    else:
        estimates = [(SAME_DATA_SPREAD[kind][which], f"two seeds of one {kind.upper()} set-up")]
    jitter = _pair_jitter(run, baseline, deciding)
    if jitter is not None:
        estimates.append((SIGMAS * jitter, f"these runs' own epoch-to-epoch spread of {deciding.name}"))
    if resampled:
        sampling = _sampling_error(run, baseline, deciding)
        if sampling is not None:
            estimates.append((SIGMAS * sampling, f"{deciding.name}'s sampling error on validation sets of this size"))
        owed = _generalisation(run, baseline, deciding)
        if owed is not None:
            estimates.append(
                (owed, f"what the runs owe their own training draw (validation vs training {deciding.name[4:]})")
            )
    band, source = max(estimates, key=lambda estimate: estimate[0])
    if resampled:
        source += " (the runs saw two draws of the same data)"
    if deciding.higher_is_better:
        return Noise(band, math.log(1.6), source)
    return Noise(0.06, band, source)


def _series_of(signals: RunSignals, name: str):
    for series_name, metric in (
        (sig.EPOCH_VAL_ACCURACY, "val_accuracy"),
        (sig.EPOCH_VAL_LOSS, "val_loss"),
        (sig.EPOCH_ACCURACY, "accuracy"),
        (sig.EPOCH_LOSS, "loss"),
    ):
        if metric == name:
            return signals.get(series_name)
    return None


def jitter(values: np.ndarray, log: bool) -> float | None:
    """The standard deviation of one epoch's value about the run's trend, from its last epochs:
    the robust spread of the epoch-to-epoch moves about their median move (the trend), over
    sqrt(2) (a move is the difference of two noisy values). None: too few finite epochs."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if log:
        values = np.log(np.maximum(values[values > 0], 1e-12))
    tail = values[-max(MIN_JITTER_POINTS, math.ceil(JITTER_SHARE * len(values))) :]
    if len(tail) < MIN_JITTER_POINTS:
        return None
    moves = np.diff(tail)
    deviation = np.median(np.abs(moves - np.median(moves)))
    return float(1.4826 * deviation / math.sqrt(2))


def _pair_jitter(run: RunSignals, baseline: RunSignals, deciding: MetricPair) -> float | None:
    found = [_series_of(signals, deciding.name) for signals in (run, baseline)]
    spreads = [jitter(s.values, not deciding.higher_is_better) if s is not None else None for s in found]
    if any(spread is None for spread in spreads):
        return None
    return math.sqrt(sum(spread**2 for spread in spreads))  # type: ignore[operator]


def _sampling_error(run: RunSignals, baseline: RunSignals, deciding: MetricPair) -> float | None:
    """The standard deviation of the gap that two independent validation sets of the runs' sizes
    give by chance; None where the metric is not measured on validation rows or their count is not
    recorded."""
    if not deciding.name.startswith("val_"):
        return None
    rows = [signals.settings.number("validation_samples") for signals in (run, baseline)]
    if any(n is None or n <= 0 for n in rows):
        return None
    if deciding.higher_is_better:
        shares = [min(max(p, 0.0), 1.0) for p in (deciding.run_final, deciding.baseline_final)]
        if not all(math.isfinite(p) for p in shares):
            return None
        return math.sqrt(sum(max(p * (1 - p), 0.01) / n for p, n in zip(shares, rows)))  # type: ignore[operator]
    return LOSS_SPREAD * math.sqrt(sum(1.0 / n for n in rows))  # type: ignore[operator]


def _generalisation(run: RunSignals, baseline: RunSignals, deciding: MetricPair) -> float | None:
    """How far each run's validation metric ends from its training twin (the larger of the two): what a
    model owes to its own sample of training rows, which another draw of the data changes."""
    if not deciding.name.startswith("val_"):
        return None
    gaps = []
    for signals in (run, baseline):
        val, train = _series_of(signals, deciding.name), _series_of(signals, deciding.name[4:])
        if val is None or train is None:
            return None
        a, b = float(val.values[-1]), float(train.values[-1])
        if not (math.isfinite(a) and math.isfinite(b)):
            return None
        if deciding.higher_is_better:
            gaps.append(abs(a - b))
        elif a > 0 and b > 0:
            gaps.append(abs(math.log(a / b)))
        else:
            return None
    return max(gaps)
