"""`loss_plateau`, and the training-loss curve every loss rule judges.

`training_loss` picks the training-loss series (after any warm-up) that this rule,
`loss_oscillation` and `loss_divergence` (their own modules) read. They need only a loss series, so they also work on
logs written by Keras' TensorBoard callback or plain `tf.summary.scalar`. All levels are
medians of smoothed stretches, so downsampled series (TensorBoard hands plugins ~1000
points) give the same answers as full ones.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.events import LintEvent
from tb_trainhealth.contract.vocab import LintCheck
from tb_trainhealth.findings import CHANGE_LABELS, RAISE_RATE, SCALE_INPUTS, Evidence, Finding, Fix, Severity
from tb_trainhealth.rules.fact_text import signed_percent
from tb_trainhealth.rules.frozen_steps import RAISE_RATE_FIX, frozen_cause
from tb_trainhealth.rules.weight_health import update_ratio_level
from tb_trainhealth.series_math import finite_part, relative_noise, relative_spread
from tb_trainhealth.signals import RunSignals, Series
from tb_trainhealth.yardstick import constant_baseline, loss_floor

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
# Lint findings that explain a plateau entirely: the plateau finding would only repeat them with
# a wrong first guess (inputs scaled to almost nothing: the model cannot see them).
_LINT_EXPLAINS = frozenset({LintCheck.TINY_INPUT})
# Swings with an inter-quartile range at least this share of their level are an oscillation
# (loss_oscillation), not a plateau.
OSCILLATION_SPREAD = 0.5


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


def _plateau_fixes(run: RunSignals, at_baseline: bool = False) -> tuple[Fix, ...]:
    """Why the weights do not move goes first (a mistake found at train start is its own finding,
    which the run's plan puts before this symptom); at the constant baseline with normal-sized steps, the
    data (labels that do not belong to their inputs), and no learning rate: the finding says the step size
    is not the cause. One fix per direction: no second "raise the rate"."""
    first: list[Fix] = []
    frozen = frozen_cause(run)
    normal_steps = frozen is None and at_baseline and update_ratio_level(run) is not None
    if frozen is not None:
        first.append(frozen[1])
    elif normal_steps:
        first.append(PLATEAU_FIXES[1])  # normal-sized steps that learn nothing: the data
    # A named cause is the one rate fix, if any (a rate that wrecked the model: lower it; vanishing
    # gradients: none); normal-sized steps: the finding says the step size is not the cause.
    raises = frozen is not None or normal_steps
    rest = [f for f in PLATEAU_FIXES if f not in first and not (raises and f.does(RAISE_RATE))]
    return tuple(first) + tuple(rest)


def check_loss_plateau(run: RunSignals) -> list[Finding]:
    found = training_loss(run)
    if found is None or run.first_of_each_check(LintEvent, _LINT_EXPLAINS):
        return []
    name, loss = found
    start, end, error = _start_and_end(name, loss)
    # (soft targets: the way down ends at their entropy, not at 0; see constant_yardstick.loss_floor)
    floor = loss_floor(run) if loss_floor(run) < start else 0.0
    progress = (start - end) / max(abs(start - floor), 1e-12)
    error *= abs(start) / max(abs(start - floor), 1e-12)  # (the noise, on the same scale)
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
                code=Code.LOSS_PLATEAU,
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
            code=Code.LOSS_PLATEAU,
            severity=Severity.WARNING,
            step=first,
            title=f"Loss is not decreasing: {signed_percent(-progress)} change over the whole run"
            + (f": {frozen[0].split(':')[0]}" if frozen is not None else ""),
            detail=(
                f"Training loss ({name}) started at {start:.4g} and ended at {end:.4g} "
                f"over {len(loss)} points ({run.at(first)} to {last})."
                + (
                    f" (Soft targets: no model gets below {floor:.4g}, their own entropy; the change is measured on the way down to it.)"
                    if floor
                    else ""
                )
                + because
            ),
            evidence=Evidence((name,), first, last),
            fixes=_plateau_fixes(run),
        )
    ]


PLATEAU_FIXES = (
    RAISE_RATE_FIX,
    Fix(
        "Check that the labels match the inputs (shuffled together, not constant) and the loss fits the task.",
        "print(np.unique(y_train, return_counts=True))",
        (CHANGE_LABELS,),
    ),
    Fix(
        "Normalise the inputs to zero mean and unit variance.",
        "norm = keras.layers.Normalization(); norm.adapt(x_train)  # first layer of the model",
        intents=(SCALE_INPUTS,),
    ),
    Fix(
        "Make sure the layers you expect to train are trainable.",
        "print([(l.name, l.trainable) for l in model.layers])",
    ),
)
