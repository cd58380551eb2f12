"""`loss_divergence`: the training loss running away, from the same curve the other loss rules judge.

Three shapes: the smoothed loss ending far above its best (having given back its progress), a
spike beyond the loss's own batch-to-batch noise that it did not recover from, and an epoch whose
mean loss jumped far above the best epoch before it. The curve (`training_loss`, after any
warm-up) comes from `loss_curve`.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.findings import Evidence, Finding, Fix, Severity
from tb_trainhealth.rules.common_fixes import CLIP_FIX, LR_FIX_LOWER, LR_FIX_SCHEDULE
from tb_trainhealth.rules.loss_curve import MIN_STEP_POINTS, is_noisy, training_loss
from tb_trainhealth.series_math import (
    MIN_NOISY_WINDOW,
    finite_part,
    head_level,
    rolling_median,
    smoothing_window,
    tail_level,
    trailing_percentile,
)
from tb_trainhealth.signals import RunSignals, Series

# Divergence: the run ends at least this many times above its best smoothed loss,
# having given back at least half of the progress it made.
DIVERGE_FACTOR = 2.0
DIVERGE_GIVEBACK = 0.5
# ... and it is critical when the loss ends far above where it started.
DIVERGE_CRITICAL_FACTOR = 10.0
# Spike: one point this many times above the level just before it (median) and above the
# starting loss (minibatch noise near convergence stays below the start)...
SPIKE_FACTOR = 10.0
# ...and this many times above the top of the recent batch-to-batch noise (its 90th
# percentile): per-sample losses (batch size 1) routinely swing 10x around their median...
SPIKE_NOISE_FACTOR = 3.0
SPIKE_NOISE_PERCENTILE = 90.0
# ...is a warning when the loss stayed up: the median of the points after it at least this
# many times the median of those before it. A spike the loss shrugged off is info if it towered over
# the starting loss (SPIKE_FACTOR times), else nothing (a 70x spike of a loss at 1e-4 is noise).
SPIKE_DAMAGE = 2.0
# ...and at least this share of the starting loss: near convergence (per-sample losses of 3e-4)
# a level of 6e-4 after a spike is not damage on the scale the loss started at.
DAMAGE_OF_START = 0.1
# An epoch's mean training loss this many times the best epoch before it: unstable training
# (Adam at lr 0.1: 0.21 -> 1.33). Healthy runs' epoch losses do not rise like that.
EPOCH_JUMP = 3.0
# Shrugged-off spikes that come back again and again are the loss's own (heavy-tailed) noise.
SPIKE_RARE = 3


def check_loss_divergence(run: RunSignals) -> list[Finding]:
    found = training_loss(run)
    if found is None:
        return []
    name, loss = found
    smooth = rolling_median(loss.values, smoothing_window(len(loss), is_noisy(name)))
    start, end = head_level(loss.values), tail_level(smooth)
    best_index = int(np.argmin(smooth))
    best = float(smooth[best_index])
    progress = max(start - best, 0.0)
    if best > 0 and end >= DIVERGE_FACTOR * best and end - best >= DIVERGE_GIVEBACK * progress:
        onset = int(loss.steps[best_index])
        critical = start > 0 and end >= DIVERGE_CRITICAL_FACTOR * start
        if best_index == 0:
            title = f"Loss diverged from the start: {end / best:.3g}x its starting level"
            detail = f"Training loss ({name}) rose from {best:.4g} at {run.at(onset)} to {end:.4g} by the end ({run.at(int(loss.steps[-1]))}): it never improved."
        else:
            title = f"Loss diverged: rising since {run.at(onset)} to {end / best:.3g}x its best"
            detail = (
                f"Training loss ({name}) fell from {start:.4g} to {best:.4g} at {run.at(onset)}, "
                f"then rose to {end:.4g} by the end ({run.at(int(loss.steps[-1]))})."
            )
        return [
            Finding(
                code=Code.LOSS_DIVERGENCE,
                severity=Severity.CRITICAL if critical else Severity.WARNING,
                step=onset,
                title=title,
                detail=detail,
                evidence=Evidence((name,), onset, int(loss.steps[-1])),
                fixes=(LR_FIX_LOWER, CLIP_FIX, LR_FIX_SCHEDULE),
            )
        ]
    # Both judged: a spike the loss shrugged off (info) must not hide epochs that stayed unstable.
    return sorted(_loss_spike(run, name, loss, start) + _epoch_jump(run, loss), key=lambda f: -f.severity)[:1]


def _loss_spike(run: RunSignals, name: str, loss: Series, start: float) -> list[Finding]:
    """Spikes judged against the loss's own scale: its recent level, its batch-to-batch noise
    and where it started; a warning only when the loss stayed up after it."""
    if start <= 0 or len(loss) < MIN_STEP_POINTS:
        return []
    window = smoothing_window(len(loss)) * 2 + 1
    # Each point against the `window` points just before it (at least MIN_NOISY_WINDOW).
    first = MIN_NOISY_WINDOW
    trailing = trailing_percentile(loss.values, window)[first:]
    noisy_top = trailing_percentile(loss.values, window, SPIKE_NOISE_PERCENTILE)[first:]
    values = loss.values[first:]
    spikes = (
        (values > SPIKE_FACTOR * np.maximum(trailing, 0))
        & (values > SPIKE_NOISE_FACTOR * noisy_top)
        & (values > start)
        & (trailing > 0)
    )
    if not spikes.any():
        return []
    lasting = [i for i in np.flatnonzero(spikes) if _stayed_up(values, i, window, start)]
    towering = np.flatnonzero(spikes & (values > SPIKE_FACTOR * start))
    if lasting:  # the onset: the first of the chain of spikes (each within `window` of the next) that left it up
        index = lasting[0]
        for earlier in np.flatnonzero(spikes)[::-1]:
            if index - window <= earlier < index:
                index = int(earlier)
        severity = Severity.WARNING
        after = "and the loss stayed up after it"
    elif 0 < towering.size <= SPIKE_RARE:
        index, severity = int(towering[0]), Severity.INFO
        after = "but the loss came back to its level a few steps later"
    else:
        return []  # back at its level at once: small on the loss's own scale, or its usual noise
    step = int(loss.steps[index + first])
    return [
        Finding(
            code=Code.LOSS_DIVERGENCE,
            severity=severity,
            step=step,
            title=f"Loss spiked from {trailing[index]:.3g} to {values[index]:.3g} at {run.at(step)}",
            detail=(
                f"Training loss ({name}) jumped to {values[index]:.4g} at {run.at(step)} from a recent level of "
                f"{trailing[index]:.4g} (the loss started at {start:.4g}), {after}; "
                f"{int(spikes.sum())} spike(s) beyond the batch-to-batch noise in all."
            ),
            evidence=Evidence((name,), step, step),
            fixes=(
                CLIP_FIX,
                LR_FIX_LOWER,
                Fix(
                    "Look for bad samples in the batch at that step (outliers, wrong labels, NaN-adjacent values).",
                    "for i, (x, y) in enumerate(ds): assert np.isfinite(x).all(), i",
                ),
            ),
        )
    ]


def _stayed_up(values: np.ndarray, index: int, window: int, start: float) -> bool:
    """Whether the loss stayed up after the spike: the median of the `window` points after it at
    least SPIKE_DAMAGE times the median of those before it, and DAMAGE_OF_START of the start."""
    before, after = values[max(0, index - window) : index], values[index + 1 : index + 1 + window]
    before, after = before[np.isfinite(before)], after[np.isfinite(after)]
    if len(after) < MIN_NOISY_WINDOW or not len(before):
        return False
    level = float(np.median(after))
    return level >= SPIKE_DAMAGE * float(np.median(before)) and level >= DAMAGE_OF_START * start


def _epoch_jump(run: RunSignals, loss: Series) -> list[Finding]:
    """An epoch whose mean training loss jumped EPOCH_JUMP times above the best epoch before it:
    the optimizer threw the weights (a loss that keeps spiking can keep a low per-step median).
    Info when the jump gave back only part of the progress (it stayed below the first epoch's
    loss) and the run went on to beat that best by its last epoch: a bump that cost nothing.
    The step: where the per-step `loss` first rose that high within that epoch (runs on a step axis)."""
    epochs = run.get(sig.EPOCH_LOSS)
    if epochs is None:
        return []
    epochs = finite_part(epochs)
    values = epochs.values
    if len(values) < 2:
        return []
    best_before = np.minimum.accumulate(values)[:-1]  # best_before[i - 1]: the best of epochs 0..i-1
    jumped = np.flatnonzero(
        (best_before > 0) & (values[1:] >= EPOCH_JUMP * best_before) & (values[1:] >= DAMAGE_OF_START * values[0])
    )
    if jumped.size == 0:
        return []
    i = int(jumped[0]) + 1
    best, step = float(best_before[i - 1]), int(epochs.steps[i])
    epoch = run.at(step) if run.axis == sig.EPOCH_AXIS else f"the epoch ending at step {step}"
    onset = step
    if run.axis != sig.EPOCH_AXIS:
        inside = (loss.steps > epochs.steps[i - 1]) & (loss.steps <= step) & (loss.values >= EPOCH_JUMP * best)
        onset = int(loss.steps[np.argmax(inside)]) if inside.any() else step
    recovered = values[-1] < best
    all_progress_lost = values[i] >= values[0]
    then = (
        f" It recovered: the last epoch ({values[-1]:.4g}) beat that best."
        if recovered
        else f" It never got back there: the last epoch's loss is {values[-1]:.4g}."
    )
    if all_progress_lost:
        then += f" The jump threw away all the progress: the first epoch's loss was {values[0]:.4g}."
    return [
        Finding(
            code=Code.LOSS_DIVERGENCE,
            severity=Severity.INFO if recovered and not all_progress_lost else Severity.WARNING,
            step=onset,
            title=f"Training became unstable: the epoch loss jumped from {best:.3g} to {values[i]:.3g}",
            detail=(
                f"The mean training loss of {epoch} was {values[i]:.4g}, "
                f"{values[i] / best:.3g}x the best epoch before it ({best:.4g}): large steps threw the "
                "weights away from where training had got to." + then
            ),
            evidence=Evidence((sig.EPOCH_LOSS,), int(epochs.steps[int(np.argmin(values[:i]))]), step),
            fixes=(LR_FIX_LOWER, CLIP_FIX, LR_FIX_SCHEDULE),
        )
    ]
