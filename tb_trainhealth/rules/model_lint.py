"""Train-start model lint (lint events): `output_loss_mismatch`, the last layer's activation
does not fit the loss; `model_config`, well-known layer settings that slow training."""

from __future__ import annotations

from tb_trainhealth.contract.events import LintEvent
from tb_trainhealth.contract.vocab import LintCheck
from tb_trainhealth.findings import Evidence, Finding, Fix, Severity
from tb_trainhealth.rules.fact_text import event_facts
from tb_trainhealth.signals import RunSignals

_EXPLAIN = {
    LintCheck.PROBABILITIES_AS_LOGITS: (
        "The last layer {layer} applies {activation}, but the loss has from_logits=True: it applies "
        "{activation} again, so gradients are squashed and training stalls or plateaus.",
        "Drop the activation from the last layer (keep from_logits=True), or set from_logits=False.",
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
_CRITICAL = (LintCheck.SOFTMAX_SINGLE_UNIT, LintCheck.TARGETS_OUT_OF_OUTPUT_RANGE)


def _interval(bounds: tuple[float | None, ...]) -> str:
    if len(bounds) != 2:
        return "a bounded range"
    low, high = ("-inf" if bounds[0] is None else f"{bounds[0]:g}"), ("inf" if bounds[1] is None else f"{bounds[1]:g}")
    return f"[{low}, {high}]"


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
                code="output_loss_mismatch",
                severity=Severity.CRITICAL if check in _CRITICAL else Severity.WARNING,
                step=event.step,  # the fit() it was found at
                title=f"Last layer and loss do not fit: {check.value.replace('_', ' ')}",
                detail=detail,
                evidence=Evidence((), layer=event.layer, facts=event_facts(event, ("step",)), check=event.check.value),
                fixes=(Fix(fix_text, fix_code),),
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
    LintCheck.DROPOUT_AFTER_OUTPUT: (
        "Dropout after the output layer ({layer})",
        "The model ends with {layer} (rate {rate:g}): during training it zeroes {rate:.0%} of the predictions "
        "(and scales the rest), so the loss sees corrupted outputs.",
        "Move the Dropout before the last Dense layer.",
        "keras.layers.Dropout({rate:g}),\nkeras.layers.Dense(n_outputs),  # output last",
    ),
}


def check_model_config(run: RunSignals) -> list[Finding]:
    findings = []
    for event in run.first_of_each_check(LintEvent, _CONFIG):
        fields = {"layer": event.layer or "?", "rate": event.rate or 0.0}
        title, detail, fix_text, fix_code = (part.format(**fields) for part in _CONFIG[event.check])
        findings.append(
            Finding(
                code="model_config",
                severity=Severity.INFO,
                step=event.step,
                title=title,
                detail=detail,
                evidence=Evidence((), layer=event.layer, facts=event_facts(event, ("step",)), check=event.check.value),
                fixes=(Fix(fix_text, fix_code),),
            )
        )
    return findings
