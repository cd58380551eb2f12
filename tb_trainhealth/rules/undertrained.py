"""`undertrained`: the run ended while training and validation loss were still falling.

Judged on the per-epoch losses over the last part of the run (a trend, not the last
two points): falling nearly every epoch (Spearman rank correlation with time at most
-0.9) and still dropping by at least 2% per epoch at the end (and by 1% of the first
epoch's loss: a loss already near zero keeps a constant relative drop that buys nothing). A converging run slows
down to about 1% per epoch or less (the healthy demo runs end at 0.1-1%); a run cut
short does not. Runs without validation data are not judged: a falling training loss
alone may as well be memorising.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.findings import Evidence, Finding, Fix, Severity
from tb_trainhealth.rules.common_fixes import LR_FIX_SCHEDULE
from tb_trainhealth.rules.series_math import finite_part, rank_correlation
from tb_trainhealth.signals import RunSignals, Series

MIN_EPOCHS = 4
# The judged stretch: the last TAIL_FRACTION of the epochs, at least TAIL_EPOCHS.
TAIL_FRACTION = 0.4
TAIL_EPOCHS = 3
MAX_RANK_CORRELATION = -0.9
# Still improving: the last TAIL_EPOCHS epochs dropped at least this much per epoch (geometric mean)...
MIN_DROP_PER_EPOCH = 0.02
# ...and by at least this share of the first epoch's loss per epoch: a loss already near zero
# (an easy task, fitted) keeps a constant relative drop that buys nothing.
MIN_ABSOLUTE_DROP = 0.01


def _still_falling(series: Series) -> float | None:
    """The recent relative drop per epoch when the tail falls steadily, else None."""
    series = finite_part(series)
    if len(series) < MIN_EPOCHS or np.any(series.values <= 0):
        return None
    tail = series.values[-max(TAIL_EPOCHS, int(np.ceil(TAIL_FRACTION * len(series)))) :]
    if rank_correlation(tail) > MAX_RANK_CORRELATION:
        return None
    recent = series.values[-TAIL_EPOCHS:]
    drop = 1.0 - (recent[-1] / recent[0]) ** (1.0 / (len(recent) - 1))
    absolute = (recent[0] - recent[-1]) / (len(recent) - 1)
    if drop < MIN_DROP_PER_EPOCH or absolute < MIN_ABSOLUTE_DROP * series.values[0]:
        return None
    return float(drop)


def check_undertrained(run: RunSignals) -> list[Finding]:
    train, val = run.get(sig.EPOCH_LOSS), run.get(sig.EPOCH_VAL_LOSS)
    if train is None or val is None:
        return []
    train_drop, val_drop = _still_falling(train), _still_falling(val)
    if train_drop is None or val_drop is None:
        return []
    last_step, epochs = int(val.steps[-1]), len(val)
    which, rate = "validation and training loss", val_drop
    return [
        Finding(
            code="undertrained",
            severity=Severity.WARNING,
            step=last_step,
            title=f"Stopped while still improving: {which} falling {rate:.1%} per epoch at the end",
            detail=(
                f"Over the last epochs of {epochs}, {which} fell nearly every epoch and the last "
                f"{TAIL_EPOCHS} epochs still took {rate:.1%} off per epoch (training loss: {train_drop:.1%}). "
                "A converged run slows to about 1% per epoch or less; this one was cut short."
            ),
            evidence=Evidence(
                tuple(s for s in (sig.EPOCH_LOSS, sig.EPOCH_VAL_LOSS) if run.get(s) is not None), None, last_step
            ),
            fixes=(
                Fix(
                    "Train for more epochs and let early stopping find the end.",
                    "model.fit(..., epochs=100, callbacks=[keras.callbacks.EarlyStopping(monitor='val_loss', "
                    "patience=5, restore_best_weights=True)])",
                ),
                Fix(
                    "Or learn faster: a higher learning rate (if the loss curve is smooth).",
                    "keras.optimizers.Adam(learning_rate=3e-3)",
                ),
                LR_FIX_SCHEDULE,
            ),
        )
    ]
