"""`nonfinite`: NaN/Inf in the loss, gradients or weights.

A single non-finite value poisons every later update, so any hit is critical
(SageMaker Debugger's ExplodingTensor rule also fires on the first NaN/Inf).
The exception is mixed precision: LossScaleOptimizer skips steps whose scaled
gradients overflow and lowers the scale, which is normal operation.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth import signals as sig
from tb_trainhealth.findings import Evidence, Finding, Fix, Severity
from tb_trainhealth.rules.common_fixes import CLIP_FIX
from tb_trainhealth.signals import RunSignals

# Mixed precision: skipped steps are only a problem when they keep happening.
# Keras' dynamic loss scale halves on overflow and doubles after 2000 good steps,
# so more than this share of skipped steps in the second half of a run means the
# scale keeps collapsing (a few doubling attempts per 2000 steps stay far below it).
LOSS_SCALE_SKIP_SHARE = 0.05

FIXES = (
    CLIP_FIX,
    Fix(
        "Check the training data for NaN/Inf before fitting.",
        "assert np.isfinite(x_train).all() and np.isfinite(y_train).all()",
    ),
    Fix(
        "Guard log, division and sqrt in custom losses and layers.",
        "tf.math.log(x + 1e-7); tf.math.divide_no_nan(a, b); tf.sqrt(tf.maximum(x, 1e-12))",
    ),
    Fix(
        "Let the loss work on logits instead of log(softmax(...)).",
        "loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)  # and no softmax on the last layer",
    ),
    Fix(
        "Stop at the first NaN instead of training on garbage.",
        'HealthCallback(log_dir=..., stop_on="critical")  # or keras.callbacks.TerminateOnNaN()',
    ),
)


def _first_nonfinite_step(series: sig.Series | None) -> int | None:
    if series is None:
        return None
    bad = ~np.isfinite(series.values)
    return int(series.steps[np.argmax(bad)]) if bad.any() else None


def check_nonfinite(run: RunSignals) -> list[Finding]:
    hits: dict[str, int] = {}  # where -> first step
    first_layers: list[str] = []
    for event in run.events:
        if event.get("kind") != "nonfinite" or not isinstance(event.get("step"), int):
            continue
        where = str(event.get("where", "values"))
        if where not in hits or event["step"] < hits[where]:
            hits[where] = event["step"]
            if where == "gradients":
                first_layers = [str(name) for name in event.get("layers", [])]
    for name, where in ((sig.LOSS, "loss"), (sig.EPOCH_LOSS, "loss"), (sig.GRAD_NORM, "gradients")):
        step = _first_nonfinite_step(run.get(name))
        if step is not None and (where not in hits or step < hits[where]):
            hits[where] = step
    if not hits:
        return []

    onset = min(hits.values())
    parts = [f"{where} at step {step}" for where, step in sorted(hits.items(), key=lambda kv: kv[1])]
    detail = "First non-finite values: " + ", ".join(parts) + "."
    if first_layers:
        detail += f" Gradients went non-finite first in layer(s): {', '.join(first_layers[:5])}."

    skipped = run.get(sig.NONFINITE_COUNT)  # written only on steps with hits
    steps = run.get(sig.GRAD_NORM)
    if run.info.get("loss_scale") and set(hits) == {"gradients"} and skipped is not None and steps is not None:
        # The scale calibrates itself in the first steps (each overflow halves it): only
        # skips that go on through the second half of the run mean it keeps collapsing.
        middle = steps.steps[len(steps) // 2]
        late_steps = int(np.sum(steps.steps >= middle))
        share = float(np.sum((skipped.values > 0) & (skipped.steps >= middle))) / max(late_steps, 1)
        total = int(np.sum(skipped.values > 0))
        if share <= LOSS_SCALE_SKIP_SHARE:
            return [
                Finding(
                    code="nonfinite",
                    severity=Severity.INFO,
                    step=onset,
                    title="Loss scaling skipped steps with overflowing gradients (normal)",
                    detail=(
                        f"LossScaleOptimizer skipped {total} step(s) whose scaled gradients overflowed "
                        f"({share:.1%} of the second half of the run); loss and weights stayed finite."
                    ),
                    evidence=Evidence((sig.NONFINITE_COUNT,), onset, None),
                )
            ]

    fixes = FIXES
    if first_layers and run.layers and first_layers[0] == run.layers[0].name:
        # The very first layer's gradients went bad first: its input (the data) is the usual suspect.
        fixes = (FIXES[1], FIXES[0], *FIXES[2:])
        detail += " The first layer of the model is hit first, which points at the input data."
    return [
        Finding(
            code="nonfinite",
            severity=Severity.CRITICAL,
            step=onset,
            title=f"NaN/Inf appeared in {' and '.join(sorted(hits, key=hits.get))} at step {onset}",
            detail=detail,
            evidence=Evidence((sig.LOSS, sig.GRAD_NORM), onset, None, first_layers[0] if first_layers else None),
            fixes=fixes,
        )
    ]
