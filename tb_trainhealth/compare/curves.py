"""The numbers a comparison judges: each shared metric's final and best value, and the step where
the run's training curve leaves the baseline's band."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import FitEndEvent
from tb_trainhealth.series_math import rolling_median, smoothing_window
from tb_trainhealth.signals import RunSignals, Series

# The metrics compared, most telling first: what the user selects a model on comes first.
# (series, name as Keras logs it, higher is better)
METRICS = (
    (sig.EPOCH_VAL_ACCURACY, "val_accuracy", True),
    (sig.EPOCH_VAL_LOSS, "val_loss", False),
    (sig.EPOCH_ACCURACY, "accuracy", True),
    (sig.EPOCH_LOSS, "loss", False),
)
ACCURACY_SERIES = (sig.EPOCH_VAL_ACCURACY, sig.EPOCH_ACCURACY)
# What Keras resolves 'accuracy' to for class labels (Keras 3 classes, Keras 2 functions): one
# quantity whatever the encoding. Keras 2's 'accuracy' under a regression loss is exact equality.
SHARE_OF_CORRECT_CLASSES = frozenset(
    {
        "BinaryAccuracy",
        "CategoricalAccuracy",
        "SparseCategoricalAccuracy",
        "binary_accuracy",
        "categorical_accuracy",
        "sparse_categorical_accuracy",
    }
)
# An accuracy at most this in both runs throughout says nothing (Keras' 'accuracy' on targets
# that are not classes: exact matches of real numbers).
DEGENERATE_ACCURACY = 0.01
# Points both curves are put on before they are compared: enough for where, few enough to be fast.
GRID_POINTS = 400
# A run has left the baseline's band once its smoothed loss stays beyond it for this share of the
# shared steps (at least MIN_PARTED_POINTS grid points): a single unlucky stretch is not a parting.
PARTED_SHARE = 0.05
MIN_PARTED_POINTS = 3


@dataclasses.dataclass(frozen=True)
class MetricPair:
    name: str  # as Keras logs it: "val_accuracy", "loss"
    higher_is_better: bool
    baseline_final: float
    run_final: float
    baseline_best: float
    run_best: float

    def to_dicts(self) -> list[dict[str, object]]:
        """The JSON contract's metric entries: the final value as `name`, the best as `best_<name>`."""
        return [
            {"name": self.name, "baseline": _json_float(self.baseline_final), "run": _json_float(self.run_final)},
            {
                "name": "best_" + self.name,
                "baseline": _json_float(self.baseline_best),
                "run": _json_float(self.run_best),
            },
        ]


def _json_float(value: float) -> float | None:
    return value if math.isfinite(value) else None


def shared_metrics(run: RunSignals, baseline: RunSignals) -> list[MetricPair]:
    """Every metric both runs logged per epoch that can tell them apart and that means the same in
    both (`accuracy_differs`), else the training loss per step where neither has epochs. A run whose
    metric ends in NaN ends at the worst value there is."""
    pairs = []
    differs = accuracy_differs(run, baseline) is not None
    for series_name, name, higher in METRICS:
        if differs and series_name in ACCURACY_SERIES:
            continue
        ours, theirs = run.get(series_name), baseline.get(series_name)
        if ours is not None and theirs is not None and telling(ours, theirs, higher):
            pairs.append(MetricPair(name, higher, *_final_and_best_pair(theirs, ours, higher)))
    if not pairs:
        ours, theirs = run.get(sig.LOSS), baseline.get(sig.LOSS)
        if ours is not None and theirs is not None and telling(ours, theirs, False):
            pairs.append(MetricPair("loss", False, *_final_and_best_pair(smoothed(theirs), smoothed(ours), False)))
    return pairs


def accuracy_differs(run: RunSignals, baseline: RunSignals) -> str | None:
    """Why the two runs' "accuracy" is not one quantity (Keras resolved it to metrics of another
    meaning: exact equality of real numbers against the share of correct classes), or None where it
    is, or where a run did not record what it resolved to (logs before 0.5, a killed fit)."""
    ours, theirs = _accuracy_class(run), _accuracy_class(baseline)
    if ours is None or theirs is None or _meaning(ours) == _meaning(theirs):
        return None
    return f"accuracy is not compared: it resolved to {ours} in the run and to {theirs} in the baseline"


def _accuracy_class(signals: RunSignals) -> str | None:
    ends = signals.events_of(FitEndEvent)
    classes = ends[-1].metric_classes if ends else {}
    return next((classes[key] for key in sig.ACCURACY_KEYS if key in classes), None)


def _meaning(metric_class: str) -> str:
    """Metrics that count the share of correct classes, whichever label encoding they read, mean one
    thing; any other metric means only itself."""
    return "share of correct classes" if metric_class in SHARE_OF_CORRECT_CLASSES else metric_class


