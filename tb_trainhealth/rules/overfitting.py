"""`overfitting`: validation loss rising while training loss keeps falling.

Modelled on SageMaker Debugger's Overtraining rule (validation loss not improving
for `patience_validation` evaluations while training loss improves), with the
rise measured relative to the best validation loss, not to the training loss:
a validation loss above the training loss alone is normal.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.findings import Evidence, Finding, Fix, Severity
from tb_trainhealth.rules.series_math import finite_part, rank_correlation
from tb_trainhealth.rules.training_data import validation_never_seen
from tb_trainhealth.signals import RunSignals

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
    if train_last > train_at_best * (1 - TRAIN_FALL):
        return []
    epochs = len(after)
    return [
        Finding(
            code="overfitting",
            severity=Severity.WARNING,
            step=best_step,
            title=f"Overfitting: validation loss up {last_val / best_val - 1:.0%} since step {best_step} while training loss fell",
            detail=(
                f"Validation loss was best at {best_val:.4g} (step {best_step}) and rose to {last_val:.4g} over "
                f"the next {epochs} evaluations, while training loss fell from {train_at_best:.4g} to {train_last:.4g}."
            ),
            evidence=Evidence((sig.EPOCH_LOSS, sig.EPOCH_VAL_LOSS), best_step, last_step),
            fixes=(
                Fix(
                    "Stop at the best epoch and keep its weights.",
                    "keras.callbacks.EarlyStopping(monitor='val_loss', patience=3, restore_best_weights=True)",
                ),
                Fix(
                    "Regularise: dropout and weight decay.",
                    "keras.layers.Dropout(0.3); keras.optimizers.AdamW(learning_rate=1e-3, weight_decay=1e-4)",
                ),
                Fix(
                    "Augment the training data (images shown; similar layers exist for other data).",
                    "augment = keras.Sequential([keras.layers.RandomFlip('horizontal'), keras.layers.RandomRotation(0.1)])",
                ),
                Fix("Use a smaller model or more training data."),
            ),
        )
    ]
