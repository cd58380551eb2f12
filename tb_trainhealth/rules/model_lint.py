"""Train-start model lint (lint events): `output_loss_mismatch`, the last layer's activation
does not fit the loss; `model_config`, well-known layer settings that slow training.

A `model_config` finding is info until the run's behaviour confirms it: dropout beyond 0.5, or a
weight penalty of at least run_setup.STRONG_PENALTY, on a model that learned nothing (training
accuracy at chance, or the loss at the constant prediction's) is the cause, a warning."""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.events import LintEvent
from tb_trainhealth.contract.vocab import LintCheck, LossKind
from tb_trainhealth.findings import (
    ADD_NONLINEARITY,
    CHANGE_LOSS,
    CHANGE_OUTPUT,
    REMOVE_REGULARIZATION,
    Evidence,
    Fact,
    Finding,
    Fix,
    Severity,
)
from tb_trainhealth.rules.fact_text import event_facts
from tb_trainhealth.rules.run_setup import Penalty, strong_penalties
from tb_trainhealth.rules.training_data import chance_band
from tb_trainhealth.signals import RunSignals
from tb_trainhealth.yardstick import constant_baseline, yardstick

_EXPLAIN = {
    LintCheck.PROBABILITIES_AS_LOGITS: (
        "The last layer {layer} applies {activation}, and the loss has from_logits=True. Keras sees the "
        "{activation} and computes the loss from the logits behind it, so this trains exactly like the "
        "logits model (the same losses to the last digit on Keras 3.15 and tf_keras 2.21, graph and eager: "
        "python bench/keras_handles_lints.py); only code that reads the predictions as logits would be wrong.",
        "Say what the model outputs: drop the activation from the last layer (keep from_logits=True).",
        'keras.layers.Dense({units}, name="{layer}")  # no activation\nloss = keras.losses.{cls}(from_logits=True)',
    ),
    LintCheck.LOGITS_AS_PROBABILITIES: (
        "The last layer {layer} has no activation (it outputs logits), but the loss expects "
        "probabilities (from_logits=False): Keras clips the logits to [0, 1] and training goes wrong.",
        "Tell the loss it gets logits.",
        "loss = keras.losses.{cls}(from_logits=True)",
    ),
    LintCheck.SOFTMAX_SINGLE_UNIT: (
        "The last layer {layer} is a softmax over a single unit: its output is always 1, so the model cannot learn.",
        "Binary task: one sigmoid unit (or one logit with from_logits=True); K classes: K softmax units.",
        'keras.layers.Dense(1, activation="sigmoid")  # with loss="binary_crossentropy"',
    ),
    LintCheck.CATEGORICAL_SINGLE_UNIT: (
        "The last layer {layer} has a single unit under categorical cross-entropy, which spreads one unit of "
        "probability over the classes: over one class that is always 1, so the loss is 0 whatever the model "
        "outputs, and it learns nothing.",
        "Binary task: one sigmoid unit and binary cross-entropy; K classes: K units.",
        'keras.layers.Dense(1, activation="sigmoid")  # with loss="binary_crossentropy"',
    ),
    LintCheck.RELU_WITH_CROSS_ENTROPY: (
        "The last layer {layer} applies relu, but cross-entropy needs probabilities (softmax/sigmoid) or "
        "unbounded logits: relu outputs are never negative and are 0 for every class that is 'off', so the "
        "loss cannot express confidence and gradients die at 0.",
        "Output logits (no activation) and tell the loss.",
        'keras.layers.Dense({units}, name="{layer}")  # no activation\nloss = keras.losses.{cls}(from_logits=True)',
    ),
    LintCheck.TARGETS_OUT_OF_OUTPUT_RANGE: (
        "The last layer {layer} applies {activation}, which can only output {output_range}, but the targets "
        "range {label_min:.4g} to {label_max:.4g}: the model can never reach them, so the loss stalls high.",
        "For regression, use a linear output (or scale the targets into the activation's range and back).",
        'keras.layers.Dense(1, name="{layer}")  # linear output for unbounded targets',
    ),
    LintCheck.SIGMOID_WITH_CATEGORICAL: (
        "The last layer {layer} applies sigmoid to {units} units, but categorical cross-entropy expects a "
        "softmax distribution over the classes.",
        "Use softmax for one class per sample (sigmoid + binary_crossentropy is for multi-label).",
        'keras.layers.Dense({units}, activation="softmax")',
    ),
}


# The model cannot learn the task at all with these.
_CRITICAL = (LintCheck.SOFTMAX_SINGLE_UNIT, LintCheck.CATEGORICAL_SINGLE_UNIT, LintCheck.TARGETS_OUT_OF_OUTPUT_RANGE)
# ...and the installed Keras already handles these: worth knowing, nothing to fix for training.
_HANDLED_BY_KERAS = (LintCheck.PROBABILITIES_AS_LOGITS,)


