"""Loss-curve rules: `loss_plateau`, `loss_oscillation`, and the curve every loss rule judges.

`training_loss` picks the training-loss series (after any warm-up) that these rules and
`loss_divergence` (its own module) read. They need only a loss series, so they also work on
logs written by Keras' TensorBoard callback or plain `tf.summary.scalar`. All levels are
medians of smoothed stretches, so downsampled series (TensorBoard hands plugins ~1000
points) give the same answers as full ones.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import LintEvent
from tb_trainhealth.contract.vocab import LintCheck
from tb_trainhealth.findings import RAISE_RATE, Evidence, Finding, Fix, Severity
from tb_trainhealth.rules.common_fixes import CLIP_FIX, LR_FIX_LOWER, LR_FIX_SCHEDULE, RAISE
from tb_trainhealth.rules.constant_yardstick import constant_baseline
from tb_trainhealth.rules.fact_text import signed_percent
from tb_trainhealth.rules.run_setup import large_rate
from tb_trainhealth.rules.weight_health import HIGH_UPDATE_RATIO, update_ratio_level
from tb_trainhealth.series_math import finite_part, relative_noise, relative_spread
from tb_trainhealth.signals import RunSignals, Series

# A learning rate starting below this share of its peak is a warm-up: loss rules start after it.
WARMUP_LR_RATIO = 0.5
# Fewest points a loss curve needs before a shape can be called (per step / per epoch).
MIN_STEP_POINTS = 20
MIN_EPOCH_POINTS = 4

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
# a wrong first guess (inputs scaled to almost nothing: the model cannot see them).
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


def is_noisy(name: str) -> bool:
    """Per-step losses carry minibatch noise; per-epoch means do not."""
    return name != sig.EPOCH_LOSS


def _start_and_end(name: str, loss: Series) -> tuple[float, float, float]:
    """Robust start and end levels (medians of the first 10% / last 25% of a noisy per-step
    series) and the standard error of their relative difference due to minibatch noise."""
    if not is_noisy(name):
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
    level = float(np.median(late)) if is_noisy(name) else float(late[-1])
    if abs(level / baseline - 1) > BASELINE_TOLERANCE or relative_spread(late) >= OSCILLATION_SPREAD:
        return None
    settled = int(loss.steps[half])
    epochs = run.get(sig.EPOCH_LOSS)
    if epochs is not None and int(np.sum(epochs.steps > settled)) < MIN_BASELINE_EPOCHS:
        return None
    return baseline, how, settled


# Naming the cause of a plateau (not firing it): updates below this share of the weights mean the
# weights barely move. Measured (`bench/learn_less_zoo.py`): Adam 3e-6, SGD 1e-5, clipvalue=1e-6
# and Adadelta at its default 1e-3 all plateau with ratios of 1e-7 to 3e-5; healthy runs sit at
# 2.6e-4 to 1.5e-3 (weight_health), so a plateau below 1e-4 is the step size, not the data.
FROZEN_UPDATE_RATIO = 1e-4
# Clipping this tight (clipvalue / clipnorm / global_clipnorm) holds every update near zero.
TIGHT_CLIP = 1e-3
# Optimizers whose Keras default rate is far below what they need (Adadelta: the paper uses 1.0).
_DEFAULT_TOO_LOW = {"Adadelta": 1.0}


def _tight_clip(run: RunSignals) -> tuple[str, float] | None:
    for name in ("clipvalue", "clipnorm", "global_clipnorm"):
        value = run.settings.number(name)
        if value is not None and 0 < value <= TIGHT_CLIP:
            return name, value
    return None


def frozen_cause(run: RunSignals) -> tuple[str, Fix] | None:
    """Why the weights barely move, when they barely move: (sentence, the fix that goes first)."""
    ratio = update_ratio_level(run)
    lr = run.get(sig.LEARNING_RATE)
    rate = run.info.learning_rate
    tiny_lr = lr is not None and len(finite_part(lr)) and float(np.nanmax(lr.values)) < LOW_LR
    if not tiny_lr and (ratio is None or ratio >= FROZEN_UPDATE_RATIO):
        return None
    moved = f"each step moves the weights by only {ratio:.1e} of their size (healthy: about 1e-3)" if ratio else ""
    clip = _tight_clip(run)
    if clip is not None:
        name, value = clip
        return (
            f"gradient clipping {name}={value:g} holds every update tiny: {moved or 'the weights barely move'}",
            Fix(f"Loosen the clipping: {name}=1.0 is the usual setting.", f"keras.optimizers.SGD(..., {name}=1.0)"),
        )
    optimizer = run.info.optimizer or ""
    rate_text = f"{rate:.2g}" if rate else "in use"
    if large_rate(run) is not None:  # steps that barely move after a rate this large: it wrecked the model
        return (
            f"the learning rate ({rate_text}, {optimizer or 'optimizer'}) is far too large: its first updates "
            f"wrecked the model (dead or saturated units), and now {moved or 'the weights barely move'}",
            LR_FIX_LOWER,
        )
    if optimizer in _DEFAULT_TOO_LOW and (rate is None or rate < _DEFAULT_TOO_LOW[optimizer] / 10):
        good = _DEFAULT_TOO_LOW[optimizer]
        return (
            f"{optimizer} at learning rate {rate_text} (Keras' default; {optimizer} needs about {good:g}): {moved}",
            Fix(
                f"{RAISE} to what {optimizer} needs ({good:g}), or use Adam at 1e-3.",
                f"keras.optimizers.{optimizer}(learning_rate={good:g})",
                (RAISE_RATE,),
            ),
        )
    why = (
        f"each step moves the weights by only {ratio:.1e} of their size (healthy training: about 1e-3)."
        if ratio
        else "it is below 1e-5."
    )
    return (
        f"the learning rate ({rate_text}) is too small: {moved or 'it is below 1e-5'}",
        Fix(f"{RAISE}: {why}", PLATEAU_FIXES[0].code, (RAISE_RATE,)),
    )


def _plateau_fixes(run: RunSignals, at_baseline: bool = False) -> tuple[Fix, ...]:
    """What else is known goes first: a mistake found at train start, then why the weights do not
    move; at the constant baseline with normal-sized steps, the data (labels that do not belong to
    their inputs) before the learning rate. One fix per direction: no second "raise the rate"."""
    first: list[Fix] = []
    known = [e.check.value for e in run.events_of(LintEvent) if e.check in _LINT_CAUSES]
    if known:
        first.append(
            Fix(
                f"Fix what the train-start checks found first ({', '.join(sorted(set(known)))}): "
                "see those findings. A model that cannot fit its labels sits at the constant baseline."
            )
        )
    frozen = frozen_cause(run)
    if frozen is not None:
        first.append(frozen[1])
    elif at_baseline and update_ratio_level(run) is not None:
        first.append(PLATEAU_FIXES[1])  # normal-sized steps that learn nothing: the data
    raises = any(f.does(RAISE_RATE) for f in first)
    rest = [f for f in PLATEAU_FIXES if f not in first and not (raises and f.does(RAISE_RATE))]
    return tuple(first) + tuple(rest)


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
    frozen = frozen_cause(run)
    because = f" Why: {frozen[0]}." if frozen is not None else ""
    if constant is not None:
        baseline, how, settled = constant
        title = f"Loss settled at the constant-prediction baseline ({baseline:.4g}): the model ignores its input"
        if frozen is None and update_ratio_level(run) is not None:
            because = (
                " The weights move at a normal pace, so the step size is not the cause: labels that do not "
                "belong to their inputs (shuffled or joined apart), or inputs that carry no signal, do this."
            )
        return [
            Finding(
                code="loss_plateau",
                severity=Severity.WARNING,
                step=settled,
                title=title if frozen is None else f"{title}: {frozen[0].split(':')[0]}",
                detail=(
                    f"Training loss ({name}) sits at {end:.4g} from {run.at(settled)} on, within "
                    f"{BASELINE_TOLERANCE:.0%} of {baseline:.4g}, {how}: what a model that predicts the same "
                    "output for every input reaches. It learned the label distribution, nothing from the inputs."
                    + because
                ),
                evidence=Evidence((name,), settled, last),
                fixes=_plateau_fixes(run, at_baseline=True),
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
            title=f"Loss is not decreasing: {signed_percent(-progress)} change over the whole run"
            + (f": {frozen[0].split(':')[0]}" if frozen is not None else ""),
            detail=(
                f"Training loss ({name}) started at {start:.4g} and ended at {end:.4g} "
                f"over {len(loss)} points ({run.at(first)} to {last})." + because
            ),
            evidence=Evidence((name,), first, last),
            fixes=_plateau_fixes(run),
        )
    ]


PLATEAU_FIXES = (
    Fix(
        "Raise the learning rate (the default 1e-3 for Adam is a good start; SGD often needs 1e-2 to 1e-1).",
        "model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3), loss=..., metrics=...)",
        (RAISE_RATE,),
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
            code="loss_oscillation",
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
