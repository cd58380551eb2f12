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

import dataclasses

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import LintEvent
from tb_trainhealth.contract.vocab import CATEGORICAL_LOSSES, LintCheck, LossKind
from tb_trainhealth.findings import LOWER_RATE, Evidence, Fact, Finding, Fix, Severity
from tb_trainhealth.series_math import finite_part, rolling_median
from tb_trainhealth.signals import RunSignals, Series

# Measured (`python bench/real_bug_zoo.py`, `python bench/healthy_sweep.py`; README's table):
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
# Epochs (or logged points) the judgement needs: one epoch is the untrained model's start; or
# per-step losses, where there is no validation loss.
MIN_POINTS = 2
MIN_STEPS = 20
# A yardstick at or below this is no yardstick (one class in every label, constant targets).
MIN_YARDSTICK = 1e-6
# Up to FAR_ABOVE_CONSTANT x the yardstick, a loss still falling (by STILL_FALLING over the last
# third of the run) is on its way there, not wrong: a healthy short run whose output layer is
# still learning the targets' offset (tests/test_common_mistakes' sigmoid twin: 2x after 180
# steps, falling 30% an epoch). Beyond it, no trend excuses it (issue 44: an MSE falling from 58
# to 37 where the mean scores 2).
FAR_ABOVE_CONSTANT = 3.0
STILL_FALLING = 0.10
# A loss at least this share below the constant prediction's is clear of it: something learned
# carries over (the plateau rule's BASELINE_TOLERANCE).
VAL_LOSS_TOLERANCE = 0.03


def beats_constant(loss: float, baseline: float) -> bool:
    """A loss clear of what the constant prediction costs: something learned carries over."""
    return loss < (1 - VAL_LOSS_TOLERANCE) * baseline


def constant_baseline(run: RunSignals) -> tuple[float, str] | None:
    """The loss a model that ignores its input reaches: (value, how it is made). For cross-entropy
    and MSE from the label statistics (the entropy of the label frequencies, the targets'
    variance); for every other loss, what the callback measured with the loss itself."""
    stats = next(iter(run.first_of_each_check(LintEvent, {LintCheck.LABEL_STATISTICS})), None)
    if stats is None:
        return None
    loss, mean, variance = stats.loss, stats.mean, stats.variance
    if loss in CATEGORICAL_LOSSES and stats.class_counts:
        p = np.asarray(stats.class_counts, np.float64)
        p = p[p > 0] / p.sum() if p.sum() > 0 else p
        if len(p) < 2:
            return None
        entropy = float(-(p * np.log(p)).sum())
        return (
            entropy,
            f"the entropy of the label frequencies over {len(p)} classes (ln {len(p)} = {np.log(len(p)):.3g} if balanced)",
        )
    if loss == LossKind.BINARY_CROSSENTROPY and mean is not None and 0 < mean < 1:
        entropy = float(-(mean * np.log(mean) + (1 - mean) * np.log(1 - mean)))
        return entropy, f"the entropy of a {mean:.0%} positive rate"
    if loss == LossKind.MEAN_SQUARED_ERROR and variance is not None and variance > 0:
        return variance, "the variance of the targets (predicting their mean)"
    stick = yardstick(run)
    return (stick.value, stick.how) if stick is not None else None


@dataclasses.dataclass(frozen=True)
class Yardstick:
    value: float
    how: str
    stats: LintEvent


def yardstick(run: RunSignals) -> Yardstick | None:
    """What a constant prediction scores under the run's own loss, where the callback measured it
    (and it is not ~0: labels of one class, or constant targets, leave nothing to measure against)."""
    stats = next(iter(run.first_of_each_check(LintEvent, {LintCheck.LABEL_STATISTICS})), None)
    if stats is None or stats.constant_loss is None or not stats.constant_loss > MIN_YARDSTICK:
        return None
    return Yardstick(float(stats.constant_loss), stats.constant_how or "a constant prediction", stats)


def judged_loss(run: RunSignals) -> tuple[str, Series] | None:
    """(series name, finite values) the yardstick is held against: the validation loss; else the
    per-step training loss as rolling medians over a tenth of the run (an epoch's mean carries the
    untrained model's first steps: a 2-epoch run's first epoch is mostly that); else the epoch's."""
    val = run.get(sig.EPOCH_VAL_LOSS)
    if val is not None and len(finite_part(val)) >= MIN_POINTS:
        return sig.EPOCH_VAL_LOSS, finite_part(val)
    steps = run.get(sig.LOSS)
    if steps is not None and len(finite_part(steps)) >= MIN_STEPS:
        finite = finite_part(steps)
        window = max(1, len(finite) // 10)
        return sig.LOSS, Series(finite.steps, rolling_median(finite.values, window))
    train = run.get(sig.EPOCH_LOSS)
    if train is not None and len(finite_part(train)) >= MIN_POINTS:
        return sig.EPOCH_LOSS, finite_part(train)
    return None


def gain_over_constant(run: RunSignals) -> float | None:
    """How far below the yardstick the run's best loss got, as a share of it (0.6: 60% below;
    negative: above it). For other rules: a run with a clear gain learned, whatever else is odd."""
    judged = _judged(run)
    return None if judged is None else 1.0 - judged[3] / judged[0].value


# A suspicious set-up (unscaled inputs, a blow-up from the initial weights) is a warning where the
# run shows its cost. A run whose best loss got at least this share below the constant
# prediction's learned anyway: the finding is info, with that evidence. Measured
# (`python bench/real_bug_zoo.py`, `python bench/healthy_sweep.py`): see the README's table.
LEARNED_ANYWAY = 0.25


def learned_anyway(run: RunSignals) -> float | None:
    """The run's gain over the constant prediction (see `gain_over_constant`) where it is at least
    LEARNED_ANYWAY, else None (it did not learn, or nothing says)."""
    gain = gain_over_constant(run)
    return gain if gain is not None and gain >= LEARNED_ANYWAY else None


def _judged(run: RunSignals) -> tuple[Yardstick, str, Series, float, float] | None:
    """(yardstick, series name, its values, best, last) where both the yardstick and a loss exist."""
    stick, judged = yardstick(run), judged_loss(run)
    if stick is None or judged is None:
        return None
    name, series = judged
    return stick, name, series, float(np.min(series.values)), float(series.values[-1])


def check_worse_than_constant(run: RunSignals) -> list[Finding]:
    """A loss that stays ABOVE_CONSTANT to FAR_ABOVE_CONSTANT x the yardstick, no longer falling
    (a warning: a plateau there names its own cause first)."""
    judged = _judged(run)
    if judged is None:
        return []
    stick, name, series, best, last = judged
    if (1 + ABOVE_CONSTANT) * stick.value <= best < FAR_ABOVE_CONSTANT * stick.value and not _falling(series):
        return [_above(run, stick, name, series, best, last, Severity.WARNING)]
    return []


def check_far_worse_than_constant(run: RunSignals) -> list[Finding]:
    """A loss that never gets within FAR_ABOVE_CONSTANT x the yardstick, or a model collapsed onto
    it after a blow-up (critical: the model is wasted from there on, whatever else the curve does)."""
    judged = _judged(run)
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


def _above(
    run: RunSignals, stick: Yardstick, name: str, series: Series, best: float, last: float, severity: Severity
) -> Finding:
    which = "validation" if name == sig.EPOCH_VAL_LOSS else "training"
    judged_as = "" if name != sig.LOSS else " (per step, as rolling medians over a tenth of the run)"
    return Finding(
        code="worse_than_constant",
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
        fixes=CAUSE_FIXES,
    )


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
            code="worse_than_constant",
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
