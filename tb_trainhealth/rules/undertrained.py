"""`undertrained`: the run ended while the loss was still delivering a good part of its gains.

What is left to gain, not the relative drop alone: the share of the whole improvement so
far that the last epochs still delivered, per epoch. A loss near zero keeps halving (a
constant relative drop) while each epoch buys almost nothing of what was gained; a run
cut short still gains a large share each epoch. Judged at the end of training only.

- With at least MIN_EPOCHS epochs: the training loss and the validation loss (when there
  is one) fall steadily over the last epochs (Spearman rank correlation with time at most
  -0.9) and the last TAIL_EPOCHS still gave, per epoch, at least CUT_SHORT_SHARE of the
  improvement so far (warning) or CREEPING_SHARE (info: still creeping down).
- With 2-3 epochs, from the per-step loss (the callback records every step): the last
  quarter of the steps still gave at least STEP_CUT_SHORT_SHARE of the improvement, and the
  validation loss fell in the last epoch.
- In both, the recent drop is at least MIN_RELATIVE_DROP of the loss's level.
- Never when the accuracies are saturated (training and validation at 100%), nor when
  EarlyStopping ended the run (by the user's own measure, validation stopped improving)...
- ...unless EarlyStopping was set so tight that it stopped a validation loss still falling:
  patience 0-1 (one noisy epoch ends the run) or a min_delta larger than the gain per epoch.
  The finding names which setting, since the fix differs (`_early_stopping_too_eager`).
- Too few optimizer steps in all (`_too_few_steps`: a batch the size of the data set, a tiny
  training set, a handful of epochs): under FEW_STEPS steps with training and validation loss
  still falling steadily at the end. The finding says how many steps and why so few.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.findings import ADD_EARLY_STOPPING, RAISE_RATE, Evidence, Finding, Fix, Severity
from tb_trainhealth.rules.common_fixes import LR_FIX_SCHEDULE
from tb_trainhealth.rules.constant_yardstick import yardstick
from tb_trainhealth.rules.run_setup import EarlyStoppingSetup, early_stopping, optimizer_steps
from tb_trainhealth.series_math import finite_part, rank_correlation
from tb_trainhealth.signals import RunSignals, Series

MIN_EPOCHS = 4
# The judged stretch: the last TAIL_FRACTION of the epochs, at least TAIL_EPOCHS.
TAIL_FRACTION = 0.4
TAIL_EPOCHS = 3
MAX_RANK_CORRELATION = -0.9
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
# ...and the recent drop is at least this share of the loss's current level (per epoch, or over
# the last quarter of the steps): a loss at its noise floor (healthy_noisy_regression) moves by
# large shares of a tiny improvement, a loss near zero by tiny shares of a large one.
MIN_RELATIVE_DROP = 0.02


def _share_per_epoch(series: Series) -> float | None:
    """Per epoch, the share of the improvement so far that the last TAIL_EPOCHS delivered,
    when the tail falls steadily; else None."""
    series = finite_part(series)
    values = series.values
    if len(values) < MIN_EPOCHS:
        return None
    tail = values[-max(TAIL_EPOCHS, int(np.ceil(TAIL_FRACTION * len(values)))) :]
    if rank_correlation(tail) > MAX_RANK_CORRELATION:
        return None
    gained = float(np.max(values[: len(values) - TAIL_EPOCHS + 1]) - values[-1])
    recent = values[-TAIL_EPOCHS:]
    per_epoch = float(recent[0] - recent[-1]) / (len(recent) - 1)
    if gained <= 0 or per_epoch < MIN_RELATIVE_DROP * float(values[-1]):
        return None  # (a loss at its noise floor wobbles by shares of a tiny improvement)
    return per_epoch / gained


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
        return _early_stopping_too_eager(run, train, val)
    few = _too_few_steps(run, train, val)
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
    train_share, val_share = _share_per_epoch(train), _share_per_epoch(val)
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
# while each step moved the weights by less than loss_curve.FROZEN_UPDATE_RATIO of their size.
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
    from tb_trainhealth.rules.loss_curve import frozen_cause  # (loss_curve's rules load after these)

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
        Finding(
            code="undertrained",
            severity=Severity.WARNING,
            step=step,
            title=f"Learning far too slowly: {cause.split(':')[0]}",
            detail=(
                f"Both losses fell every epoch, and still fell {val_drop:.1%} (validation) and {train_drop:.1%} "
                f"(training) in the last one: the model is learning, at a crawl. Why: {cause}. At this pace "
                "more epochs cost far more than a step size that moves the weights."
            ),
            evidence=Evidence(
                tuple(s for s in (sig.EPOCH_LOSS, sig.EPOCH_VAL_LOSS) if run.get(s) is not None), None, step
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
        code="undertrained",
        severity=Severity.WARNING if cut_short else Severity.INFO,
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
                (ADD_EARLY_STOPPING,),
            ),
            Fix(
                "Or learn faster: a higher learning rate (if the loss curve is smooth).",
                "keras.optimizers.Adam(learning_rate=3e-3)",
                (RAISE_RATE,),
            ),
            LR_FIX_SCHEDULE,
        ),
    )


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


def _early_stopping_too_eager(run: RunSignals, train: Series, val: Series | None) -> list[Finding]:
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
        Finding(
            code="undertrained",
            severity=Severity.WARNING,
            step=step,
            title=f"EarlyStopping ({which}) stopped the run while validation loss was still improving",
            detail=(
                f"EarlyStopping ended training at {epochs}, yet over its last {ES_TAIL_EPOCHS} epochs the validation "
                f"loss still fell by {gain:.3g} per epoch ({share:.0%} of all its improvement so far, per epoch). "
                + why
            ),
            evidence=Evidence((sig.EPOCH_LOSS, sig.EPOCH_VAL_LOSS), None, step),
            fixes=(fix,),
        )
    ]


# Too few optimizer steps in all: fewer than FEW_STEPS, with both losses still falling steadily
# (rank correlation over the last TAIL_FRACTION of epochs at most MAX_RANK_CORRELATION) and still
# gaining, per epoch, at least FEW_STEPS_SHARE of the improvement so far (the level test,
# MIN_RELATIVE_DROP, is left out: a full-batch run moves its loss by ~1% an epoch). Measured
# (`bench/learn_less_zoo.py`): a CNN trained with batch_size = the 600-sample training set for
# 12 epochs (12 steps): 8.5% (training) and 9.6% (validation) per epoch, validation accuracy 0.68
# against its twin's 1.0. The healthy sweep's smallest runs take 150+ steps and end flat.
FEW_STEPS = 100
FEW_STEPS_SHARE = 0.04
# Under this many optimizer steps in all no trend can be judged, and no model is trained: a run
# that ends there with its loss still at least UNTRAINED_SHARE of the constant prediction's is
# undertrained by its step count alone (real-bug zoo dm_iris_one_epoch: 1 epoch, 3 steps, validation
# loss 0.74x the constant's). A model that already fits (a tiny, easy task) is not reported; nor are
# the test suite's short healthy fits (8-16 steps), which a step count alone cannot tell apart.
TOO_FEW_TO_JUDGE = 5
UNTRAINED_SHARE = 0.1


def _steady_share(series: Series) -> float | None:
    values = finite_part(series).values
    if len(values) < MIN_EPOCHS:
        return None
    tail = values[-max(TAIL_EPOCHS, int(np.ceil(TAIL_FRACTION * len(values)))) :]
    if rank_correlation(tail) > MAX_RANK_CORRELATION:
        return None
    gained = float(np.max(values[: len(values) - TAIL_EPOCHS + 1]) - values[-1])
    per_epoch = float(values[-TAIL_EPOCHS] - values[-1]) / (TAIL_EPOCHS - 1)
    return per_epoch / gained if gained > 0 and per_epoch > 0 else None


def _few_steps_reason(run: RunSignals, steps: int) -> str:
    samples, batch = run.settings.number("train_samples"), run.settings.number("batch_size")
    epochs = len(run.get(sig.EPOCH_LOSS) or ())
    if samples and batch and batch >= samples / 2:
        return f"batch_size={int(batch)} holds {batch / samples:.0%} of the {int(samples)} training samples: one or two steps per epoch"
    if samples and batch:
        return f"{int(samples)} training samples in batches of {int(batch)}, {epochs} epochs"
    return f"{epochs} epochs"


MORE_STEPS_FIX = Fix(
    "Take more optimizer steps: more epochs, with early stopping to find the end.",
    "model.fit(..., epochs=200, callbacks=[keras.callbacks.EarlyStopping(monitor='val_loss', "
    "patience=10, restore_best_weights=True)])",
    (ADD_EARLY_STOPPING,),
)


def _far_too_few_steps(run: RunSignals, steps: int, train: Series) -> list[Finding]:
    stick, val = yardstick(run), run.get(sig.EPOCH_VAL_LOSS)
    ended = finite_part(val if val is not None else train)
    if stick is None or not len(ended):
        return []
    gain = 1 - float(np.min(ended.values)) / stick.value  # (one epoch is all there may be: no judged_loss)
    if gain > 1 - UNTRAINED_SHARE:
        return []
    step = int(train.steps[-1])
    return [
        Finding(
            code="undertrained",
            severity=Severity.WARNING,
            step=step,
            title=f"Only {steps} optimizer steps in all: the model has barely started training",
            detail=(
                f"The whole run took {steps} optimizer steps ({_few_steps_reason(run, steps)}), too few to judge any "
                f"trend and far too few to train a model: its best loss is still {1 - gain:.0%} of what a constant "
                "prediction scores."
            ),
            evidence=Evidence((sig.EPOCH_LOSS,), None, step),
            fixes=(MORE_STEPS_FIX,),
        )
    ]


def _too_few_steps(run: RunSignals, train: Series, val: Series | None) -> list[Finding]:
    steps = optimizer_steps(run)
    if steps is not None and steps < TOO_FEW_TO_JUDGE and (far := _far_too_few_steps(run, steps, train)):
        return far
    if steps is None or steps >= FEW_STEPS or val is None:
        return []
    shares = [_steady_share(train), _steady_share(val)]
    if any(s is None or s < FEW_STEPS_SHARE for s in shares):
        return []
    share = min(s for s in shares if s is not None)
    step = int(train.steps[-1])
    samples, batch = run.settings.number("train_samples"), run.settings.number("batch_size")
    fixes = [MORE_STEPS_FIX]
    if samples and batch and batch > 64:
        fixes.insert(0, Fix("Use a smaller batch: more (noisier) steps per epoch.", "model.fit(..., batch_size=32)"))
    return [
        Finding(
            code="undertrained",
            severity=Severity.WARNING,
            step=step,
            title=f"Only {steps} optimizer steps in all, and the loss was still falling at every epoch",
            detail=(
                f"The whole run took {steps} optimizer steps ({_few_steps_reason(run, steps)}). Training and validation "
                f"loss still fell steadily at the end, each of the last epochs delivering {share:.0%} of all the "
                "improvement so far: the model stopped long before it could have."
            ),
            evidence=Evidence((sig.EPOCH_LOSS, sig.EPOCH_VAL_LOSS), None, step),
            fixes=tuple(fixes),
        )
    ]
