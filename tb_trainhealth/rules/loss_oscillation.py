"""`loss_oscillation`: a loss that swings without progress, or bounces from epoch to epoch while
still far from converged: steps too large for this loss's scale."""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.findings import RAISE_BATCH_SIZE, Evidence, Finding, Fix, Severity
from tb_trainhealth.rules.common_fixes import CLIP_FIX, LR_FIX_LOWER, LR_FIX_SCHEDULE
from tb_trainhealth.rules.loss_curve import MIN_EPOCH_POINTS, OSCILLATION_SPREAD, training_loss
from tb_trainhealth.rules.weight_health import HIGH_UPDATE_RATIO, update_ratio_level
from tb_trainhealth.series_math import finite_part, relative_spread
from tb_trainhealth.signals import RunSignals
from tb_trainhealth.yardstick import constant_baseline

# Oscillation: no progress (the second half's median at least 90% of the untrained
# loss: a learning rate too high to settle does no better than the untrained model;
# minibatch noise around real progress stays below that), and the second half swings
# with an inter-quartile range at least this share of its level, trending neither down
# nor up (last quarter's median within OSCILLATION_TREND of the third quarter's).
OSCILLATION_MAX_PROGRESS = 0.9
OSCILLATION_START_POINTS = 3
OSCILLATION_TREND = 0.9
# Above this multiple of the starting loss the run is diverging, not oscillating.
OSCILLATION_MAX_LEVEL = 3.0


# Swinging epochs on a loss still large: the validation loss rising at least EPOCH_SWING times
# over the epoch before, at least MIN_SWINGS times, and the training epoch loss at least once
# TRAIN_SWING times, with the last epoch still at least UNCONVERGED of the first (no loss near its
# floor; where the constant prediction's loss is known, the training epoch loss's second half at
# least STILL_LARGE of it), and steps too large where measured (update ratio above HIGH_UPDATE_RATIO). Measured
# (`bench/learn_less_zoo.py` bouncing_regression: targets x20, plain SGD 0.03): 5 validation
# swings of 1.5-2.2x between 36 and 206, a training epoch 74.8 -> 204; its twin (SGD 0.01) falls
# smoothly to 11.8. Overfitting rises steadily (one swing at most), not up and down. Seed 1's twin
# (SGD 0.01) swings too (val 8.8-35) but its training loss sits at 5% of the targets' variance
# (R^2 0.95) against 22-28% for the broken runs (seeds 0-1): STILL_LARGE between them.
EPOCH_SWING = 1.5
STILL_LARGE = 0.15
MIN_SWINGS = 3
TRAIN_SWING = 1.3
UNCONVERGED = 0.1


def _swings(values: np.ndarray, factor: float) -> np.ndarray:
    """Indices of the epochs at least `factor` times the epoch before."""
    values = values[np.isfinite(values)]
    if len(values) < 2:
        return np.empty(0, dtype=np.int64)
    before = values[:-1]
    return np.flatnonzero((before > 0) & (values[1:] >= factor * before)) + 1


