"""Preflight rules judged from the small-batch fit: `input_ignored`, `cannot_fit_small_batch`.

Preflight trains a copy of the model on one small batch, with its real inputs and with every
input zeroed (`PreflightEvent`'s fit_* and zeroed_* fields): a working set-up memorises the batch,
and does so better than with zeros. To name why a fit failed, the run's lint events are read too.
The fit constants shared with the write side, which stops the small-batch fit at them (and skips
the zeroed control once the fit proves the input is used), are in `contract.preflight`.
"""

from __future__ import annotations

from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.events import LintEvent, PreflightEvent
from tb_trainhealth.contract.preflight import loss_is_regression
from tb_trainhealth.contract.vocab import FitStop, LintCheck
from tb_trainhealth.findings import (
    ADD_NONLINEARITY,
    ADD_REGULARIZATION,
    CHANGE_LOSS,
    CHANGE_OUTPUT,
    LOWER_RATE,
    RAISE_RATE,
    SCALE_INPUTS,
    Finding,
    Fix,
    Severity,
)
from tb_trainhealth.rules.initialization import INIT_FIX, initialization_cause
from tb_trainhealth.rules.preflight import latest_preflight, preflight_evidence
from tb_trainhealth.signals import RunSignals

# -- overfitting one small batch -------------------------------------------------------------
# (Where the fit stops, FIT_FRACTION, STALL_WINDOW, STALL_SHARE, MAX_FIT_STEPS: `contract.preflight`.)
# The fit "cannot fit" when, at the end, its loss is still above this share of the reference
# (above the floor). Healthy runs that did not reach FIT_FRACTION ended at most 0.36; broken ones
# at 0.94-1.32 (a learning rate of 1e-7 or 1e-6, a sigmoid output for targets around 50). Between
# the two the fit was learning, just not done: no finding (a miss costs less than a false alarm).
# Adam at 1e-5 from scratch, slow rather than broken, ends at 0.56-0.72: a warning on some seeds.
CANNOT_FIT_SHARE = 0.7
# Fewer steps than this (a tiny max_seconds) are no fair trial: not judged.
MIN_JUDGED_STEPS = 50
# Fewer trainable parameters than this per fitted sample (a linear head on a frozen backbone)
# cannot be expected to memorise the batch (a linear model separates at most ~2 points per
# dimension, Cover 1965; ReLU networks memorise N samples with O(N) parameters, Yun et al. 2019):
# not judged. A 17-parameter head on a frozen backbone moved the loss 1% in 600 steps.
MIN_PARAMS_PER_SAMPLE = 4
# Loss fell by less than this share of its start: nothing is learning at all (critical).
NO_PROGRESS_SHARE = 0.05

# -- input dependence ------------------------------------------------------------------------
# (A fit at or below INPUT_USE_PROVEN proves the input is used: `contract.preflight`.)
# The input is ignored when the real fit ends within INPUT_IGNORED_BAND of the constant
# prediction's loss (above the floor) - it learned what a constant can, and nothing more - and
# no clearly better than the zeroed control (above INPUT_IGNORED_RATIO of its loss). In
# bench/preflight_sweep.py the batch-axis-mean model ended at 1.000-1.001x the baseline; a
# frozen backbone's head that learns slowly was 8% below it after 600 steps.
INPUT_IGNORED_BAND = 0.05
INPUT_IGNORED_RATIO = 0.8
# ...and only when something trained: the real or the zeroed fit lowered its loss by this share.
# A learning rate of 1e-7 moves neither (0.02%) and its loss may start near the baseline (that is
# cannot_fit's case); the batch-axis-mean model moved 2.6-4.7% even where it started near it.
LEARNED_SHARE = 0.02

# Learning rates outside this range are the likely cause when nothing else is (Adam-family
# defaults are 1e-3; fine-tuning goes to 1e-5; above 1 most optimizers diverge).
LOW_LEARNING_RATE = 1e-5
HIGH_LEARNING_RATE = 1.0


