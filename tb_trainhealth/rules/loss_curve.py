"""Loss-curve rules: `loss_divergence`, `loss_plateau`, `loss_oscillation`.

They need only a loss series, so they also work on logs written by Keras'
TensorBoard callback or plain `tf.summary.scalar`. All levels are medians of
smoothed stretches, so downsampled series (TensorBoard hands plugins ~1000
points) give the same answers as full ones.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import LintEvent
from tb_trainhealth.contract.vocab import LintCheck
from tb_trainhealth.findings import Evidence, Finding, Fix, Severity
from tb_trainhealth.rules.common_fixes import CLIP_FIX, LR_FIX_LOWER, LR_FIX_SCHEDULE
from tb_trainhealth.rules.series_math import (
    MIN_NOISY_WINDOW,
    finite_part,
    head_level,
    relative_noise,
    relative_spread,
    rolling_median,
    smoothing_window,
    tail_level,
    trailing_percentile,
)
from tb_trainhealth.rules.training_data import constant_baseline
from tb_trainhealth.rules.weight_health import HIGH_UPDATE_RATIO, LOW_UPDATE_RATIO, update_ratio_level
from tb_trainhealth.signals import RunSignals, Series

# A learning rate starting below this share of its peak is a warm-up: loss rules start after it.
WARMUP_LR_RATIO = 0.5
# Fewest points a loss curve needs before a shape can be called (per step / per epoch).
MIN_STEP_POINTS = 20
MIN_EPOCH_POINTS = 4

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

# Plateau: less than this relative improvement from the start (median of the first
# 5% of steps) to the end (median of the last 25%), with swings smaller than
# OSCILLATION_SPREAD. losslint's stagnation check uses 1% between the last two
# quarters; from the start of a noisy per-step curve the medians themselves
# wander by a few percent (per-batch CE noise ~10% over ~50 points), hence 5%.
PLATEAU_PROGRESS = 0.05
# ...or, on very noisy short curves, less than this many standard errors of that difference.
PLATEAU_NOISE_ERRORS = 2.0
# Constant predictor: the second half's loss within this share of the loss a model that
# ignores its input reaches (label entropy for cross-entropy, target variance for MSE).
BASELINE_TOLERANCE = 0.03
# ...for at least this many epochs: healthy models often sit at the baseline for an epoch
# or so before they find the signal, and a plateau called then would stop them (stop_on).
MIN_BASELINE_EPOCHS = 2
# Train-start lint findings that leave a model stuck at that baseline.
_LINT_CAUSES = frozenset({
    LintCheck.PROBABILITIES_AS_LOGITS, LintCheck.LOGITS_AS_PROBABILITIES, LintCheck.SOFTMAX_SINGLE_UNIT,
    LintCheck.SIGMOID_WITH_CATEGORICAL, LintCheck.RELU_WITH_CROSS_ENTROPY, LintCheck.TARGETS_OUT_OF_OUTPUT_RANGE,
    LintCheck.SINGLE_CLASS, LintCheck.UNNORMALIZED_INPUT, LintCheck.LABELS_OUTSIDE_UNIT_INTERVAL,
    LintCheck.CONSTANT_INPUT, LintCheck.FRACTIONAL_SPARSE_LABELS, LintCheck.TINY_INPUT,
})  # fmt: skip
# Lint findings that explain a plateau entirely: the plateau finding would only repeat them with
# a wrong first guess (inputs scaled to almost nothing: the model cannot see them; issue 23).
_LINT_EXPLAINS = frozenset({LintCheck.TINY_INPUT})
# A peak learning rate below this is a likely reason for no progress.
LOW_LR = 1e-5
# Oscillation: no progress (the second half's median at least 90% of the untrained
# loss: a learning rate too high to settle does no better than the untrained model;
# minibatch noise around real progress stays below that), and the second half swings
# with an inter-quartile range at least this share of its level, trending neither down
# nor up (last quarter's median within OSCILLATION_TREND of the third quarter's).
OSCILLATION_SPREAD = 0.5
OSCILLATION_MAX_PROGRESS = 0.9
OSCILLATION_START_POINTS = 3
OSCILLATION_TREND = 0.9
# Above this multiple of the starting loss the run is diverging, not oscillating.
OSCILLATION_MAX_LEVEL = 3.0


def training_loss(run: RunSignals) -> tuple[str, Series] | None:
    """The best available training-loss curve (per-step, else per-epoch, else Keras' batch
    means), from the end of any learning-rate warm-up on: a warm-up may raise the loss or
    hold it flat on purpose."""
    warmup_end = _warmup_end(run)
    for name, minimum in (
        (sig.LOSS, MIN_STEP_POINTS),
        (sig.EPOCH_LOSS, MIN_EPOCH_POINTS),
        (sig.BATCH_LOSS, MIN_STEP_POINTS),
    ):
        series = run.get(name)
        if series is not None:
            finite = finite_part(series)
            keep = finite.steps >= warmup_end
            finite = Series(finite.steps[keep], finite.values[keep])
            if len(finite) >= minimum:
                return name, finite
    return None


def _warmup_end(run: RunSignals) -> int:
    """Step where a rising learning rate (warm-up) first reaches its peak; 0 without warm-up."""
    lr = run.get(sig.LEARNING_RATE)
    if lr is None:
        return 0
    lr = finite_part(lr)
    if len(lr) < 2 or lr.values.max() <= 0 or lr.values[0] >= WARMUP_LR_RATIO * lr.values.max():
        return 0
    return int(lr.steps[int(np.argmax(lr.values >= lr.values.max() * (1 - 1e-6)))])


def _is_noisy(name: str) -> bool:
    """Per-step losses carry minibatch noise; per-epoch means do not."""
    return name != sig.EPOCH_LOSS


def check_loss_divergence(run: RunSignals) -> list[Finding]:
    found = training_loss(run)
    if found is None:
        return []
    name, loss = found
    smooth = rolling_median(loss.values, smoothing_window(len(loss), _is_noisy(name)))
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
                code="loss_divergence",
                severity=Severity.CRITICAL if critical else Severity.WARNING,
                step=onset,
                title=title,
                detail=detail,
                evidence=Evidence((name,), onset, int(loss.steps[-1])),
                fixes=(LR_FIX_LOWER, CLIP_FIX, LR_FIX_SCHEDULE),
            )
        ]
    return _loss_spike(run, name, loss, start) or _epoch_jump(run)


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
            code="loss_divergence",
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


def _epoch_jump(run: RunSignals) -> list[Finding]:
    """An epoch whose mean training loss jumped EPOCH_JUMP times above the best epoch before it:
    the optimizer threw the weights (a loss that keeps spiking can keep a low per-step median)."""
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
    return [
        Finding(
            code="loss_divergence",
            severity=Severity.WARNING,
            step=step,
            title=f"Training became unstable: the epoch loss jumped from {best:.3g} to {values[i]:.3g}",
            detail=(
                f"The mean training loss of {epoch} was {values[i]:.4g}, "
                f"{values[i] / best:.3g}x the best epoch before it ({best:.4g}): large steps threw the "
                "weights away from where training had got to."
            ),
            evidence=Evidence((sig.EPOCH_LOSS,), int(epochs.steps[int(np.argmin(values[:i]))]), step),
            fixes=(LR_FIX_LOWER, CLIP_FIX, LR_FIX_SCHEDULE),
        )
    ]


def _start_and_end(name: str, loss: Series) -> tuple[float, float, float]:
    """Robust start and end levels (medians of the first 10% / last 25% of a noisy per-step
    series) and the standard error of their relative difference due to minibatch noise."""
    if not _is_noisy(name):
        return float(loss.values[0]), float(loss.values[-1]), 0.0
    head = loss.values[: max(3, len(loss) // 10)]
    tail = loss.values[-max(3, len(loss) // 4) :]
    # The median of k noisy points wanders by ~1.25 * noise / sqrt(k).
    noise = relative_noise(loss.values)
    error = 1.25 * noise * np.sqrt(1 / len(head) + 1 / len(tail))
    return float(np.median(head)), float(np.median(tail)), float(error)


def _at_constant_baseline(run: RunSignals, name: str, loss: Series) -> tuple[float, str, int] | None:
    """(baseline, how computed, step it settled) when the second half of the run sits at the
    loss of a model that ignores its input: it predicts a constant."""
    found = constant_baseline(run)
    if found is None or found[0] <= 0:
        return None
    baseline, how = found
    half = len(loss) // 2
    late = loss.values[half:]
    level = float(np.median(late)) if _is_noisy(name) else float(late[-1])
    if abs(level / baseline - 1) > BASELINE_TOLERANCE or relative_spread(late) >= OSCILLATION_SPREAD:
        return None
    settled = int(loss.steps[half])
    epochs = run.get(sig.EPOCH_LOSS)
    if epochs is not None and int(np.sum(epochs.steps > settled)) < MIN_BASELINE_EPOCHS:
        return None
    return baseline, how, settled


def _plateau_fixes(run: RunSignals) -> tuple[Fix, ...]:
    """What else is known goes first: a mistake found at train start, then a tiny learning rate."""
    first: list[Fix] = []
    known = [e.check.value for e in run.events_of(LintEvent) if e.check in _LINT_CAUSES]
    if known:
        first.append(
            Fix(
                f"Fix what the train-start checks found first ({', '.join(sorted(set(known)))}): "
                "see those findings. A model that cannot fit its labels sits at the constant baseline."
            )
        )
    ratio = update_ratio_level(run)
    lr = run.get(sig.LEARNING_RATE)
    if ratio is not None and ratio < LOW_UPDATE_RATIO:
        first.append(
            Fix(
                f"Raise the learning rate: each step moves the weights by only {ratio:.1e} of their size "
                "(healthy training: about 1e-3).",
                PLATEAU_FIXES[0].code,
            )
        )
    elif lr is not None and len(finite_part(lr)) and float(np.nanmax(lr.values)) < LOW_LR:
        first.append(PLATEAU_FIXES[0])
    return tuple(first) + tuple(f for f in PLATEAU_FIXES if f not in first)


def check_loss_plateau(run: RunSignals) -> list[Finding]:
    found = training_loss(run)
    if found is None or run.first_of_each_check(LintEvent, _LINT_EXPLAINS):
        return []
    name, loss = found
    start, end, error = _start_and_end(name, loss)
    progress = (start - end) / max(abs(start), 1e-12)
    late = loss.values[len(loss) // 2 :]
    first, last = int(loss.steps[0]), int(loss.steps[-1])
    constant = _at_constant_baseline(run, name, loss)
    if constant is not None:
        baseline, how, settled = constant
        return [
            Finding(
                code="loss_plateau",
                severity=Severity.WARNING,
                step=settled,
                title=f"Loss settled at the constant-prediction baseline ({baseline:.4g}): the model ignores its input",
                detail=(
                    f"Training loss ({name}) sits at {end:.4g} from {run.at(settled)} on, within "
                    f"{BASELINE_TOLERANCE:.0%} of {baseline:.4g}, {how}: what a model that predicts the same "
                    "output for every input reaches. It learned the label distribution, nothing from the inputs."
                ),
                evidence=Evidence((name,), settled, last),
                fixes=_plateau_fixes(run),
            )
        ]
    # A loss that got worse is not "too little learning": the divergence and oscillation rules own it.
    threshold = max(PLATEAU_PROGRESS, PLATEAU_NOISE_ERRORS * error)
    if abs(progress) >= threshold or relative_spread(late) >= OSCILLATION_SPREAD:
        return []
    return [
        Finding(
            code="loss_plateau",
            severity=Severity.WARNING,
            step=first,
            title=f"Loss is not decreasing: {progress:.1%} change over the whole run",
            detail=(
                f"Training loss ({name}) started at {start:.4g} and ended at {end:.4g} "
                f"over {len(loss)} points ({run.at(first)} to {last})."
            ),
            evidence=Evidence((name,), first, last),
            fixes=_plateau_fixes(run),
        )
    ]


PLATEAU_FIXES = (
    Fix(
        "Raise the learning rate (the default 1e-3 for Adam is a good start; SGD often needs 1e-2 to 1e-1).",
        "model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3), loss=..., metrics=...)",
    ),
    Fix(
        "Check that the labels match the inputs (shuffled together, not constant) and the loss fits the task.",
        "print(np.unique(y_train, return_counts=True))",
    ),
    Fix(
        "Normalise the inputs to zero mean and unit variance.",
        "norm = keras.layers.Normalization(); norm.adapt(x_train)  # first layer of the model",
    ),
    Fix(
        "Make sure the layers you expect to train are trainable.",
        "print([(l.name, l.trainable) for l in model.layers])",
    ),
)


def check_loss_oscillation(run: RunSignals) -> list[Finding]:
    found = training_loss(run)
    if found is None:
        return []
    name, loss = found
    # The untrained model's loss (median of the first few points): neither a run that
    # blows up nor one that converges in its first steps may move the reference.
    start = float(np.median(loss.values[:OSCILLATION_START_POINTS]))
    half = len(loss) // 2
    late = loss.values[half:]
    level = float(np.median(late))
    if start <= 0 or not OSCILLATION_MAX_PROGRESS * start <= level <= OSCILLATION_MAX_LEVEL * start:
        return []
    spread = relative_spread(late)
    quarter = len(late) // 2
    # Swinging around a level, not trending: the last quarter within ~10% of the third.
    trend = np.median(late[quarter:]) / np.median(late[:quarter])
    if spread < OSCILLATION_SPREAD or not OSCILLATION_TREND <= trend <= 1 / OSCILLATION_TREND:
        return []
    # Where the update size is measured, too high a learning rate shows in it: normal-sized
    # updates (~1e-3 of the weights) with a swinging loss are minibatch noise, not oscillation.
    ratio = update_ratio_level(run)
    if ratio is not None and ratio < HIGH_UPDATE_RATIO:
        return []
    onset = int(loss.steps[half])
    return [
        Finding(
            code="loss_oscillation",
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
                ),
                LR_FIX_SCHEDULE,
                CLIP_FIX,
            ),
        )
    ]
