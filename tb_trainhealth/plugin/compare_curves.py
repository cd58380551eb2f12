"""What the Health tab draws beside a comparison: both runs' curves on one x, with the baseline's
noise band around each of its curves, and each layer's gradient norm in the run against the baseline's.

The curves share the runs' batch steps only where a step means the same in both (same axis, same
steps per epoch, as `compare.curves.parting_step` compares them); otherwise an epoch of one run
is put beside the same epoch of the other, numbered from 1, or a larger batch would look like a
slower run. A per-step training loss is drawn smoothed, as it is compared: the run parted where its
line leaves the band drawn around the baseline's, at the parting line.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from tb_trainhealth.compare.baseline_pick import same_architecture
from tb_trainhealth.compare.comparison import Comparison
from tb_trainhealth.compare.curves import METRICS, compares_per_step, smoothed
from tb_trainhealth.compare.noise import CURVE_NOISE, Noise
from tb_trainhealth.contract import series as sig
from tb_trainhealth.signals import LayerSeries, RunSignals, Series

VALIDATION = (sig.EPOCH_VAL_LOSS, sig.EPOCH_VAL_ACCURACY)
# The series of each metric a verdict is judged on, by its Keras name.
METRIC_SERIES = {name: series for series, name, _higher in METRICS}


@dataclasses.dataclass
class Band:
    """Where the run would be were it the baseline again: the baseline's curve widened by the noise."""

    steps: np.ndarray
    low: np.ndarray
    high: np.ndarray
    what: str  # what the band is, in words (shown under the chart)


@dataclasses.dataclass
class Overlay:
    x: str  # what x counts: "step" (or "epoch" for runs on the epoch axis), or "epoch" by epoch number
    loss: str  # the training loss drawn: sig.LOSS (per step, smoothed) or sig.EPOCH_LOSS
    run: dict[str, Series]
    baseline: dict[str, Series]
    parted_at: int | None  # the parting step on x
    bands: dict[str, Band]  # by series: the baseline's noise band
    deciding: str | None  # the series of the metric the verdict was judged on, where both runs have it

    @property
    def evidence(self) -> list[str]:
        """What the worse_than_baseline finding's card draws: the training loss and the deciding metric."""
        return list(dict.fromkeys(name for name in (self.loss, self.deciding) if name is not None))

    @property
    def panels(self) -> list[str]:
        """What the comparison draws, one panel each: the evidence first, then the validation curves."""
        names = [*self.evidence, *VALIDATION]
        return [name for name in dict.fromkeys(names) if name in self.run or name in self.baseline]


def overlay(run: RunSignals, baseline: RunSignals, comparison: Comparison) -> Overlay:
    """Both runs' training loss (per step where that compares, else per epoch), validation curves
    and deciding metric on one x, the baseline's noise band around each, and the parting step (on
    the run's axis) moved onto that x."""
    deciding = _deciding_series(comparison.deciding)
    training = deciding in (sig.LOSS, sig.EPOCH_LOSS)  # the training loss decided: its own panel
    deciding = None if training else deciding
    parted = comparison.parted_at_step
    if compares_per_step(run, baseline):
        names = (*VALIDATION, *([deciding] if deciding else []))
        ours, theirs = _curves(run, names), _curves(baseline, names)
        ours[sig.LOSS], theirs[sig.LOSS] = smoothed(run.series[sig.LOSS]), smoothed(baseline.series[sig.LOSS])
        x, loss = run.axis, sig.LOSS
    else:
        names = (sig.EPOCH_LOSS, *VALIDATION, *([deciding] if deciding else []))
        ours, theirs = _by_epoch(run, names), _by_epoch(baseline, names)
        x, loss, parted = sig.EPOCH_AXIS, sig.EPOCH_LOSS, _epoch_of(run, parted)
    deciding = loss if training else deciding
    bands = {name: _band(name, series, loss, comparison.noise) for name, series in theirs.items()}
    drawn = deciding if deciding in ours and deciding in theirs else None
    return Overlay(x, loss, ours, theirs, parted, bands, drawn)