# -- input_ignored ---------------------------------------------------------------------------
def check_input_ignored(run: RunSignals) -> list[Finding]:
    event = latest_preflight(run)
    if event is None or event.zeroed_end_loss is None or event.fit_end_loss is None or event.fit_start_loss is None:
        return []
    real, zeroed, start = event.fit_end_loss, event.zeroed_end_loss, event.fit_start_loss
    floor, baseline_loss = event.floor_loss or 0.0, event.baseline_loss
    if baseline_loss is None or baseline_loss <= floor:
        return []
    near_baseline = abs(real - baseline_loss) <= INPUT_IGNORED_BAND * (baseline_loss - floor)
    # Something trained: the real or the zeroed fit moved its loss (a learning rate of 1e-7 moves
    # neither, and its loss may start near the baseline: that is cannot_fit's case).
    zeroed_start = event.zeroed_start_loss if event.zeroed_start_loss is not None else zeroed
    learned = real < (1 - LEARNED_SHARE) * start or zeroed < (1 - LEARNED_SHARE) * zeroed_start
    if not (near_baseline and learned) or real - floor <= INPUT_IGNORED_RATIO * (zeroed - floor):
        return []
    baseline = (
        f" The best constant prediction reaches {event.baseline_loss:.4g}." if event.baseline_loss is not None else ""
    )
    return [
        Finding(
            code=Code.INPUT_IGNORED,
            severity=Severity.CRITICAL,
            step=event.step,
            title="Preflight: the model fits its batch no better with real inputs than with zeros",
            detail=(
                f"Trained on the same {event.samples} samples for {event.zeroed_steps} steps, the loss went "
                f"from {start:.4g} to {real:.4g} with the real inputs and to {zeroed:.4g} with every input "
                f"zeroed.{baseline} The model does not use its input: it can only learn the label "
                "frequencies. Look for a layer that discards the input (a multiplication by 0, a reduction over "
                "the batch axis, a slice that keeps padding), or inputs that reach the model constant."
            ),
            evidence=preflight_evidence(event, Code.INPUT_IGNORED),
            fixes=(
                Fix(
                    "Check that different inputs give different outputs before training.",
                    "print(np.std(model.predict(x_train[:32]), axis=0))  # ~0 everywhere: the input is lost",
                ),
                Fix(
                    "Reduce over the feature or time axis, never over the batch axis (axis 0).",
                    "keras.ops.mean(x, axis=-1)  # not axis=0",
                ),
            ),
        )
    ]


# -- cannot_fit_small_batch --------------------------------------------------------------------
_OUTPUT_CHECKS = {
    LintCheck.SOFTMAX_SINGLE_UNIT,
    LintCheck.CATEGORICAL_SINGLE_UNIT,
    LintCheck.TARGETS_OUT_OF_OUTPUT_RANGE,
    LintCheck.RELU_WITH_CROSS_ENTROPY,
    LintCheck.PROBABILITIES_AS_LOGITS,
    LintCheck.LOGITS_AS_PROBABILITIES,
    LintCheck.SIGMOID_WITH_CATEGORICAL,
}
_LABEL_CHECKS = {
    LintCheck.INTEGER_LABELS_FOR_CATEGORICAL,
    LintCheck.ONEHOT_LABELS_FOR_SPARSE,
    LintCheck.LABEL_OUT_OF_RANGE,
    LintCheck.FRACTIONAL_SPARSE_LABELS,
    LintCheck.LABELS_OUTSIDE_UNIT_INTERVAL,
    LintCheck.SINGLE_CLASS,
}
_INPUT_CHECKS = {LintCheck.CONSTANT_INPUT, LintCheck.UNNORMALIZED_INPUT, LintCheck.TINY_INPUT}
_DROPOUT_CHECKS = {LintCheck.HIGH_DROPOUT, LintCheck.DROPOUT_AFTER_OUTPUT}


CLASSIFIER_OUTPUT_FIX = Fix(
    "Match the output to the loss: logits with from_logits=True.",
    "keras.layers.Dense(n_classes)  # no activation\nloss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)",
    intents=(CHANGE_LOSS,),
)
REGRESSION_OUTPUT_FIX = Fix(
    "Match the output to the loss: a linear output for regression (no sigmoid/softmax/relu on the last layer).",
    "keras.layers.Dense(n_targets)  # no activation\nloss = keras.losses.MeanSquaredError()",
    intents=(CHANGE_OUTPUT,),
)


