"""`overfitting`: validation loss rising while training loss keeps falling.

Modelled on SageMaker Debugger's Overtraining rule (validation loss not improving
for `patience_validation` evaluations while training loss improves), with the
rise measured relative to the best validation loss, not to the training loss:
a validation loss above the training loss alone is normal.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.events import FitEndEvent
from tb_trainhealth.findings import ADD_EARLY_STOPPING, ADD_REGULARIZATION, Evidence, Finding, Fix, Severity
from tb_trainhealth.rules.common_fixes import RESTORE_BEST_FIX
from tb_trainhealth.rules.training_data import LOSS_MEMORISED, validation_never_seen
from tb_trainhealth.rules.weight_health import HIGH_UPDATE_RATIO, update_ratio_level
from tb_trainhealth.series_math import finite_part, rank_correlation
from tb_trainhealth.signals import RunSignals, Series
from tb_trainhealth.yardstick import beats_constant, constant_baseline

# Evaluations after the best validation loss before calling it (Keras EarlyStopping
# users commonly pick 3-10; we use the low end so the finding comes in time).
PATIENCE = 3
# Validation loss must end this much above its best...
VAL_RISE = 0.10
# ...while training loss fell by at least this much over the same stretch...
TRAIN_FALL = 0.02
# ...and the validation loss after its best keeps rising (Spearman rank correlation with
# time): a flat but noisy validation loss also ends above its lucky minimum.
MIN_RISE_CORRELATION = 0.7
# Instability, not overfitting: after the best epoch the epoch training loss rose above this
# multiple of its lowest value before it, or a per-step loss jumped this many times above the
# level just before the best epoch (Adam at lr 0.1: validation loss from 4.6e-06 to 2.17), or
# the update ratios are above weight_health.HIGH_UPDATE_RATIO. Overfitting lowers the training
# loss while the validation loss rises; it does not throw the training loss up.
INSTABILITY_JUMP = 1.5
INSTABILITY_SPIKE = 10.0
# Rises beyond this are shown as values, not as a percentage in the thousands.
MAX_PERCENT_SHOWN = 3.0


def _rise(before: float, after: float) -> str:
    """ "37%" for a moderate rise, "from 4.6e-06 to 2.17" where a percentage would say nothing."""
    ratio = after / before - 1
    return f"{ratio:.0%}" if ratio <= MAX_PERCENT_SHOWN else f"from {before:.3g} to {after:.3g}"


def _unstable(run: RunSignals, train: Series, best_step: int) -> bool:
    """Validation loss thrown up by unstable training (weights thrown around by too large steps),
    not by memorising: the training loss itself jumped after the best epoch, or the updates are
    far too large. loss_divergence / loss_oscillation name that (fix: a lower learning rate)."""
    after = train.values[train.steps > best_step]
    before = train.values[train.steps <= best_step]
    if len(after) and len(before) and float(np.max(after)) > INSTABILITY_JUMP * float(np.min(before)):
        return True
    per_step = run.get(sig.LOSS)
    if per_step is not None:
        steps, values = per_step.steps, per_step.values
        level = values[(steps <= best_step) & np.isfinite(values)]
        later = values[(steps > best_step) & np.isfinite(values)]
        if len(level) >= 5 and len(later) and float(np.max(later)) > INSTABILITY_SPIKE * float(np.median(level[-50:])):
            return True
    ratio = update_ratio_level(run)
    return ratio is not None and ratio > HIGH_UPDATE_RATIO


def _learned_nothing(run: RunSignals, best_val: float, train_last: float) -> bool:
    """Neither loss ever got clear of what a constant prediction costs (the label prior's entropy,
    the targets' variance): there is no fit to overdo, only noise memorised (labels that do not
    belong to their inputs: the plateau-at-baseline or label finding says so). Measured
    (`python bench/learn_less_zoo.py --only labels_shuffled_cnn --first-seed 4 --seeds 1`):
    validation loss never below 1.394 against an entropy of 1.383, training loss ending 4% below it,
    named overfitting; every overfitting run in the zoos beats the baseline first."""
    baseline = constant_baseline(run)
    if baseline is None:
        return False
    return not beats_constant(best_val, baseline[0]) and train_last >= (1 - LOSS_MEMORISED) * baseline[0]


def check_overfitting(run: RunSignals) -> list[Finding]:
    train, val = run.get(sig.EPOCH_LOSS), run.get(sig.EPOCH_VAL_LOSS)
    if train is None or val is None or validation_never_seen(run):
        return []  # (a validation set of unseen classes is a label_problem, not overfitting)
    val = finite_part(val)
    if len(val) < PATIENCE + 2:
        return []
    best = int(np.argmin(val.values))
    after = val.values[best + 1 :]
    if len(after) < PATIENCE:
        return []
    best_val, last_val = float(val.values[best]), float(val.values[-1])
    if best_val <= 0 or last_val < best_val * (1 + VAL_RISE) or np.median(after) < best_val * (1 + VAL_RISE / 2):
        return []
    if rank_correlation(val.values[best + 1 :]) < MIN_RISE_CORRELATION:
        return []
    train = finite_part(train)
    best_step, last_step = int(val.steps[best]), int(val.steps[-1])
    train_at_best = np.interp(best_step, train.steps, train.values)
    train_last = float(train.values[-1])
    if train_last > train_at_best * (1 - TRAIN_FALL) or _unstable(run, train, best_step):
        return []
    if _learned_nothing(run, best_val, train_last):
        return []
    epochs = len(after)
    stopped = run.stopped_by("EarlyStopping")
    if stopped is not None:
        return [_handled(run, stopped, best_step, last_step, best_val, last_val)]
    return [
        Finding(
            code=Code.OVERFITTING,
            severity=Severity.WARNING,
            step=best_step,
            title=f"Overfitting: validation loss up {_rise(best_val, last_val)} since {run.at(best_step)} while training loss fell",
            detail=(
                f"Validation loss was best at {best_val:.4g} ({run.at(best_step)}) and rose to {last_val:.4g} over "
                f"the next {epochs} evaluations, while training loss fell from {train_at_best:.4g} to {train_last:.4g}."
            ),
            evidence=Evidence((sig.EPOCH_LOSS, sig.EPOCH_VAL_LOSS), best_step, last_step),
            fixes=(
                Fix(
                    "Stop at the best epoch and keep its weights.",
                    "keras.callbacks.EarlyStopping(monitor='val_loss', patience=3, restore_best_weights=True)",
                    (ADD_EARLY_STOPPING,),
                ),
                Fix(
                    "Regularise: dropout and weight decay.",
                    "keras.layers.Dropout(0.3); keras.optimizers.AdamW(learning_rate=1e-3, weight_decay=1e-4)",
                    intents=(ADD_REGULARIZATION,),
                ),
                Fix(
                    "Augment the training data (images shown; similar layers exist for other data).",
                    "augment = keras.Sequential([keras.layers.RandomFlip('horizontal'), keras.layers.RandomRotation(0.1)])",
                ),
                Fix("Use a smaller model or more training data.", intents=(ADD_REGULARIZATION,)),
            ),
        )
    ]


def _handled(run: RunSignals, end: FitEndEvent, best_step: int, last_step: int, best: float, last: float) -> Finding:
    """EarlyStopping ended the run after the validation loss turned: the user handled it."""
    restored = any(c.name == "EarlyStopping" and c.restore_best_weights for c in run.info.callbacks)
    kept = "restored the weights of the best epoch" if restored else "kept the last weights, not the best ones"
    return Finding(
        code=Code.OVERFITTING,
        severity=Severity.INFO,
        step=best_step,
        title=f"EarlyStopping stopped the run as the validation loss rose ({_rise(best, last)} after {run.at(best_step)})",
        detail=(
            f"Validation loss was best at {best:.4g} ({run.at(best_step)}) and rose to {last:.4g} by {run.at(last_step)}; "
            f"EarlyStopping ended training at epoch {end.epochs_run} of {end.epochs_planned} and {kept}."
        ),
        evidence=Evidence((sig.EPOCH_LOSS, sig.EPOCH_VAL_LOSS), best_step, last_step),
        fixes=() if restored else (RESTORE_BEST_FIX,),
    )
