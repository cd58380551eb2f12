"""How much a loss still fell at the end of a run: the tail trend `undertrained` and its
kin judge (cut short, stopped too early, too few steps)."""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.findings import Evidence, Finding, Fix, Severity
from tb_trainhealth.series_math import finite_part, rank_correlation
from tb_trainhealth.signals import RunSignals, Series

MIN_EPOCHS = 4
# The judged stretch: the last TAIL_FRACTION of the epochs, at least TAIL_EPOCHS.
TAIL_FRACTION = 0.4
TAIL_EPOCHS = 3
MAX_RANK_CORRELATION = -0.9
# (Per epoch, the last epochs fell steadily: rank correlation with time at most MAX_RANK_CORRELATION.)
# ...and the recent drop is at least this share of the loss's current level (per epoch, or over
# the last quarter of the steps): a loss at its noise floor (healthy_noisy_regression) moves by
# large shares of a tiny improvement, a loss near zero by tiny shares of a large one.
MIN_RELATIVE_DROP = 0.02


def share_per_epoch(series: Series, min_relative_drop: float = MIN_RELATIVE_DROP) -> float | None:
    """Per epoch, the share of the improvement so far that the last TAIL_EPOCHS delivered, when
    the tail falls steadily by at least `min_relative_drop` of its level an epoch; else None."""
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
    if gained <= 0 or per_epoch <= 0 or per_epoch < min_relative_drop * float(values[-1]):
        return None  # (a loss at its noise floor wobbles by shares of a tiny improvement)
    return per_epoch / gained


def undertrained_warning(
    run: RunSignals, step: int, title: str, detail: str, fixes: tuple[Fix, ...], series: tuple[str, ...] = ()
) -> Finding:
    """An `undertrained` warning at `step`, its evidence the epoch losses the run has (or `series`)."""
    shown = series or tuple(s for s in (sig.EPOCH_LOSS, sig.EPOCH_VAL_LOSS) if run.get(s) is not None)
    return Finding(
        code=Code.UNDERTRAINED,
        severity=Severity.WARNING,
        step=step,
        title=title,
        detail=detail,
        evidence=Evidence(shown, None, step),
        fixes=fixes,
    )