def _likely_cause(run: RunSignals, event: PreflightEvent) -> tuple[str, Fix]:
    """The most likely reason a model cannot fit 32 samples, from the lint and the fit itself."""
    lint = {e.check: e for e in run.events_of(LintEvent)}
    output = next((lint[c] for c in _OUTPUT_CHECKS if c in lint), None)
    if output is not None:
        return (
            f"the last layer's activation does not fit the loss or targets ({output.check.value.replace('_', ' ')}"
            f"{', layer ' + output.layer if output.layer else ''})",
            REGRESSION_OUTPUT_FIX if loss_is_regression(output.loss or event.loss) else CLASSIFIER_OUTPUT_FIX,
        )
    labels = next((lint[c] for c in _LABEL_CHECKS if c in lint), None)
    if labels is not None:
        return (
            f"labels that do not match the loss ({labels.check.value.replace('_', ' ')})",
            Fix("Check the labels against the loss.", "print(y_train[:10], y_train.dtype, y_train.shape)"),
        )
    inputs = next((lint[c] for c in _INPUT_CHECKS if c in lint), None)
    if inputs is not None and inputs.check == LintCheck.TINY_INPUT:
        return (
            "inputs scaled to almost nothing (tiny input: see unnormalized_input)",
            Fix(
                "Scale the inputs once.",
                "print(x_train.min(), x_train.max())  # already in [0, 1]? no second / 255",
                intents=(SCALE_INPUTS,),
            ),
        )
    if inputs is not None:
        return (
            f"the input scale ({inputs.check.value.replace('_', ' ')})",
            Fix(
                "Scale inputs inside the model.",
                "keras.layers.Rescaling(1.0 / 255)  # or keras.layers.Normalization()",
                intents=(SCALE_INPUTS,),
            ),
        )
    init = initialization_cause(run)
    if init is not None:
        return init, INIT_FIX
    rate, optimizer = event.learning_rate, "Adam"
    diverged = event.fit_stopped == FitStop.NONFINITE or (
        event.fit_max_loss is not None
        and event.fit_start_loss is not None
        and event.fit_max_loss > 2 * event.fit_start_loss
    )
    if diverged or (rate is not None and rate >= HIGH_LEARNING_RATE):
        return (
            f"a learning rate too high{f' ({rate:.3g})' if rate is not None else ''}: the loss "
            + ("became NaN/Inf" if event.fit_stopped == FitStop.NONFINITE else "rose while training"),
            Fix(
                "Lower the learning rate 10-100x.",
                f"optimizer = keras.optimizers.{optimizer}(learning_rate={(rate or 1e-2) / 30:.1g})",
                (LOWER_RATE,),
            ),
        )
    if rate is not None and rate <= LOW_LEARNING_RATE:
        return (
            f"a learning rate of {rate:.3g}, orders of magnitude below the usual 1e-3",
            Fix("Raise the learning rate.", "optimizer = keras.optimizers.Adam(learning_rate=1e-3)", (RAISE_RATE,)),
        )
    if event.no_gradient or event.zero_gradient:
        return (
            "trainable variables that get no gradient (see no_gradient)",
            Fix(
                "Connect every trainable layer to the loss.", "model.summary()  # every layer on the path to the output"
            ),
        )
    dropout = next((lint[c] for c in _DROPOUT_CHECKS if c in lint), None)
    if dropout is not None:
        return (
            f"dropout ({dropout.layer}, rate {dropout.rate:g})" if dropout.rate is not None else "dropout",
            Fix(
                "Use dropout of 0.1-0.5, before the output layer.",
                "keras.layers.Dropout(0.3)",
                intents=(ADD_REGULARIZATION,),
            ),
        )
    return (
        "a model too small or missing a layer for the task (e.g. no hidden layer, no non-linearity), or a learning "
        "rate far from the optimizer's usual range",
        Fix(
            "Add a hidden layer with a non-linearity, and try the optimizer's default learning rate.",
            'keras.layers.Dense(64, activation="relu")  # before the output layer',
            intents=(ADD_NONLINEARITY,),
        ),
    )


def check_cannot_fit_small_batch(run: RunSignals) -> list[Finding]:
    event = latest_preflight(run)
    if event is None or event.fit_end_loss is None or event.fit_start_loss is None or event.fit_steps is None:
        return []
    if event.fit_stopped not in (FitStop.STALLED, FitStop.STEPS, FitStop.NONFINITE):
        return []  # reached its target, or cut short by the time budget while still learning
    nonfinite = event.fit_stopped == FitStop.NONFINITE
    if not nonfinite and event.fit_steps < MIN_JUDGED_STEPS:
        return []
    samples = event.fit_samples or event.samples
    if event.trainable_params is not None and event.trainable_params < MIN_PARAMS_PER_SAMPLE * samples:
        return []
    reference = event.fit_reference if event.fit_reference is not None else event.fit_start_loss
    floor = event.floor_loss or 0.0
    start, end = event.fit_start_loss, event.fit_end_loss
    if not nonfinite and end - floor <= CANNOT_FIT_SHARE * (reference - floor):
        return []
    stuck = nonfinite or end >= (1 - NO_PROGRESS_SHARE) * start
    cause, fix = _likely_cause(run, event)
    outcome = "the loss became NaN/Inf" if nonfinite else f"the loss went from {start:.4g} to {end:.4g}"
    return [
        Finding(
            code=Code.CANNOT_FIT_SMALL_BATCH,
            severity=Severity.CRITICAL if stuck else Severity.WARNING,
            step=event.step,
            title=f"Preflight: the model cannot fit {samples} samples; likely cause: {cause.split(' (')[0]}",
            detail=(
                f"Trained on the same {samples} samples alone for {event.fit_steps} steps "
                f"({event.fit_seconds or 0:.1f} s), {outcome}; a working set-up memorises them, far below "
                f"{reference:.4g} ({'the best constant prediction' if reference == event.baseline_loss else 'the first loss'}). "
                f"Most likely cause: {cause}."
            ),
            evidence=preflight_evidence(event, Code.CANNOT_FIT_SMALL_BATCH),
            fixes=(fix,),
        )
    ]