def telling(run: Series, baseline: Series, higher: bool) -> bool:
    """A metric that can tell two runs apart: not one constant value in both, not an accuracy near
    0 in both (Keras' 'accuracy' on a regression counts exact matches), and for a loss, positive in both where
    finite (a ratio of losses needs that; a cross-entropy below 0 is broken labels, said by the
    run's own findings)."""
    values = [s.values[np.isfinite(s.values)] for s in (run, baseline)]
    if all(len(v) and np.ptp(v) == 0 for v in values) and values[0][0] == values[1][0]:
        return False
    if higher:
        return not all(len(v) == 0 or float(v.max()) <= DEGENERATE_ACCURACY for v in values)
    return all(len(v) == 0 or float(v.min()) > 0 for v in values)


def _final_and_best_pair(baseline: Series, run: Series, higher: bool) -> tuple[float, float, float, float]:
    base_final, base_best = _final_and_best(baseline, higher)
    run_final, run_best = _final_and_best(run, higher)
    return base_final, run_final, base_best, run_best


def _final_and_best(series: Series, higher: bool) -> tuple[float, float]:
    worst = -math.inf if higher else math.inf
    values = np.where(np.isfinite(series.values), series.values, worst)
    best = float(values.max() if higher else values.min())
    return float(values[-1]), best


def smoothed(series: Series) -> Series:
    """A per-step loss without its minibatch noise: its last value is then the level it ended at."""
    return Series(series.steps, rolling_median(series.values, smoothing_window(len(series))))


def parting_step(run: RunSignals, baseline: RunSignals, band: float, worse: bool) -> int | None:
    """The first step from which the run's training loss stays `band` (a log ratio) above (worse)
    or below (better) the baseline's, for a sustained stretch; None where it never does.

    Compared per step where both runs count the same steps per epoch, else epoch by epoch (a
    larger batch makes fewer steps of the same data)."""
    if compares_per_step(run, baseline):
        ours, theirs = smoothed(run.series[sig.LOSS]), smoothed(baseline.series[sig.LOSS])
        return _parting(ours.steps, ours.values, theirs.steps, theirs.values, band, worse)
    ours, theirs = run.get(sig.EPOCH_LOSS), baseline.get(sig.EPOCH_LOSS)
    if ours is None or theirs is None:
        return None
    index = _parting(np.arange(len(ours)), ours.values, np.arange(len(theirs)), theirs.values, band, worse)
    return None if index is None else int(ours.steps[index])


def compares_per_step(run: RunSignals, baseline: RunSignals) -> bool:
    """Both runs have a per-step loss on the same axis and count the same steps per epoch (a larger
    batch makes fewer steps of the same data: then only epochs line up)."""
    if run.axis != baseline.axis or run.get(sig.LOSS) is None or baseline.get(sig.LOSS) is None:
        return False
    ours, theirs = run.get(sig.EPOCH_LOSS), baseline.get(sig.EPOCH_LOSS)
    if ours is None or theirs is None:
        return True  # no epochs known: steps are all there is
    return int(ours.steps[0]) == int(theirs.steps[0])


def _parting(
    run_steps: np.ndarray,
    run_values: np.ndarray,
    base_steps: np.ndarray,
    base_values: np.ndarray,
    band: float,
    worse: bool,
) -> int | None:
    """`run_steps` value of the first sustained departure, compared on a shared grid in log space."""
    end = min(run_steps[-1], base_steps[-1])
    start = max(run_steps[0], base_steps[0])
    if end <= start:
        return None
    grid = np.unique(np.linspace(start, end, GRID_POINTS).round().astype(np.int64))
    with np.errstate(divide="ignore", invalid="ignore"):
        ours = np.interp(grid, run_steps, _log(run_values))
        theirs = np.interp(grid, base_steps, _log(base_values))
    gap = ours - theirs if worse else theirs - ours
    beyond = gap > band
    needed = max(MIN_PARTED_POINTS, int(PARTED_SHARE * len(grid)))
    run_length = 0
    for i, out in enumerate(beyond):
        run_length = run_length + 1 if out else 0
        if run_length >= needed:
            first = grid[i - needed + 1]
            return int(run_steps[np.searchsorted(run_steps, first)]) if first <= run_steps[-1] else int(first)
    return None


def _log(values: np.ndarray) -> np.ndarray:
    """Log of a loss; NaN/Inf as a huge loss (a run gone NaN is beyond any band), non-positive as tiny."""
    finite = np.where(np.isfinite(values), values, 1e30)
    return np.log(np.maximum(finite, 1e-12))
