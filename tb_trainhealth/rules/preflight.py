"""Preflight rules judged from the untrained model: `initial_loss_off`, `no_gradient`.

They judge what a preflight measured (`PreflightEvent`, written by `tb_trainhealth.preflight` or
`HealthCallback(preflight=True)` before any training step) on one batch: the first loss and which
trainable variables get a gradient. The latest preflight of a run is the one judged (a later fit
may have fixed the set-up). What every preflight rule shares lives here too (the event judged,
its evidence); the rules on the small-batch fit are in `preflight_fit`. REGRESSION_OUTPUT_ALLOWANCE
is shared with the write side, which computes the expected loss with it (`contract.preflight`).
"""

from __future__ import annotations

import dataclasses

from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.events import PreflightEvent
from tb_trainhealth.contract.preflight import REGRESSION_OUTPUT_ALLOWANCE, loss_is_regression
from tb_trainhealth.contract.vocab import CATEGORICAL_LOSSES, LossKind
from tb_trainhealth.findings import CHANGE_INITIALIZER, SCALE_TARGETS, Evidence, Finding, Fix, Severity
from tb_trainhealth.rules.fact_text import event_facts
from tb_trainhealth.signals import RunSignals

# -- initial loss --------------------------------------------------------------------------
# The first loss is "off" when it is this many times what the output layer and loss imply AND,
# for cross-entropy, at least MIN_EXCESS_NATS above it. Only far ABOVE counts: below is what
# pretrained weights and earlier fits give (0.65-0.81x in bench/preflight_sweep.py). A healthy
# Glorot/He-initialised head gives logits of std ~1, ~0.5 nat above ln K. Over the 31 healthy
# set-ups x 3 seeds of bench/preflight_sweep.py (93 runs) the highest was 3.04x = 1.4 nats above
# ln 2 (a Conv1D + GlobalMaxPooling binary classifier: max-pooled features are large), the next
# 2.25x; for regression 1.55x of mean(y^2) + REGRESSION_OUTPUT_ALLOWANCE. Broken output scales
# gave 7.5-14x and 4.5-22 nats (a last layer initialised at std 5), and 1100-3600x (MSE,
# predictions multiplied by 100 inside the model).
INITIAL_LOSS_FACTOR = 3.0
MIN_EXCESS_NATS = 2.5


def latest_preflight(run: RunSignals) -> PreflightEvent | None:
    events = run.events_of(PreflightEvent)
    return events[-1] if events else None


# What each preflight finding measured: the fields of its event worth showing with it.
_SHOWN = {
    Code.INITIAL_LOSS_OFF: ("loss", "outputs", "initial_loss", "expected_loss", "expected_how", "samples"),
    Code.NO_GRADIENT: ("trainable_variables", Code.NO_GRADIENT, "zero_gradient", "samples"),
    Code.INPUT_IGNORED: ("fit_start_loss", "fit_end_loss", "zeroed_start_loss", "zeroed_end_loss", "zeroed_steps"),
    Code.CANNOT_FIT_SMALL_BATCH: (
        "fit_samples",
        "trainable_params",
        "learning_rate",
        "fit_steps",
        "fit_start_loss",
        "fit_end_loss",
        "fit_reference",
        "fit_target",
        "fit_stopped",
        "baseline_loss",
    ),
}


def preflight_evidence(event: PreflightEvent, code: str, layer: str | None = None) -> Evidence:
    shown = _SHOWN[code]
    skip = tuple(f.name for f in dataclasses.fields(event) if f.name not in shown)
    return Evidence((), event.step, event.step, layer, facts=event_facts(event, skip))


def _loss_name(event: PreflightEvent) -> str:
    return event.loss.value if event.loss is not None else "loss"