def _deciding_series(metric: str | None) -> str | None:
    """The series of the deciding metric ("val_accuracy": epoch_val_accuracy); "loss" where no
    epochs were logged is the per-step loss."""
    return METRIC_SERIES.get(metric) if metric is not None else None


def _band(name: str, series: Series, loss: str, noise: Noise) -> Band:
    """The training loss: as far as seeds' curves land apart (CURVE_NOISE, what the parting step
    is judged on); an accuracy or a validation loss: the noise the verdict was judged against."""
    values = series.values.astype(np.float64)
    if name == loss:
        factor = math.exp(CURVE_NOISE)
        what = (
            f"within {factor:.3g}x of the baseline's training loss either way: as far as two seeds' curves land apart"
        )
        return Band(series.steps, values / factor, values * factor, what + "; the run parted where it left the band")
    if "accuracy" in name:
        what = f"within {noise.accuracy:.2g} of the baseline's: as far as {noise.source} land apart"
        return Band(series.steps, np.clip(values - noise.accuracy, 0, None), values + noise.accuracy, what)
    factor = math.exp(noise.loss)
    what = f"within {factor:.2g}x of the baseline's either way: as far as {noise.source} land apart"
    return Band(series.steps, values / factor, values * factor, what)


def _curves(signals: RunSignals, names: tuple[str, ...]) -> dict[str, Series]:
    return {name: series for name in names if (series := signals.get(name)) is not None}


def _by_epoch(signals: RunSignals, names: tuple[str, ...]) -> dict[str, Series]:
    """Per-epoch series numbered 1, 2, ... (a run on the epoch axis already is)."""
    out = {}
    for name, series in _curves(signals, names).items():
        epochs = series.steps if signals.axis == sig.EPOCH_AXIS else np.arange(1, len(series) + 1)
        out[name] = Series(epochs, series.values)
    return out


def _epoch_of(run: RunSignals, step: int | None) -> int | None:
    """The epoch (from 1) that holds `step` of the run: the first whose end is at or after it."""
    if step is None or run.axis == sig.EPOCH_AXIS:
        return step
    epochs = run.get(sig.EPOCH_LOSS)
    if epochs is None:
        return None
    index = int(np.searchsorted(epochs.steps, step, side="left"))
    return min(index, len(epochs) - 1) + 1


def layer_grad_ratio(run: RunSignals, baseline: RunSignals) -> list[dict[str, Any]]:
    """Per layer of the run: the median gradient norm over the steps both runs recorded, the
    baseline's over the same steps, and their ratio (a learning rate 1000x smaller leaves the
    weights near their start: the gradients stay as large as the baseline's first ones)."""
    ours, theirs = run.layer_series.get(sig.LAYER_GRAD_NORM), baseline.layer_series.get(sig.LAYER_GRAD_NORM)
    shared = np.intersect1d(ours.steps, theirs.steps) if ours is not None and theirs is not None else np.array([])
    rows = []
    for index, match in enumerate(_matched_layers(run, baseline)):
        mine = _median(ours, index, shared)
        base = _median(theirs, match, shared) if match is not None else None
        ratio = mine / base if mine is not None and base is not None and base > 0 else None
        rows.append(
            {
                "layer": run.layers[index].name,
                "baseline_layer": baseline.layers[match].name if match is not None else None,
                "run": mine,
                "baseline": base,
                "ratio": ratio if ratio is not None and math.isfinite(ratio) else None,
            }
        )
    return rows


def _matched_layers(run: RunSignals, baseline: RunSignals) -> list[int | None]:
    """For each of the run's layers, the baseline's layer it is: by position in the same architecture
    (Keras numbers layers per process: "dense_4" is "dense" in a fresh one), else by name."""
    if same_architecture(run, baseline) and len(run.layers) == len(baseline.layers):
        return list(range(len(run.layers)))
    names = {layer.name: i for i, layer in enumerate(baseline.layers)}
    return [names.get(layer.name) for layer in run.layers]


def _median(series: LayerSeries | None, column: int, steps: np.ndarray) -> float | None:
    if series is None or not len(steps) or column >= series.values.shape[1]:
        return None
    values = series.values[np.isin(series.steps, steps), column]
    finite = values[np.isfinite(values)]
    return float(np.median(finite)) if len(finite) else None