def _interval(bounds: tuple[float | None, ...]) -> str:
    if len(bounds) != 2:
        return "a bounded range"
    low, high = ("-inf" if bounds[0] is None else f"{bounds[0]:g}"), ("inf" if bounds[1] is None else f"{bounds[1]:g}")
    return f"[{low}, {high}]"


def _severity(check: LintCheck) -> Severity:
    if check in _CRITICAL:
        return Severity.CRITICAL
    return Severity.INFO if check in _HANDLED_BY_KERAS else Severity.WARNING


def check_output_loss_mismatch(run: RunSignals) -> list[Finding]:
    findings = []
    for event in run.first_of_each_check(LintEvent, _EXPLAIN):
        check = event.check
        fields = {
            "layer": event.layer or "?",
            "activation": event.activation or "?",
            "units": event.units or "K",
            "cls": event.loss.keras_class if event.loss and event.loss.is_probabilistic else "CategoricalCrossentropy",
            "output_range": _interval(event.output_range),
            "label_min": event.label_min or 0.0,
            "label_max": event.label_max or 0.0,
        }
        detail, fix_text, fix_code = (part.format(**fields) for part in _EXPLAIN[check])
        findings.append(
            Finding(
                code=Code.OUTPUT_LOSS_MISMATCH,
                severity=_severity(check),
                step=event.step,  # the fit() it was found at
                title=f"Last layer and loss do not fit: {check.value.replace('_', ' ')}",
                detail=detail,
                evidence=Evidence((), layer=event.layer, facts=event_facts(event, ("step",)), check=event.check.value),
                fixes=(Fix(fix_text, fix_code, (CHANGE_OUTPUT, CHANGE_LOSS)),),
            )
        )
    return findings


_CONFIG = {
    LintCheck.HIGH_DROPOUT: (
        "Dropout rate {rate:g} in {layer}",
        "{layer} drops {rate:.0%} of its inputs at every step. Dropout beyond 0.5 (the most Srivastava "
        "et al. used for hidden units) trains a much thinner network each step: the loss falls slowly "
        "and the model may underfit.",
        "Use 0.1-0.5; if the model overfits, add weight decay or data augmentation rather than more dropout.",
        "keras.layers.Dropout(0.3)",
    ),
    LintCheck.LINEAR_STACK: (
        "{units} weighted layers and no activation between them",
        "From {layer} on, no layer applies a non-linearity (every hidden Dense/Conv is linear): however many "
        "layers it has, the model computes one linear map of its input, so it can only fit what a linear model "
        "fits.",
        "Give the hidden layers an activation.",
        'keras.layers.Dense(64, activation="relu")  # every hidden layer; the output keeps its own',
    ),
    LintCheck.DROPOUT_AFTER_OUTPUT: (
        "Dropout after the output layer ({layer})",
        "The model ends with {layer} (rate {rate:g}): during training it zeroes {rate:.0%} of the predictions "
        "(and scales the rest), so the loss sees corrupted outputs.",
        "Move the Dropout before the last Dense layer.",
        "keras.layers.Dropout({rate:g}),\nkeras.layers.Dense(n_outputs),  # output last",
    ),
}


_CONFIG_INTENTS = {
    LintCheck.HIGH_DROPOUT: (REMOVE_REGULARIZATION,),
    LintCheck.LINEAR_STACK: (ADD_NONLINEARITY,),
    LintCheck.DROPOUT_AFTER_OUTPUT: (CHANGE_OUTPUT,),
}


# Confirmed by the run: late training accuracy (median of the second half of the epochs) within
# CHANCE_MARGIN of always answering the largest class, while validation accuracy never got
# LEARNED_MARGIN above that; or the late loss within BASELINE_SHARE of the constant prediction's
# loss or above it. Measured (`bench/learn_less_zoo.py`): dropout 0.95 on an MLP, training accuracy
# 0.25-0.28 for 4 classes (largest 0.27), validation at best 0.42; L2(3) on every kernel, training
# accuracy 0.268 = the largest class's share; dropout 0.97 in a CNN and L2(3) on a regression MLP,
# loss within 3% of the baseline. Their twins (dropout 0.2, L2 1e-4) reach 0.95-1.0.
CHANCE_MARGIN = 0.05
LEARNED_MARGIN = 0.3
# Lint checks a run confirms (then a warning, the cause): a model that cannot learn for them.
_CONFIRMABLE = frozenset({LintCheck.HIGH_DROPOUT, LintCheck.LINEAR_STACK})
BASELINE_SHARE = 0.95
MIN_EPOCHS = 3