# -- initial_loss_off ------------------------------------------------------------------------
def check_initial_loss_off(run: RunSignals) -> list[Finding]:
    event = latest_preflight(run)
    if event is None or event.initial_loss is None or event.expected_loss is None:
        return []
    allowance = REGRESSION_OUTPUT_ALLOWANCE if loss_is_regression(event.loss) else 0.0
    limit = INITIAL_LOSS_FACTOR * (event.expected_loss + allowance)
    if not loss_is_regression(event.loss):
        limit = max(limit, event.expected_loss + MIN_EXCESS_NATS)
    if event.initial_loss <= limit:
        return []
    ratio = event.initial_loss / max(event.expected_loss + allowance, 1e-12)
    if event.loss in CATEGORICAL_LOSSES or event.loss == LossKind.BINARY_CROSSENTROPY:
        why = (
            "The untrained model is confidently wrong: its logits are far too large, so each wrong class gets "
            "most of the probability. Usual causes: a last layer initialised at a large scale, a scaling of the "
            "logits (a temperature, an extra multiplication), or inputs far from unit scale."
        )
        fixes = (
            Fix(
                "Initialise the last layer at the default scale (or smaller) and drop any scaling of the logits.",
                'keras.layers.Dense(n_classes, kernel_initializer="glorot_uniform")  # logits, no extra scaling',
                intents=(CHANGE_INITIALIZER,),
            ),
            Fix(
                "Check the input scale of the first batch.",
                "print(x_train.min(), x_train.max(), x_train.std())",
            ),
        )
    else:
        why = (
            "The untrained model's outputs are far larger than the targets: a wrong output scale (an "
            "un-scaling of the predictions inside the model while the targets are already scaled, a last "
            "layer initialised large) or inputs far from unit scale."
        )
        fixes = (
            Fix(
                "Predict targets of unit scale with a plainly initialised linear output, and un-scale outside the model.",
                "y_mean, y_std = y_train.mean(), y_train.std()\n"
                "model.fit(x_train, (y_train - y_mean) / y_std, ...)\n"
                "predictions = model.predict(x) * y_std + y_mean",
                intents=(SCALE_TARGETS,),
            ),
            Fix(
                "Check the input scale of the first batch.",
                "print(x_train.min(), x_train.max(), x_train.std())",
            ),
        )
    return [
        Finding(
            code=Code.INITIAL_LOSS_OFF,
            severity=Severity.WARNING,
            step=event.step,
            title=f"Preflight: initial loss {event.initial_loss:.4g} is {ratio:.0f}x what the output implies",
            detail=(
                f"Before any training step, {_loss_name(event)} on {event.samples} samples is "
                f"{event.initial_loss:.4g}; the output layer and loss imply about {event.expected_loss:.4g} "
                f"({event.expected_how or 'at initialisation'}). {why}"
            ),
            evidence=preflight_evidence(event, Code.INITIAL_LOSS_OFF),
            fixes=fixes,
        )
    ]


# -- no_gradient ---------------------------------------------------------------------------
def check_no_gradient(run: RunSignals) -> list[Finding]:
    event = latest_preflight(run)
    if event is None or event.trainable_variables is None:
        return []
    if event.trainable_variables == 0:
        return [
            Finding(
                code=Code.NO_GRADIENT,
                severity=Severity.CRITICAL,
                step=event.step,
                title="Preflight: the model has no trainable variables",
                detail="Nothing in the model is trainable, so fit() changes nothing: every layer is frozen "
                "(trainable=False) or the model has no weights.",
                evidence=preflight_evidence(event, Code.NO_GRADIENT),
                fixes=(
                    Fix(
                        "Unfreeze the layers to train (after building the head on a frozen backbone, compile again).",
                        "backbone.trainable = True  # or only its last layers\nmodel.compile(optimizer=..., loss=...)",
                    ),
                ),
            )
        ]
    stuck = [*event.no_gradient, *event.zero_gradient]
    if not stuck:
        return []
    everything = len(stuck) >= event.trainable_variables
    parts = []
    if event.no_gradient:
        parts.append(f"no gradient (None) for {_names(event.no_gradient)}: not connected to the loss")
    if event.zero_gradient:
        parts.append(f"a gradient of exactly zero for {_names(event.zero_gradient)}: nothing flows through them")
    return [
        Finding(
            code=Code.NO_GRADIENT,
            severity=Severity.CRITICAL if everything else Severity.WARNING,
            step=event.step,
            title=f"Preflight: {len(stuck)} of {event.trainable_variables} trainable variables get no gradient",
            detail=(
                f"On the preflight batch, the loss gives {'; '.join(parts)}. The optimizer never changes these "
                "variables. Causes: a branch whose output does not reach the loss, a tf.stop_gradient, a layer "
                "built but not called, inputs that are all zero, or ReLU units dead from their initialisation."
            ),
            evidence=preflight_evidence(event, Code.NO_GRADIENT, _layer_of(stuck[0])),
            fixes=(
                Fix(
                    "Connect the branch to the output, or, if it is meant to stay fixed, freeze it so it is not "
                    "counted as trainable.",
                    "layer.trainable = False  # for weights that must not train, instead of tf.stop_gradient",
                ),
                Fix(
                    "List what gets no gradient yourself.",
                    "with tf.GradientTape() as tape:\n"
                    "    loss = model.compute_loss(x=x, y=y, y_pred=model(x, training=True))\n"
                    "grads = tape.gradient(loss, model.trainable_variables)\n"
                    "print([v.path for v, g in zip(model.trainable_variables, grads) if g is None])",
                ),
            ),
        )
    ]


def _names(paths: tuple[str, ...], shown: int = 4) -> str:
    listed = ", ".join(paths[:shown])
    return listed + (f" and {len(paths) - shown} more" if len(paths) > shown else "")


def _layer_of(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else path
