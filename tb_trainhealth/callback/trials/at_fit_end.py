"""When trials run: at the end of a fit whose final diagnosis holds a warning or critical of the
learning kind (never on a healthy run), within TRIAL_SHARE of the fit's wall time.

What they need is kept at train start (`TrialSetup`): the starting weights (a copy, for models up
to MAX_KEPT_PARAMS), the learning rate, and the fit's data adapter (to draw a sample from a new pass
over the data at the end, only when trials run).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import Any

import numpy as np

from tb_trainhealth.callback.fit_context import optimizer_settings
from tb_trainhealth.callback.frameworks.which_keras import is_tf_keras
from tb_trainhealth.callback.preflight.clone import CloneError
from tb_trainhealth.callback.record.recording import Recording
from tb_trainhealth.callback.trials.runner import run_trials
from tb_trainhealth.callback.trials.sample import take_sample
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.events import NanOriginEvent
from tb_trainhealth.contract.trial_events import TrialsEvent
from tb_trainhealth.findings import SCALE_TARGETS, Finding, Severity

# Findings whose usual fixes are changes a trial can measure (the learning kind).
LEARNING = frozenset(
    {
        Code.WORSE_THAN_CONSTANT,
        Code.LOSS_PLATEAU,
        Code.LOSS_DIVERGENCE,
        Code.NONFINITE,
        Code.LOSS_OSCILLATION,
        Code.DEAD_RELU,
        Code.SATURATED_ACTIVATION,
        Code.VANISHING_GRADIENTS,
        Code.EXPLODING_GRADIENTS,
        Code.NO_GRADIENT,
        Code.UNDERTRAINED,
        Code.MAJORITY_CLASS,
        Code.OUTPUT_LOSS_MISMATCH,
        Code.UNNORMALIZED_INPUT,
        Code.UNNORMALIZED_TARGET,
        Code.BAD_INITIALIZATION,
        Code.INITIAL_LOSS_OFF,
        Code.CANNOT_FIT_SMALL_BATCH,
        Code.MODEL_CONFIG,  # (a linear stack, a trainable change without compile: changes a trial can make)
    }
)
# Findings that say the data or the process is what failed: no change of settings answers them, and a
# trial that "helps" a little would put a setting before the real fix.
NOT_SETTINGS = frozenset({Code.LABEL_PROBLEM, Code.TRAINING_CRASH, Code.OOM, Code.TRAINING_STALLED, Code.ENDED_ABRUPTLY})
# Budget: this share of the fit's wall time, at least MIN_TRIAL_SECONDS (a failing fit of a few
# seconds still gets its advice checked), never more than MAX_TRIAL_SECONDS.
TRIAL_SHARE = 0.1
MIN_TRIAL_SECONDS = 10.0
MAX_TRIAL_SECONDS = 60.0
# Models above this many weights keep no starting copy (100 MB as float32, copied at every fit's
# start): trials are skipped, and the fit pays nothing for them.
MAX_KEPT_PARAMS = 25_000_000


@dataclasses.dataclass
class TrialSetup:
    """What a fit keeps at its start so that its end can try changes."""

    adapter: Any
    weights: list[np.ndarray]
    rate: float | None  # None: a schedule (its rate is not one number to try x10)
    clips: bool
    started: float
    base_step: int


def why_no_trials(model: Any) -> str | None:
    """Why this model's fit cannot be tried at all (said once, as a part off), or None."""
    if is_tf_keras(model):
        return "trials need a Keras 3 model; this one is tf_keras (legacy Keras 2)"
    if getattr(model, "_distribute_strategy", None) is not None:
        return "trials do not run under a distribution strategy"
    if type(model.optimizer).__name__ == "LossScaleOptimizer":
        return "trials do not run with mixed precision's loss scaling"
    weights = sum(int(np.prod(w.shape)) for w in model.weights)  # (count_params needs a built model)
    if weights > MAX_KEPT_PARAMS:
        return f"the model has {weights:,} weights: too large to keep a starting copy for trials"
    return None


def setup_at_start(model: Any, adapter: Any, base_step: int) -> TrialSetup:
    rate, clips = optimizer_settings(model.optimizer)
    inner = getattr(model.optimizer, "inner_optimizer", model.optimizer)
    schedule = not hasattr(getattr(inner, "_learning_rate", None), "assign")
    weights = [np.array(w, copy=True) for w in model.get_weights()]
    return TrialSetup(adapter, weights, None if schedule else rate, clips, time.perf_counter(), base_step)


def codes_to_try(findings: list[Finding]) -> set[str]:
    """The learning-kind codes at warning or worse; none where the data or the process failed.
    Real-valued targets under a classification loss are no broken data but a head, loss or scale
    to change (a linear output with mse, or the targets scaled into a sigmoid's [0, 1]): tried."""
    loud = [f for f in findings if f.severity >= Severity.WARNING]
    regression_targets = any(_regression_targets(f) for f in loud)
    codes = {f.code for f in loud}
    if regression_targets:  # (the loss gone negative follows from the same targets)
        codes -= {Code.LABEL_PROBLEM}
    if codes & NOT_SETTINGS:
        return set()
    return (codes & LEARNING) | ({Code.LABEL_PROBLEM} if regression_targets else set())


def _regression_targets(finding: Finding) -> bool:
    """A label finding whose first fix treats the labels as real values (a target scale to add)."""
    return finding.code == Code.LABEL_PROBLEM and bool(finding.fixes) and SCALE_TARGETS in finding.fixes[0].intents


def budget_seconds(fit_seconds: float, seconds: float | None = None) -> float:
    """The trials' time: `seconds` where the user set it, else the share of the fit's time."""
    if seconds is not None:
        return float(seconds)
    return min(MAX_TRIAL_SECONDS, max(MIN_TRIAL_SECONDS, TRIAL_SHARE * fit_seconds))


def try_changes(
    model: Any,
    setup: TrialSetup,
    findings: list[Finding],
    step: int,
    recording: Recording,
    verbose: bool,
    seconds: float | None = None,
) -> TrialsEvent | None:
    """Run the trials where the fit failed (for `seconds`, else the usual budget); record (and
    return) what they measured."""
    codes = codes_to_try(findings)
    if any(origin.where.in_batch for origin in recording.signals().events_of(NanOriginEvent)):
        codes.discard(Code.NONFINITE)  # the batch itself held the NaN: the data is what to change
    if not codes:
        return None
    fit_seconds = time.perf_counter() - setup.started
    budget = budget_seconds(fit_seconds, seconds)
    sample = take_sample(setup.adapter)
    if isinstance(sample, str):
        event = TrialsEvent(step=step, findings=tuple(sorted(codes)), skipped=sample, budget_seconds=budget)
        return _recorded(recording, event, fit_seconds)
    if verbose:
        print(
            f"tb-trainhealth: trying changes on {sample.rows} of your samples (at most {budget:.0f} s; "
            "HealthCallback(trials=False) turns this off)",
            file=sys.stderr,
        )
    steps_run = max(0, step - setup.base_step)
    try:
        event = run_trials(model, setup.weights, sample, codes, steps_run, setup.rate, setup.clips, budget, step)
    except CloneError as err:  # (a subclassed model without get_config): said, not an internal error
        event = TrialsEvent(step=step, findings=tuple(sorted(codes)), skipped=str(err), budget_seconds=budget)
    return _recorded(recording, event, fit_seconds)


def _recorded(recording: Recording, event: TrialsEvent, fit_seconds: float) -> TrialsEvent:
    event = dataclasses.replace(event, fit_seconds=round(fit_seconds, 3))
    recording.event(event)
    return event
