"""During a fit: is the run, as far as it got, clearly behind its baseline at the same step?

The end-of-fit verdict (`comparison.compare`) judges each run's final and best value. Mid-fit the
run's early epochs are naturally behind the baseline's end, so both runs are cut at the run's
latest epoch (the same step; epoch by epoch where the baseline has only epochs), and a baseline
shorter than the run is judged over its own steps only. The band is the seeds' noise
(`noise.py`) widened by how far the baseline itself moves around that point (its neighbouring
epochs): where the curves are steep, a run one epoch behind the baseline is not clearly behind.
Only the deciding metric is judged (no diagnosis, no settings diff), so a check costs little.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from tb_trainhealth.compare.comparison import loss_start, yardstick
from tb_trainhealth.compare.curves import METRICS, MetricPair, compares_per_step, shared_metrics
from tb_trainhealth.compare.noise import Judgement, Noise, deciding_metric, judge
from tb_trainhealth.compare.settings_diff import changed_settings
from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import FitEndEvent
from tb_trainhealth.signals import RunSignals, Series

# Epochs both runs must have reached before the run is judged: after one epoch two seeds of one
# set-up are furthest apart (the first epoch's curve is the steepest, and nothing before it
# says how steep).
MIN_EPOCHS = 2
SERIES_OF = {name: series for series, name, _ in METRICS}


@dataclasses.dataclass(frozen=True)
class Yardstick:
    """What stays the same through a fit (the settings are recorded at its start): worked out once."""

    losses_comparable: bool
    noise: Noise
    loss_start: float | None

    @classmethod
    def of(cls, run: RunSignals, baseline: RunSignals) -> Yardstick:
        changes = changed_settings(run.settings, baseline.settings, run.info, baseline.info)
        comparable, noise = yardstick(run, baseline, changes)
        return cls(comparable, noise, loss_start(baseline))


@dataclasses.dataclass(frozen=True)
class SoFar:
    judgement: Judgement
    run_end: int  # the last step of the run judged (the baseline's end where that came first)
    baseline_end: int  # the same point on the baseline's axis


def judged_so_far(run: RunSignals, baseline: RunSignals, stick: Yardstick) -> SoFar | None:
    """The run so far against the baseline cut at the same point; None: nothing to judge yet
    (fewer than MIN_EPOCHS epochs on either side, or no metric that decides)."""
    ours, theirs = run.get(sig.EPOCH_LOSS), baseline.get(sig.EPOCH_LOSS)
    if ours is None or theirs is None:
        return None
    if compares_per_step(run, baseline):  # the same step; a shorter baseline: its own steps
        run_end = baseline_end = min(int(ours.steps[-1]), int(theirs.steps[-1]))
    else:  # epochs of other lengths (another batch size), or a baseline with epochs only: epoch by epoch
        epochs = min(len(ours), len(theirs))
        run_end, baseline_end = int(ours.steps[epochs - 1]), int(theirs.steps[epochs - 1])
    run_cut, baseline_cut = _metrics_up_to(run, run_end), _metrics_up_to(baseline, baseline_end)
    epochs_run = run_cut.get(sig.EPOCH_LOSS)
    epochs_baseline = baseline_cut.get(sig.EPOCH_LOSS)
    if epochs_run is None or epochs_baseline is None or min(len(epochs_run), len(epochs_baseline)) < MIN_EPOCHS:
        return None
    deciding = deciding_metric(shared_metrics(run_cut, baseline_cut), stick.losses_comparable)
    if deciding is None:
        return None
    moved = _baseline_move(baseline.series[SERIES_OF[deciding.name]], baseline_end, deciding)
    noise = Noise(
        max(stick.noise.accuracy, moved),
        max(stick.noise.loss, moved),
        f"{stick.noise.source}, or the baseline's own move over the epochs around {baseline.at(baseline_end)}",
    )
    judgement = judge([deciding], stick.loss_start, stick.losses_comparable, noise)
    why = f"at {run.at(run_end)}, {judgement.why}"
    return SoFar(dataclasses.replace(judgement, why=why), run_end, baseline_end)


def cut_at(signals: RunSignals, end: int) -> RunSignals:
    """The run as it was at `end`, for the finding: every series cut, and no end of fit (a run still
    training has none yet; a baseline's would read as "the run stopped after fewer epochs")."""
    cut = signals.before(end + 1)
    return dataclasses.replace(cut, events=[e for e in cut.events if not isinstance(e, FitEndEvent)])


def _metrics_up_to(signals: RunSignals, end: int) -> RunSignals:
    """Only the compared per-epoch series, cut after `end`, and the end of fit that says what the
    metrics resolved to (`curves.accuracy_differs`): cheap to build at every epoch end."""
    series = {}
    for name, _, _ in METRICS:
        found = signals.get(name)
        if found is not None:
            kept = found.steps <= end
            series[name] = Series(found.steps[kept], found.values[kept])
    ends = [event for event in signals.events if isinstance(event, FitEndEvent) and event.metric_classes]
    return RunSignals(signals.run, series=series, axis=signals.axis, events=ends[-1:])


def _baseline_move(series: Series, end: int, pair: MetricPair) -> float:
    """How far the baseline's metric moves between its epoch at `end` and the epochs either side
    (a log ratio for a loss): what one epoch of lag costs there."""
    at = int(np.searchsorted(series.steps, end, side="right")) - 1
    values = series.values[max(at - 1, 0) : at + 2]
    if pair.higher_is_better:
        moves = np.abs(values - series.values[at])
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            logs = np.log(np.maximum(values, 1e-12))
        moves = np.abs(logs - math.log(max(series.values[at], 1e-12)))
    moves = moves[np.isfinite(moves)]
    return float(moves.max()) if len(moves) else 0.0
