"""`undertrained`: the run ended while the loss was still delivering a good part of its gains.

What is left to gain, not the relative drop alone: the share of the whole improvement so
far that the last epochs still delivered, per epoch. A loss near zero keeps halving (a
constant relative drop) while each epoch buys almost nothing of what was gained; a run
cut short still gains a large share each epoch. Judged at the end of training only.

- With at least MIN_EPOCHS epochs: the training loss and the validation loss (when there
  is one) fall steadily over the last epochs (Spearman rank correlation with time at most
  -0.9) and the last TAIL_EPOCHS still gave, per epoch, at least CUT_SHORT_SHARE of the
  improvement so far ("cut short") or CREEPING_SHARE ("still creeping down").
- With 2-3 epochs, from the per-step loss (the callback records every step): the last
  quarter of the steps still gave at least STEP_CUT_SHORT_SHARE of the improvement, and the
  validation loss fell in the last epoch.
- In both, the recent drop is at least MIN_RELATIVE_DROP of the loss's level.
- Never when the accuracies are saturated (training and validation at 100%), nor when
  EarlyStopping ended the run (by the user's own measure, validation stopped improving)...
- ...unless EarlyStopping was set so tight that it stopped a validation loss still falling:
  patience 0-1 (one noisy epoch ends the run) or a min_delta larger than the gain per epoch.
  The finding names which setting, since the fix differs (`_early_stopping_too_eager`).
- A run that ran the epochs it was given and was still improving is info, not a warning:
  nothing in it is broken, the budget was the author's choice, and the run cannot tell a
  budget cut short from one that was enough for its purpose. Of the real-bug zoo's 42 fixed
  programs (`python bench/real_bug_zoo.py`, seed 0), 5 ended so (4-10 epochs, 11-36% of the
  gains in each last epoch, best loss 0.13-0.82 of the constant prediction's), the same as
  the learn-less zoo's cut-short runs (3-4 epochs, 17-21%, 0.26-0.57): no signal tells them
  apart. A setting that cut the run short is a warning: EarlyStopping too eager, far too few
  optimizer steps, a learning rate that crawls.
- Too few optimizer steps in all (`_too_few_steps`: a batch the size of the data set, a tiny
  training set, a handful of epochs): under FEW_STEPS steps with training and validation loss
  still falling steadily at the end. The finding says how many steps and why so few.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.findings import ADD_EARLY_STOPPING, MORE_EPOCHS, RAISE_RATE, Evidence, Finding, Fix, Severity
from tb_trainhealth.rules.common_fixes import LR_FIX_SCHEDULE
from tb_trainhealth.rules.few_steps import too_few_steps
from tb_trainhealth.rules.frozen_steps import frozen_cause
from tb_trainhealth.rules.still_falling import (
    MAX_RANK_CORRELATION,
    MIN_EPOCHS,
    MIN_RELATIVE_DROP,
    TAIL_EPOCHS,
    share_per_epoch,
    undertrained_warning,
)
from tb_trainhealth.rules.stopped_too_early import early_stopping_too_eager
from tb_trainhealth.series_math import finite_part, rank_correlation
from tb_trainhealth.signals import RunSignals, Series

# Per epoch, the last epochs still delivered this share of the whole improvement so far.
# Checked on the demo and test runs: cut short at 6-8 epochs 10-20%; converged 0-1%;
# a loss halving near zero (1-2% of its start) under 1%; creeping down 5-9% per epoch at
# 15% of its start: ~1-2%.
CUT_SHORT_SHARE = 0.08
CREEPING_SHARE = 0.01
# 2-3 epochs: the share of the improvement of the per-step loss (medians of eighths of the
# steps) that came in the last quarter. An exponential decline whose time constant is the whole
# run gives ~16% there, one of half the run ~6%, a run that converged in its first epoch ~0%;
# measured: the cut_short demo run 9.6-11% (seeds 0-1), its converged twin 0.01%.
MIN_STEP_EPOCHS = 2
MIN_STEP_POINTS = 40
STEP_CUT_SHORT_SHARE = 0.08
SATURATED_ACCURACY = 0.999


def _share_in_last_quarter(run: RunSignals) -> float | None:
    """Share of the per-step loss's improvement that came in the last quarter of its steps,
    when it still fell over the last eighth (medians of eighths: minibatch noise averages out)."""
    loss = run.get(sig.LOSS)
    if loss is None:
        return None
    values = finite_part(loss).values
    if len(values) < MIN_STEP_POINTS:
        return None
    eighths = [float(np.median(part)) for part in np.array_split(values, 8)]
    start = float(np.median(values[: max(3, len(values) // 20)]))
    gained, last = start - eighths[-1], eighths[-3] - eighths[-1]
    if gained <= 0 or last < MIN_RELATIVE_DROP * eighths[-1] or eighths[-1] >= eighths[-2]:
        return None
    return last / gained


def _saturated(run: RunSignals) -> bool:
    accuracies = [run.get(name) for name in (sig.EPOCH_ACCURACY, sig.EPOCH_VAL_ACCURACY)]
    present = [a for a in accuracies if a is not None]
    return bool(present) and all(float(a.values[-1]) >= SATURATED_ACCURACY for a in present)


def check_undertrained(run: RunSignals) -> list[Finding]:
    train, val = run.get(sig.EPOCH_LOSS), run.get(sig.EPOCH_VAL_LOSS)
    if train is None or _saturated(run):
        return []
    if run.stopped_by("EarlyStopping"):
        # By the user's own measure validation stopped improving, unless the measure was too tight.
        return early_stopping_too_eager(run, train, val)
    few = too_few_steps(run, train, val)
    if few:
        return few
    if len(train) >= MIN_EPOCHS:
        return _judged_per_epoch(run, train, val)
    if len(train) >= MIN_STEP_EPOCHS:
        return _judged_per_step(run, train, val)
    return []


def _judged_per_epoch(run: RunSignals, train: Series, val: Series | None) -> list[Finding]:
    if val is None:
        return []  # a falling training loss alone may as well be memorising
    train_share, val_share = share_per_epoch(train), share_per_epoch(val)
    if train_share is None or val_share is None:
        return _learning_too_slowly(run, train, val)
    share = min(train_share, val_share)
    if share < CREEPING_SHARE:
        return []
    cut_short = share >= CUT_SHORT_SHARE
    detail = (
        f"Over the last {TAIL_EPOCHS} of {len(val)} epochs, validation and training loss still fell every epoch, "
        f"each epoch delivering {val_share:.0%} (validation) and {train_share:.0%} (training) of all the "
        "improvement so far. "
        + (
            "A converged run gains about 1% of that per epoch or less: this one was cut short."
            if cut_short
            else "Small steps, but still steady: more epochs would still help a little."
        )
    )
    return [_finding(run, cut_short, int(val.steps[-1]), share, "per epoch", detail)]


def _judged_per_step(run: RunSignals, train: Series, val: Series | None) -> list[Finding]:
    val_values = finite_part(val).values if val is not None else np.empty(0)
    if len(val_values) < 2 or val_values[-1] > val_values[-2] * (1 - MIN_RELATIVE_DROP):
        return []  # no validation (a smoke run, or memorising), or it no longer improves
    share = _share_in_last_quarter(run)
    if share is None or share < STEP_CUT_SHORT_SHARE:
        return []
    last_step = int(train.steps[-1])
    detail = (
        f"Only {len(train)} epochs, and the last quarter of the steps still brought {share:.0%} of the whole "
        f"improvement of the training loss, while validation loss fell from {val_values[-2]:.4g} to "
        f"{val_values[-1]:.4g} in the last epoch."
    )
    return [_finding(run, True, last_step, share, "in the last quarter of the steps", detail)]


# Learning, but far too slowly: both losses fell every epoch over the whole run (rank correlation
# at most MAX_RANK_CORRELATION), by at least SLOW_RELATIVE_DROP of their level per epoch at the end,
# while each step moved the weights by less than frozen_steps.FROZEN_UPDATE_RATIO of their size.
# Measured (`bench/learn_less_zoo.py` lr_tiny_regression_sgd, SGD 1e-5, held-out seed 4): both
# losses fall 1.4% an epoch at the end (under MIN_RELATIVE_DROP, so not "cut short"), update
# ratio 1.8e-5, validation loss 0.58 where its twin (SGD 1e-2) reaches 0.036; healthy runs'
# ratios sit at 2.6e-4 to 1.5e-3 (weight_health), 2.6x and more above the limit.
SLOW_RELATIVE_DROP = 0.005
# ...and a crawl over the whole run: the last validation loss still at least SLOW_MIN_REMAINING of
# its first. The broken runs keep 87% of it (lr_tiny_regression_sgd, seeds 0-1); a healthy sweep
# run whose cosine schedule ends near zero (tiny late steps by design) keeps 0.02%, and was called
# slow once its accuracy (at 1.0, which silences this rule) was left out
# (`python bench/labels_without_accuracy.py /tmp/keep/zoo /tmp/keep/sweep`).
SLOW_MIN_REMAINING = 0.25


def _steadily_falling(series: Series) -> float | None:
    """The last epoch's drop as a share of the loss's level, when it fell every epoch; else None."""
    values = finite_part(series).values
    if len(values) < MIN_EPOCHS or rank_correlation(values) > MAX_RANK_CORRELATION or values[-1] <= 0:
        return None
    drop = float(values[-2] - values[-1]) / float(values[-1])
    return drop if drop >= SLOW_RELATIVE_DROP else None


def _learning_too_slowly(run: RunSignals, train: Series, val: Series) -> list[Finding]:
    train_drop, val_drop = _steadily_falling(train), _steadily_falling(val)
    values = finite_part(val).values
    if train_drop is None or val_drop is None or values[-1] < SLOW_MIN_REMAINING * values[0]:
        return []  # (most of the way down already: a converged run's last steps are small by design)
    frozen = frozen_cause(run)
    if frozen is None:
        return []
    cause, fix = frozen
    step = int(val.steps[-1])
    return [
        undertrained_warning(
            run,
            step,
            title=f"Learning far too slowly: {cause.split(':')[0]}",
            detail=(
                f"Both losses fell every epoch, and still fell {val_drop:.1%} (validation) and {train_drop:.1%} "
                f"(training) in the last one: the model is learning, at a crawl. Why: {cause}. At this pace "
                "more epochs cost far more than a step size that moves the weights."
            ),
            fixes=(fix, LR_FIX_SCHEDULE),
        )
    ]


def _finding(run: RunSignals, cut_short: bool, step: int, share: float, per: str, detail: str) -> Finding:
    title = (
        f"Stopped while still improving: the loss still gained {share:.0%} of its improvement {per}"
        if cut_short
        else f"Still creeping down at the end: {share:.1%} of the improvement {per}"
    )
    return Finding(
        code=Code.UNDERTRAINED,
        severity=Severity.INFO,  # (the epochs were the author's budget: see the module docstring)
        step=step,
        title=title,
        detail=detail,
        evidence=Evidence(
            tuple(s for s in (sig.EPOCH_LOSS, sig.EPOCH_VAL_LOSS, sig.LOSS) if run.get(s) is not None), None, step
        ),
        fixes=(
            Fix(
                "Train for more epochs and let early stopping find the end.",
                "model.fit(..., epochs=100, callbacks=[keras.callbacks.EarlyStopping(monitor='val_loss', "
                "patience=5, restore_best_weights=True)])",
                (ADD_EARLY_STOPPING, MORE_EPOCHS),
            ),
            Fix(
                "Or learn faster: a higher learning rate (if the loss curve is smooth).",
                "keras.optimizers.Adam(learning_rate=3e-3)",
                (RAISE_RATE,),
            ),
            LR_FIX_SCHEDULE,
        ),
    )