def _late(values: np.ndarray) -> float:
    values = values[np.isfinite(values)]
    return float(np.median(values[len(values) // 2 :])) if len(values) else float("nan")


def learned_nothing(run: RunSignals) -> str | None:
    """How the run shows that the model learned nothing from its inputs, or None."""
    train_acc, val_acc = run.get(sig.EPOCH_ACCURACY), run.get(sig.EPOCH_VAL_ACCURACY)
    band = chance_band(run)
    if train_acc is not None and band is not None and len(train_acc) >= MIN_EPOCHS:
        best_val = float(np.nanmax(val_acc.values)) if val_acc is not None else None
        level = _late(train_acc.values)
        if level <= band[1] + CHANCE_MARGIN and (best_val is None or best_val < band[1] + LEARNED_MARGIN):
            return f"training accuracy stays at {level:.1%}, chance for these labels ({band[2]})"
    baseline = constant_baseline(run)
    loss = run.get(sig.EPOCH_LOSS)  # the training loss: dropout and the penalty act there
    if baseline is not None and baseline[0] > 0 and loss is not None and len(loss) >= MIN_EPOCHS:
        level = _late(loss.values)
        if level >= BASELINE_SHARE * baseline[0]:
            return (
                f"the training loss stays at {level:.4g}, what predicting a constant costs "
                f"({baseline[0]:.4g}, {baseline[1]})"
            )
    return None


def _lint_finding(event: LintEvent, confirmed: str | None) -> Finding:
    fields = {"layer": event.layer or "?", "rate": event.rate or 0.0, "units": event.units or "?"}
    title, detail, fix_text, fix_code = (part.format(**fields) for part in _CONFIG[event.check])
    if confirmed is not None and event.check in _CONFIRMABLE:
        title = f"{title} keeps the model from learning: {confirmed.split(',')[0]}"
        detail = f"{detail} Here it is the cause: {confirmed}."
    return Finding(
        code=Code.MODEL_CONFIG,
        severity=Severity.WARNING if confirmed is not None and event.check in _CONFIRMABLE else Severity.INFO,
        step=event.step,
        title=title,
        detail=detail,
        evidence=Evidence((), layer=event.layer, facts=event_facts(event, ("step",)), check=event.check.value),
        fixes=(Fix(fix_text, fix_code, _CONFIG_INTENTS[event.check]),),
    )


def _penalty_finding(run: RunSignals, penalties: list[Penalty], confirmed: str) -> Finding:
    """A weight penalty so strong it holds the weights at zero: the model stays at the prior."""
    strongest = max(penalties, key=lambda p: p.factor)
    layers = ", ".join(sorted({p.layer for p in penalties})[:6])
    return Finding(
        code=Code.MODEL_CONFIG,
        severity=Severity.WARNING,
        step=None,
        title=f"Regularisation so strong the model stays at the prior: {strongest.text} ({len(penalties)} regularizer(s))",
        detail=(
            f"{strongest.text} on {layers}: a penalty of {strongest.factor:g} per squared weight outweighs what fitting "
            f"the data gains, so the weights are held near zero and the model predicts the class prior or the targets' "
            f"mean. The run confirms it: {confirmed}."
        ),
        evidence=Evidence((sig.EPOCH_LOSS,), facts=(Fact("regularizer", strongest.text), Fact("layers", layers))),
        fixes=(
            Fix(
                "Use a weight penalty of 1e-5 to 1e-3 (or weight decay in the optimizer), and raise it only "
                "while validation improves.",
                "keras.layers.Dense(units, kernel_regularizer=keras.regularizers.L2(1e-4))",
                intents=(REMOVE_REGULARIZATION,),
            ),
        ),
    )


def check_model_config(run: RunSignals) -> list[Finding]:
    events = run.first_of_each_check(LintEvent, _CONFIG)
    penalties = strong_penalties(run)
    confirmed = learned_nothing(run) if penalties or any(e.check in _CONFIRMABLE for e in events) else None
    findings = [_lint_finding(event, confirmed) for event in events]
    if penalties and confirmed is not None:
        findings.insert(0, _penalty_finding(run, penalties, confirmed))
    return findings + _custom_loss(run)


def _custom_loss(run: RunSignals) -> list[Finding]:
    """Once, where the callback recorded a loss no check understands (a lambda, a function of the
    user's own, a built-in the checks do not model): which checks cannot judge this run."""
    name = run.info.loss
    if not run.has_health_data or not name or LossKind.named(name) or LossKind.of_class(name):
        return []
    stick = yardstick(run)
    measured = (
        f"The constant-prediction yardstick still holds: scored with your loss itself, {stick.how} gives "
        f"{stick.value:.4g}, and worse_than_constant judges the run against it."
        if stick is not None
        else "No constant prediction could be scored with it either (its output or targets did not fit one)."
    )
    return [
        Finding(
            code=Code.MODEL_CONFIG,
            severity=Severity.INFO,
            step=None,
            title=f"The loss `{name}` is not one of Keras' losses the checks know: the loss-specific checks are off",
            detail=(
                f"This run trains on `{name}`, a loss of your own (or one the checks do not model), so the checks "
                "that need to know what a loss expects are not applied: last layer against the loss, label "
                "encoding against the loss, the initial loss, the plateau at the label entropy. " + measured
            ),
            evidence=Evidence((), facts=(Fact("loss", name),), check="custom_loss"),
            fixes=(
                Fix(
                    "Where the loss is a built-in one in disguise, pass Keras' own: every check then applies.",
                    "model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), ...)  # not lambda y, p: ...",
                ),
            ),
        )
    ]
