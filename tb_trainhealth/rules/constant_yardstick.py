"""`worse_than_constant`: the run ends no better than a model that ignores its input.

Every run carries this yardstick: the callback scores the compiled loss on a constant prediction
(the class frequencies, the targets' mean or median) over the first batches' targets
(`callback/lint/constant_prediction.py`). A run whose loss never gets below it learned nothing
that a constant would not give, whatever the loss, the label encoding or the metric. Judged on
the validation loss where there is one (no dropout, not weighted by class_weight), else on the
training loss.

Two checks:
- above: even at its best the loss stays ABOVE_CONSTANT over the yardstick (a warning, once it
  no longer falls; critical from FAR_ABOVE_CONSTANT, whatever its slope). The model does worse
  than ignoring its input: the output layer cannot produce the targets, the loss does not fit
  them, or the first steps wrecked the model.
- collapsed (critical): the loss settles onto the yardstick to COLLAPSED, training and validation alike, and
  the run shows the harm (it once stood FAR_ABOVE the yardstick, or it got clear of it and fell
  back): a model that outputs one constant. A loss merely near the yardstick, on data with
  little signal, is what a healthy model there gets: not a finding.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.findings import (
    CHANGE_LOSS,
    CHANGE_OUTPUT,
    LOWER_RATE,
    MORE_EPOCHS,
    RAISE_RATE,
    Evidence,
    Fact,
    Finding,
    Fix,
    Severity,
)
from tb_trainhealth.series_math import finite_part
from tb_trainhealth.signals import RunSignals, Series
from tb_trainhealth.yardstick import Yardstick, gain_over_constant, judged_run

# Measured (`python bench/real_bug_zoo.py`, `python bench/healthy_sweep.py`; docs/benchmarks.md):
# healthy runs' best validation loss ends at or below 0.97x the yardstick; broken runs that
# "train" while doing worse than a constant sit 1.2x to 20x above it.
ABOVE_CONSTANT = 0.10
# A model that outputs one constant scores the yardstick to the sampling error of the first
# batches' targets (a fraction of a percent): within this share, training and validation.
COLLAPSED = 0.01
# ...and the harm that makes it a bug, not low-signal data: the loss once stood this many times
# above the yardstick (a first epoch a far-too-large learning rate blew up), or got clear of it
# by GOT_CLEAR and fell back.
FAR_ABOVE = 10.0
GOT_CLEAR = 0.10
# Up to FAR_ABOVE_CONSTANT x the yardstick, a loss still falling (by STILL_FALLING over the last
# third of the run) is on its way there, not wrong: a healthy short run whose output layer is
# still learning the targets' offset (tests/test_common_mistakes' sigmoid twin: 2x after 180
# steps, falling 30% an epoch). Beyond it, no trend excuses it (a real bug: an MSE falling from 58
# to 37 where the mean scores 2).
FAR_ABOVE_CONSTANT = 3.0
STILL_FALLING = 0.10

# A suspicious set-up (unscaled inputs, a blow-up from the initial weights) is a warning where the
# run shows its cost. A run whose best loss got at least this share below the constant
# prediction's learned anyway: the finding is info, with that evidence. Measured
# (`python bench/real_bug_zoo.py`, `python bench/healthy_sweep.py`): see docs/benchmarks.md.
LEARNED_ANYWAY = 0.25


def learned_anyway(run: RunSignals) -> float | None:
    """The run's gain over the constant prediction (see `gain_over_constant`) where it is at least
    LEARNED_ANYWAY, else None (it did not learn, or nothing says)."""
    gain = gain_over_constant(run)
    return gain if gain is not None and gain >= LEARNED_ANYWAY else None


def check_worse_than_constant(run: RunSignals) -> list[Finding]:
    """A loss that stays ABOVE_CONSTANT to FAR_ABOVE_CONSTANT x the yardstick, no longer falling
    (a warning: a plateau there names its own cause first)."""
    judged = judged_run(run)
    if judged is None:
        return []
    stick, name, series, best, last = judged
    if (1 + ABOVE_CONSTANT) * stick.value <= best < FAR_ABOVE_CONSTANT * stick.value and not _falling(series):
        return [_above(run, stick, name, series, best, last, Severity.WARNING)]
    return []


def check_far_worse_than_constant(run: RunSignals) -> list[Finding]:
    """A loss that never gets within FAR_ABOVE_CONSTANT x the yardstick, or a model collapsed onto
    it after a blow-up (critical: the model is wasted from there on, whatever else the curve does)."""
    judged = judged_run(run)
    if judged is None:
        return []
    stick, name, series, best, last = judged
    if best >= FAR_ABOVE_CONSTANT * stick.value:
        return [_above(run, stick, name, series, best, last, Severity.CRITICAL)]
    return _collapsed(run, stick, name, series)


def _falling(series: Series) -> bool:
    """The loss still fell by STILL_FALLING over the last third of its points."""
    values = series.values
    third = values[int(len(values) * 2 / 3)] if len(values) >= 3 else values[0]
    return bool(values[-1] <= (1 - STILL_FALLING) * third)


def _facts(stick: Yardstick, name: str, best: float, last: float) -> tuple[Fact, ...]:
    return (
        Fact("constant prediction's loss", f"{stick.value:.4g} ({stick.how})"),
        Fact(f"best {name}", f"{best:.4g} ({best / stick.value:.3g}x the constant's)"),
        Fact(f"final {name}", f"{last:.4g}"),
    )


CAUSE_FIXES = (
    Fix(
        "Check that the last layer can output the targets, and that the loss fits them.",
        "print(model.layers[-1].activation, y_train[:5], y_train.min(), y_train.max())\n"
        "# classes: softmax + (sparse_)categorical_crossentropy; 0/1 labels: sigmoid + binary_crossentropy;\n"
        "# regression: a linear output + mse, targets standardised",
        intents=(
            CHANGE_OUTPUT,
            CHANGE_LOSS,
        ),
    ),
    Fix(
        "Lower the learning rate 10x and watch the first epoch's loss: it should fall below the constant's.",
        "optimizer = keras.optimizers.Adam(learning_rate=1e-4)",
        (LOWER_RATE,),
    ),
    Fix(
        "Fit 32 samples alone for 200 steps: a model that cannot get below the constant there is wired wrongly.",
        "model.fit(x_train[:32], y_train[:32], epochs=200, verbose=0)",
    ),
)


RAISE_RATE_FIX = Fix(
    "Raise the learning rate: the loss is still falling, too slowly to get below the constant's in this run.",
    "optimizer = keras.optimizers.Adam(learning_rate=1e-3)",
    (RAISE_RATE,),
)
MORE_STEPS_FIX = Fix(
    "Train for more steps: the loss is still falling.",
    "model.fit(..., epochs=10 * epochs, callbacks=[keras.callbacks.EarlyStopping(monitor='val_loss', patience=5, "
    "restore_best_weights=True)])",
    (MORE_EPOCHS,),
)


def _above(
    run: RunSignals, stick: Yardstick, name: str, series: Series, best: float, last: float, severity: Severity
) -> Finding:
    which = "validation" if name == sig.EPOCH_VAL_LOSS else "training"
    judged_as = "" if name != sig.LOSS else " (per step, as rolling medians over a tenth of the run)"
    return Finding(
        code=Code.WORSE_THAN_CONSTANT,
        severity=severity,
        step=int(series.steps[0]),
        title=(
            f"Worse than a constant: the {which} loss never gets below {stick.value:.4g}, what {stick.how} "
            f"scores (best {best:.4g}, {best / stick.value:.2g}x)"
        ),
        detail=(
            f"A model that ignores its input and answers by {stick.how} scores {stick.value:.4g} under this run's "
            f"own loss, on the first batches' targets. In {len(series)} logged points the {which} loss{judged_as} is at best "
            f"{best:.4g} and ends at {last:.4g}: the model does worse than knowing nothing about the inputs, "
            "whatever the loss curve's slope says. An output layer that cannot produce the targets (a relu or "
            "sigmoid where the targets are outside its range), a loss that does not fit the labels' encoding, "
            "or first steps that threw the weights far (too large a learning rate, unscaled inputs or targets) "
            "do this."
        ),
        evidence=Evidence((name,), int(series.steps[0]), int(series.steps[-1]), facts=_facts(stick, name, best, last)),
        fixes=_above_fixes(run, series, stick),
    )


def _above_fixes(run: RunSignals, series: Series, stick: Yardstick) -> tuple[Fix, ...]:
    """The learning rate's direction only where the curve shows it: lower after a blow-up (the loss
    stood FAR_ABOVE the yardstick after a lower start); a loss still falling, slowly, wants more
    (a rate 1000x too small, 20 steps); else neither (the run's trials decide)."""
    values = series.values
    start, peak = float(values[0]), float(np.max(values))
    if peak >= FAR_ABOVE * stick.value and peak > 2 * start:
        return CAUSE_FIXES
    if _falling(series):
        return (CAUSE_FIXES[0], RAISE_RATE_FIX, MORE_STEPS_FIX)
    return (CAUSE_FIXES[0], CAUSE_FIXES[2])


def _collapsed(run: RunSignals, stick: Yardstick, name: str, series: Series) -> list[Finding]:
    train = run.get(sig.EPOCH_LOSS)
    ends = [float(series.values[-1])] + ([float(finite_part(train).values[-1])] if train is not None else [])
    if not all(abs(end / stick.value - 1) <= COLLAPSED for end in ends):
        return []
    peak = max(float(np.max(s.values)) for s in (series, finite_part(train) if train is not None else series))
    best = float(np.min(series.values))
    blown_up = peak >= FAR_ABOVE * stick.value
    fell_back = best <= (1 - GOT_CLEAR) * stick.value
    if not (blown_up or fell_back):
        return []
    last = float(series.values[-1])
    how = (
        f"after the loss stood at {peak:.4g} ({peak / stick.value:.3g}x the constant's)"
        if blown_up
        else f"after it had got down to {best:.4g}"
    )
    return [
        Finding(
            code=Code.WORSE_THAN_CONSTANT,
            severity=Severity.CRITICAL,
            step=int(series.steps[0]),
            title=(
                f"The model collapsed onto a constant: its loss ends at {last:.4g}, exactly what {stick.how} "
                f"scores ({stick.value:.4g}), {how}"
            ),
            detail=(
                f"Training and validation losses both end within {COLLAPSED:.0%} of {stick.value:.4g}, the score "
                f"of a model that ignores its input and answers by {stick.how}: the model outputs one constant. "
                + (
                    "The loss first blew up far above it: a learning rate too large for the first steps threw "
                    "the weights far, and the units behind the output died or saturated on the way."
                    if blown_up
                    else "It had learned more than that before, then lost it: too large a learning rate, or "
                    "units that died on the way."
                )
            ),
            evidence=Evidence(
                (name,), int(series.steps[0]), int(series.steps[-1]), facts=_facts(stick, name, best, last)
            ),
            fixes=CAUSE_FIXES[1:] + CAUSE_FIXES[:1],
        )
    ]
