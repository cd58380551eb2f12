"""`output_loss_mismatch`: the last layer's activation does not fit the loss (lint events)."""

from __future__ import annotations

from tb_trainhealth.findings import Evidence, Finding, Fix, Severity
from tb_trainhealth.signals import RunSignals

_LOSS_CLASS = {
    "sparse_categorical_crossentropy": "SparseCategoricalCrossentropy",
    "categorical_crossentropy": "CategoricalCrossentropy",
    "binary_crossentropy": "BinaryCrossentropy",
}

_EXPLAIN = {
    "probabilities_as_logits": (
        "The last layer {layer} applies {activation}, but the loss has from_logits=True: it applies "
        "{activation} again, so gradients are squashed and training stalls or plateaus.",
        "Drop the activation from the last layer (keep from_logits=True), or set from_logits=False.",
        'keras.layers.Dense({units}, name="{layer}")  # no activation\nloss = keras.losses.{cls}(from_logits=True)',
    ),
    "logits_as_probabilities": (
        "The last layer {layer} has no activation (it outputs logits), but the loss expects "
        "probabilities (from_logits=False): Keras clips the logits to [0, 1] and training goes wrong.",
        "Tell the loss it gets logits.",
        "loss = keras.losses.{cls}(from_logits=True)",
    ),
    "softmax_single_unit": (
        "The last layer {layer} is a softmax over a single unit: its output is always 1, so the model cannot learn.",
        "Binary task: one sigmoid unit (or one logit with from_logits=True); K classes: K softmax units.",
        'keras.layers.Dense(1, activation="sigmoid")  # with loss="binary_crossentropy"',
    ),
    "sigmoid_with_categorical": (
        "The last layer {layer} applies sigmoid to {units} units, but categorical cross-entropy expects a "
        "softmax distribution over the classes.",
        "Use softmax for one class per sample (sigmoid + binary_crossentropy is for multi-label).",
        'keras.layers.Dense({units}, activation="softmax")',
    ),
}


def check_output_loss_mismatch(run: RunSignals) -> list[Finding]:
    findings, seen = [], set()
    for event in run.events:
        check = event.get("check")
        if event.get("kind") != "lint" or check not in _EXPLAIN or check in seen:
            continue
        seen.add(check)
        fields = {
            "layer": event.get("layer") or "?",
            "activation": event.get("activation") or "?",
            "units": event.get("units") or "K",
            "cls": _LOSS_CLASS.get(str(event.get("loss")), "CategoricalCrossentropy"),
        }
        detail, fix_text, fix_code = (part.format(**fields) for part in _EXPLAIN[check])
        findings.append(
            Finding(
                code="output_loss_mismatch",
                severity=Severity.CRITICAL if check == "softmax_single_unit" else Severity.WARNING,
                step=None,
                title=f"Last layer and loss do not fit: {check.replace('_', ' ')}",
                detail=detail,
                evidence=Evidence(("events",), None, None, event.get("layer")),
                fixes=(Fix(fix_text, fix_code),),
            )
        )
    return findings
