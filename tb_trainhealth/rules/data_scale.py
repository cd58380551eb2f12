"""`unnormalized_input` and `unnormalized_target`: inputs or regression targets far from unit scale.

Weight initialisers and default learning rates assume data of about unit scale. From the
callback's first-batch lint events (input scale, constant and tiny inputs, sampled target
moments) and, for targets, the run's final training loss against predicting their mean.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.events import LintEvent
from tb_trainhealth.contract.vocab import LintCheck, LossKind
from tb_trainhealth.findings import SCALE_INPUTS, SCALE_TARGETS, Evidence, Finding, Fix, Severity
from tb_trainhealth.rules.constant_yardstick import learned_anyway
from tb_trainhealth.rules.fact_text import LINT_NOT_FACTS, event_facts, fact
from tb_trainhealth.series_math import finite_part
from tb_trainhealth.signals import RunSignals
from tb_trainhealth.yardstick import label_statistics

# Regression targets far from unit scale: their RMS (from the first batches' target moments) at
# least TARGET_SCALE (the input scale check's UNNORMALIZED_SCALE), and the model still no better
# than predicting their mean at the end (training MSE at least BASELINE_SHARE of the targets'
# variance; for MAE and Huber, of their mean absolute deviation). A unit-scale output layer needs its bias and
# kernel to grow 100x+; at Adam's 1e-3 per step that takes far longer than the run. Measured
# (`python bench/rule_zoo.py --only target`): broken MLP/CNN runs (targets ~300-2000) end at
# 3-400x the variance; standardised twins end at 0.01-0.3x of it.
TARGET_SCALE = 20.0
BASELINE_SHARE = 0.8
MEAN_ABS_DEVIATION = float(np.sqrt(2 / np.pi))


def _lint(run: RunSignals, checks: Collection[LintCheck]) -> list[LintEvent]:
    return run.first_of_each_check(LintEvent, checks)


def check_unnormalized_target(run: RunSignals) -> list[Finding]:
    stats = label_statistics(run)
    loss = run.get(sig.EPOCH_LOSS) or run.get(sig.LOSS)
    if stats is None or loss is None or stats.mean is None or stats.variance is None:
        return []
    if stats.loss not in (LossKind.MEAN_SQUARED_ERROR, LossKind.MEAN_ABSOLUTE_ERROR, LossKind.HUBER):
        return []
    mean, variance = stats.mean, stats.variance
    rms = float(np.sqrt(mean**2 + variance))
    if rms < TARGET_SCALE or variance <= 0:
        return []
    finite = finite_part(loss)
    if len(finite) < 2:
        return []
    end = float(finite.values[-1])
    # Predicting the mean costs the variance (MSE), or about sqrt(2/pi) of the standard deviation
    # (MAE, and Huber far beyond its delta).
    baseline = variance if stats.loss == LossKind.MEAN_SQUARED_ERROR else MEAN_ABS_DEVIATION * float(np.sqrt(variance))
    if end < BASELINE_SHARE * baseline:
        return []
    name = "variance" if stats.loss == LossKind.MEAN_SQUARED_ERROR else "mean absolute deviation"
    return [
        Finding(
            code=Code.UNNORMALIZED_TARGET,
            severity=Severity.WARNING,
            step=stats.step,
            title=(
                f"Regression targets far from unit scale (mean {mean:.4g}, std {np.sqrt(variance):.4g}): the loss "
                f"ends at {end:.4g}, no better than predicting their mean"
            ),
            detail=(
                f"The {stats.count or '?'} targets sampled from the first batches have mean {mean:.4g} and standard "
                f"deviation {np.sqrt(variance):.4g}, but the output layer starts at unit scale and moves ~1e-3 per "
                f"step: the training {stats.loss.value} ends at {end:.4g}, still {end / baseline:.3g}x the targets' "
                f"{name} ({baseline:.4g}), which predicting the mean would reach. Standardise the targets (and undo "
                "it on the predictions)."
            ),
            evidence=Evidence(
                (sig.EPOCH_LOSS if run.get(sig.EPOCH_LOSS) is not None else sig.LOSS,),
                None,
                facts=event_facts(stats, (*LINT_NOT_FACTS, "class_counts")) + fact(f"final {stats.loss.value}", end),
            ),
            fixes=(
                Fix(
                    "Standardise the targets with training-set statistics; invert on the predictions.",
                    "y_mean, y_std = y_train.mean(), y_train.std()\n"
                    "model.fit(x_train, (y_train - y_mean) / y_std, ...)\n"
                    "y_pred = model.predict(x) * y_std + y_mean",
                    intents=(SCALE_TARGETS,),
                ),
                Fix(
                    "Or start the output layer at the targets' scale.",
                    "keras.layers.Dense(1, bias_initializer=keras.initializers.Constant(y_train.mean()))",
                    intents=(SCALE_TARGETS,),
                ),
            ),
        )
    ]


def _constant_input(event: LintEvent) -> Finding:
    value = event.input_value or 0.0
    return Finding(
        code=Code.UNNORMALIZED_INPUT,
        severity=Severity.CRITICAL,
        step=event.step,
        title=f"Every input value in the first batch is {value:g}: the inputs carry no information",
        detail=(
            "The whole first batch holds one value, so the model cannot tell samples apart; it can only learn "
            "the label frequencies, and the first layer's gradients are zero. A common cause is integer "
            "division: uint8 pixels // 255 is 0 for every pixel below 255."
        ),
        evidence=Evidence((), facts=event_facts(event, LINT_NOT_FACTS), check=event.check.value),
        fixes=(
            Fix(
                "Scale with float division (or inside the model).",
                "x = x.astype('float32') / 255.0  # not x // 255",
                intents=(SCALE_INPUTS,),
            ),
            Fix(
                "Check the preprocessing output before training.",
                "print(x_train.min(), x_train.max(), x_train.std())",
                intents=(SCALE_INPUTS,),
            ),
        ),
    )


def _tiny_input(event: LintEvent) -> Finding:
    rms, low, high = (value or 0.0 for value in (event.input_rms, event.input_min, event.input_max))
    return Finding(
        code=Code.UNNORMALIZED_INPUT,
        severity=Severity.WARNING,
        step=event.step,
        title=f"Inputs are scaled to almost nothing (typical magnitude {rms:.2g}, range {low:.2g} to {high:.2g})",
        detail=(
            f"What the first weighted layer receives never exceeds {max(abs(low), abs(high)):.2g} in magnitude "
            f"(RMS {rms:.2g}), about 1000x below the unit scale its initialisation assumes: its outputs are "
            "almost only its biases, so the model barely sees the input. Dead ReLUs and a loss plateau follow "
            "from this, not from the learning rate. The usual cause is scaling twice: x / 255 on data that was "
            "already in [0, 1], or a Rescaling(1/255) layer on top of it."
        ),
        evidence=Evidence((), facts=event_facts(event, LINT_NOT_FACTS), check=event.check.value),
        fixes=(
            Fix(
                "Scale the inputs once: drop the second division (check what the data loader already does).",
                "print(x_train.min(), x_train.max())  # already in [0, 1]? then no x / 255 and no Rescaling(1/255)",
                intents=(SCALE_INPUTS,),
            ),
            Fix(
                "Or standardise inside the model.",
                "norm = keras.layers.Normalization(); norm.adapt(x_train)",
                intents=(SCALE_INPUTS,),
            ),
        ),
    )


def check_unnormalized_input(run: RunSignals) -> list[Finding]:
    constant = _lint(run, {LintCheck.CONSTANT_INPUT})
    if constant:
        return [_constant_input(constant[0])]
    tiny = _lint(run, {LintCheck.TINY_INPUT})
    if tiny:
        return [_tiny_input(tiny[0])]
    events = _lint(run, {LintCheck.UNNORMALIZED_INPUT})
    if not events:
        return []
    event = events[0]
    rms, low, high = (value or 0.0 for value in (event.input_rms, event.input_min, event.input_max))
    pixels = low >= 0 and 100 < high <= 255
    gain = learned_anyway(run)
    learned = gain is not None
    return [
        Finding(
            code=Code.UNNORMALIZED_INPUT,
            severity=Severity.INFO if learned else Severity.WARNING,
            step=event.step,
            title=f"Inputs are far from unit scale (typical magnitude {rms:.3g}, range {low:.3g} to {high:.3g})"
            + (
                f", yet the model learned: its best loss is {gain:.0%} below a constant prediction's" if learned else ""
            ),
            detail=(
                "Weight initialisers (Glorot, He) and default learning rates assume inputs of roughly unit "
                f"scale; inputs of magnitude {rms:.3g} saturate activations and make the first layers' "
                "gradients huge or the loss plateau."
                + (" These look like raw 0-255 pixels." if pixels else "")
                + (
                    " This run learned anyway, so nothing here needs changing; scaling the inputs usually "
                    "trains faster and tolerates larger learning rates."
                    if learned
                    else ""
                )
            ),
            evidence=Evidence((), facts=event_facts(event, LINT_NOT_FACTS), check=event.check.value),
            fixes=(
                Fix(
                    "Scale pixels to [0, 1] inside the model.",
                    "keras.layers.Rescaling(1.0 / 255)  # first layer",
                    intents=(SCALE_INPUTS,),
                )
                if pixels
                else Fix(
                    "Standardise features inside the model (learned from the training data).",
                    "norm = keras.layers.Normalization(); norm.adapt(x_train)  # then use norm as the first layer",
                    intents=(SCALE_INPUTS,),
                ),
                Fix(
                    "Or scale the data once before fit().",
                    "x = (x - x.mean(axis=0)) / (x.std(axis=0) + 1e-7)",
                    intents=(SCALE_INPUTS,),
                ),
            ),
        )
    ]
