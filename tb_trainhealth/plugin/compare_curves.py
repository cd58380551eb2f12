"""What the Health tab draws beside a comparison: both runs' curves on one x axis, and each layer's
gradient norm in the run against the baseline's.

The curves share the runs' batch steps only where a step means the same in both (same axis, same
steps per epoch, as `compare.curves.parting_step` compares them); otherwise an epoch of one run
is put beside the same epoch of the other, numbered from 1, or a larger batch would look like a
slower run.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from tb_trainhealth.compare.baseline_pick import same_architecture
from tb_trainhealth.compare.curves import compares_per_step
from tb_trainhealth.contract import series as sig
from tb_trainhealth.signals import LayerSeries, RunSignals, Series

VALIDATION = (sig.EPOCH_VAL_LOSS, sig.EPOCH_VAL_ACCURACY)


@dataclasses.dataclass
class Overlay:
    x: str  # what x counts: "step" (or "epoch" for runs on the epoch axis), or "epoch" by epoch number
    loss: str  # the training loss drawn: sig.LOSS (per step) or sig.EPOCH_LOSS
    run: dict[str, Series]
    baseline: dict[str, Series]
    parted_at: int | None  # the parting step on x


def overlay(run: RunSignals, baseline: RunSignals, parted_at_step: int | None) -> Overlay:
    """Both runs' training loss (per step where that compares, else per epoch) and validation
    curves, on one x; the parting step (on the run's axis) moved onto that x."""
    if compares_per_step(run, baseline):
        names = (sig.LOSS, *VALIDATION)
        return Overlay(run.axis, sig.LOSS, _curves(run, names), _curves(baseline, names), parted_at_step)
    names = (sig.EPOCH_LOSS, *VALIDATION)
    ours, theirs = _by_epoch(run, names), _by_epoch(baseline, names)
    return Overlay(sig.EPOCH_AXIS, sig.EPOCH_LOSS, ours, theirs, _epoch_of(run, parted_at_step))


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