def _still_large(run: RunSignals, train: np.ndarray, val: np.ndarray) -> bool:
    """The loss is still far from converged: against the constant prediction's loss where known."""
    baseline = constant_baseline(run)
    if baseline is not None and baseline[0] > 0:
        return float(np.median(train[len(train) // 2 :])) >= STILL_LARGE * baseline[0]
    return bool(val[-1] >= UNCONVERGED * val[0])


def _swinging_epochs(run: RunSignals) -> list[Finding]:
    """A loss still far from converged that jumps up and down from epoch to epoch: the learning
    rate is too high for this loss's scale (a regression loss bouncing between tens and hundreds)."""
    train, val = run.get(sig.EPOCH_LOSS), run.get(sig.EPOCH_VAL_LOSS)
    if train is None or val is None or len(val) < MIN_EPOCH_POINTS:
        return []
    val_values, train_values = finite_part(val).values, finite_part(train).values
    swings = _swings(val_values, EPOCH_SWING)
    ratio = update_ratio_level(run)
    if len(swings) < MIN_SWINGS or not len(_swings(train_values, TRAIN_SWING)) or len(val_values) < 2:
        return []
    if not _still_large(run, train_values, val_values) or (ratio is not None and ratio < HIGH_UPDATE_RATIO):
        return []
    rate = run.info.learning_rate
    rate_text = f"the learning rate ({rate:.2g})" if rate else "the learning rate"
    onset = int(val.steps[swings[0]])
    low, high = float(np.min(val_values)), float(np.max(val_values))
    return [
        Finding(
            code=Code.LOSS_OSCILLATION,
            severity=Severity.WARNING,
            step=onset,
            title=f"Loss bounces between {low:.3g} and {high:.3g} from epoch to epoch: {rate_text} is too high for it",
            detail=(
                f"Validation loss jumped to at least {EPOCH_SWING:g}x the epoch before {len(swings)} times (from "
                f"{run.at(onset)} on) and the training epoch loss swung too, while the loss is still "
                f"{val_values[-1] / val_values[0]:.0%} of where it started: not noise around a converged loss but "
                "steps too large for this loss's scale."
                + (f" Each step moves the weights by {ratio:.2g} of their size (healthy: about 1e-3)." if ratio else "")
            ),
            evidence=Evidence((sig.EPOCH_LOSS, sig.EPOCH_VAL_LOSS), onset, int(val.steps[-1])),
            fixes=(LR_FIX_LOWER, LR_FIX_SCHEDULE, CLIP_FIX),
        )
    ]


def check_loss_oscillation(run: RunSignals) -> list[Finding]:
    found = training_loss(run)
    if found is None:
        return _swinging_epochs(run)
    name, loss = found
    # The untrained model's loss (median of the first few points): neither a run that
    # blows up nor one that converges in its first steps may move the reference.
    start = float(np.median(loss.values[:OSCILLATION_START_POINTS]))
    half = len(loss) // 2
    late = loss.values[half:]
    level = float(np.median(late))
    if start <= 0 or not OSCILLATION_MAX_PROGRESS * start <= level <= OSCILLATION_MAX_LEVEL * start:
        return _swinging_epochs(run)
    spread = relative_spread(late)
    quarter = len(late) // 2
    # Swinging around a level, not trending: the last quarter within ~10% of the third.
    trend = np.median(late[quarter:]) / np.median(late[:quarter])
    if spread < OSCILLATION_SPREAD or not OSCILLATION_TREND <= trend <= 1 / OSCILLATION_TREND:
        return _swinging_epochs(run)
    # Where the update size is measured, too high a learning rate shows in it: normal-sized
    # updates (~1e-3 of the weights) with a swinging loss are minibatch noise, not oscillation.
    ratio = update_ratio_level(run)
    if ratio is not None and ratio < HIGH_UPDATE_RATIO:
        return []
    onset = int(loss.steps[half])
    return [
        Finding(
            code=Code.LOSS_OSCILLATION,
            severity=Severity.WARNING,
            step=onset,
            title=f"Loss oscillates without progress (swings of {spread:.0%} of its level)",
            detail=(
                f"Over the second half of the run (from {run.at(onset)}) training loss ({name}) swings with an "
                f"inter-quartile range of {spread:.0%} of its median {level:.4g}, which is {level / start:.0%} "
                f"of the untrained model's loss {start:.4g}: no progress."
                + (
                    f" Each step moves the weights by {ratio:.2g} of their size (healthy: about 1e-3): the "
                    "learning rate is too high."
                    if ratio is not None
                    else ""
                )
            ),
            evidence=Evidence((name,), onset, int(loss.steps[-1])),
            fixes=(
                LR_FIX_LOWER,
                Fix(
                    "Use a larger batch size to reduce gradient noise.",
                    "model.fit(x, y, batch_size=128)",
                    intents=(RAISE_BATCH_SIZE,),
                ),
                LR_FIX_SCHEDULE,
                CLIP_FIX,
            ),
        )
    ]
