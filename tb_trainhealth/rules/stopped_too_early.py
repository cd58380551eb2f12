"""`undertrained` where EarlyStopping is why: set so tight that it ended a run still improving.

By the user's own measure validation stopped improving, unless the measure was too tight:
patience 0-1 (one noisy epoch ends the run) or a min_delta larger than the gain per epoch. The
finding names which setting, since the fix differs.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.findings import Finding, Fix
from tb_trainhealth.rules.run_setup import EarlyStoppingSetup, early_stopping
from tb_trainhealth.rules.still_falling import MIN_RELATIVE_DROP, undertrained_warning
from tb_trainhealth.series_math import finite_part, rank_correlation
from tb_trainhealth.signals import RunSignals, Series

# EarlyStopping that stopped a run still improving. Over the last ES_TAIL_EPOCHS before the stop the
# validation loss fell with a rank correlation of at most ES_MAX_RANK_CORRELATION (one bump allowed:
# patience 0 stops at the first one) and gained, per epoch, at least ES_STILL_SHARE of the whole
# improvement so far and MIN_RELATIVE_DROP of its level. Measured (`bench/learn_less_zoo.py`):
# min_delta=0.05 on a regression loss gaining 0.012 per epoch: 5.6% per epoch, rank correlation
# -1.0, stopped at epoch 6 of 50 (the twin, min_delta=0, reaches 0.039 against 0.101); patience=0 on
# val_accuracy: 2.8% per epoch (4.7% of its level), stopped at epoch 13 of 60 (accuracy 0.77 against 0.84).
# TIGHT_PATIENCE: patience at most this ends a run at its first noisy epoch.
ES_TAIL_EPOCHS = 4
ES_MAX_RANK_CORRELATION = -0.6
ES_STILL_SHARE = 0.02
TIGHT_PATIENCE = 1


def _gain_per_epoch(values: np.ndarray) -> tuple[float, float] | None:
    """(gain per epoch over the last ES_TAIL_EPOCHS, share of the improvement so far), when the
    tail still falls; else None."""
    if len(values) < ES_TAIL_EPOCHS:
        return None
    tail = values[-ES_TAIL_EPOCHS:]
    if rank_correlation(tail) > ES_MAX_RANK_CORRELATION:
        return None
    best_tail = float(np.min(tail))
    gained = float(np.max(values[: len(values) - ES_TAIL_EPOCHS + 1]) - best_tail)
    per_epoch = float(tail[0] - best_tail) / (ES_TAIL_EPOCHS - 1)
    if gained <= 0 or per_epoch < MIN_RELATIVE_DROP * best_tail:
        return None
    return per_epoch, per_epoch / gained


def _tight_setting(setup: EarlyStoppingSetup, gain: float) -> str | None:
    """Which setting stopped a run still gaining `gain` per epoch (on the validation loss)."""
    if setup.min_delta > 0 and "loss" in setup.monitor and setup.min_delta > gain:
        return "min_delta"
    if setup.patience <= TIGHT_PATIENCE:
        return "patience"
    return None


def early_stopping_too_eager(run: RunSignals, train: Series, val: Series | None) -> list[Finding]:
    setup = early_stopping(run)
    if setup is None or val is None:
        return []
    found = _gain_per_epoch(finite_part(val).values)
    if found is None or found[1] < ES_STILL_SHARE or _gain_per_epoch(finite_part(train).values) is None:
        return []
    gain, share = found
    which = _tight_setting(setup, gain)
    if which is None:
        return []
    end = run.stopped_by("EarlyStopping")
    planned = f" of {end.epochs_planned}" if end is not None and end.epochs_planned else ""
    epochs = f"epoch {end.epochs_run}{planned}" if end is not None and end.epochs_run else run.at(int(val.steps[-1]))
    if which == "min_delta":
        why = (
            f"min_delta={setup.min_delta:g} asks each epoch to gain more than the validation loss gains "
            f"({gain:.3g} per epoch over the last {ES_TAIL_EPOCHS}): every epoch counts as no improvement."
        )
        fix = Fix(
            f"Set min_delta below the gain per epoch ({gain:.2g}), or leave it at 0 and let patience decide.",
            f"keras.callbacks.EarlyStopping(monitor='{setup.monitor}', patience=5, min_delta=0, restore_best_weights=True)",
        )
    else:
        why = (
            f"patience={setup.patience} ends the run at the first epoch that does not beat the best "
            f"({setup.monitor}), and a validation metric is noisy from epoch to epoch."
        )
        fix = Fix(
            "Give EarlyStopping a patience of 5-10 epochs so one noisy epoch does not end training.",
            f"keras.callbacks.EarlyStopping(monitor='{setup.monitor}', patience=5, restore_best_weights=True)",
        )
    step = int(val.steps[-1])
    return [
        undertrained_warning(
            run,
            step,
            title=f"EarlyStopping ({which}) stopped the run while validation loss was still improving",
            detail=(
                f"EarlyStopping ended training at {epochs}, yet over its last {ES_TAIL_EPOCHS} epochs the validation "
                f"loss still fell by {gain:.3g} per epoch ({share:.0%} of all its improvement so far, per epoch). "
                + why
            ),
            fixes=(fix,),
        )
    ]
