"""What the runs' health signals say changed, beside their settings: a layer whose gradients or
updates moved by orders of magnitude, units that died. A bug the settings cannot see (a line of
preprocessing, a custom layer) still shows here, with the layer it hit.

Thresholds are set against seed twins (`python bench/compare_real_bugs.py --twin-seed 1` and `2`:
each real-bug zoo fix against itself with another seed, 84 pairs): per-layer median gradient
norms differed by at most 1.22 decades (17x, tpb_so39939881, whose data generator draws its slope
from the seed; 90% of pairs under 0.43), update ratios by at most 0.90, dead-unit shares by at most
0.38. The same measures between the buggy programs and their fixes: gradients 2+ decades apart in
13 of 36, dead layers (>=90%) in 3; any change in 19 of 42. Held out: the seed-3 twins
(`--twin-seed 3`), which these were not set on, moved none (0 of 42).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Iterator

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import ActivationsEvent
from tb_trainhealth.signals import RunSignals

# Orders of magnitude between two runs' per-layer medians that seeds never showed (see above).
GRADIENT_DECADES = 2.0
UPDATE_DECADES = 1.5
# A layer counts as died when this share of its units is dead in the run and at most BASELINE_ALIVE
# of them in the baseline.
DEAD_SHARE = 0.9
BASELINE_ALIVE = 0.5
# Ranked by how far each moved: decades for ratios; a layer that died weighs as this many decades.
DEAD_WEIGHT = 3.0

_RATIOS = (
    (sig.LAYER_GRAD_NORM, "gradient norm", GRADIENT_DECADES),
    (sig.LAYER_UPDATE_RATIO, "update ratio (update / weight)", UPDATE_DECADES),
)


@dataclasses.dataclass(frozen=True)
class SignalChange:
    """One health signal of one layer, in the baseline and in the run (medians over each run)."""

    signal: str
    layer: str
    baseline: float
    run: float

    @property
    def weight(self) -> float:
        if self.signal == "dead units":
            return DEAD_WEIGHT * (self.run - self.baseline)
        return abs(math.log10(self.run / self.baseline))

    def text(self) -> str:
        if self.signal == "dead units":
            return f"{self.layer}: {self.run:.0%} of its units dead (baseline {self.baseline:.0%})"
        ratio = self.run / self.baseline
        how = f"{ratio:.3g}x larger" if ratio > 1 else f"{1 / ratio:.3g}x smaller"
        return f"{self.layer}: {self.signal} {how} than the baseline's ({self.baseline:.3g} -> {self.run:.3g})"

    def to_dict(self) -> dict[str, object]:
        """With `text`, the sentence the CLI prints: the tab shows it as sent instead of spelling it again."""
        return {
            "signal": self.signal,
            "layer": self.layer,
            "baseline": self.baseline,
            "run": self.run,
            "text": self.text(),
        }


def signal_changes(run: RunSignals, baseline: RunSignals) -> list[SignalChange]:
    """The health signals that moved beyond what seeds move them, largest first. Layers are matched
    by position where both models have as many (two builds of one model number them differently),
    else by name."""
    changes = [*_ratio_changes(run, baseline), *_dead_layers(run, baseline)]
    return sorted(changes, key=lambda change: -change.weight)


def _matched(ours: list[str], theirs: list[str]) -> Iterator[tuple[int, int]]:
    if len(ours) == len(theirs):
        yield from ((i, i) for i in range(len(ours)))
        return
    index = {name: i for i, name in enumerate(theirs)}
    yield from ((i, index[name]) for i, name in enumerate(ours) if name in index)


def _medians(signals: RunSignals, name: str) -> np.ndarray | None:
    series = signals.layer_series.get(name)
    if series is None or not len(series) or series.values.shape[1] != len(signals.layers):
        return None
    values = np.where(np.isfinite(series.values) & (series.values > 0), series.values, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a layer never measured: all NaN, median NaN
        return np.nanmedian(values, axis=0)


def _ratio_changes(run: RunSignals, baseline: RunSignals) -> Iterator[SignalChange]:
    ours, theirs = [layer.name for layer in run.layers], [layer.name for layer in baseline.layers]
    for name, label, decades in _RATIOS:
        a, b = _medians(run, name), _medians(baseline, name)
        if a is None or b is None:
            continue
        for i, j in _matched(ours, theirs):
            if np.isfinite(a[i]) and np.isfinite(b[j]) and abs(math.log10(a[i] / b[j])) >= decades:
                yield SignalChange(label, ours[i], float(b[j]), float(a[i]))


def _dead_layers(run: RunSignals, baseline: RunSignals) -> Iterator[SignalChange]:
    ours, theirs = _last_dead(run), _last_dead(baseline)
    layers, shares, was = list(ours), list(ours.values()), list(theirs.values())
    for i, j in _matched(layers, list(theirs)):
        if shares[i] is not None and was[j] is not None and shares[i] >= DEAD_SHARE and was[j] <= BASELINE_ALIVE:
            yield SignalChange("dead units", layers[i], was[j], shares[i])


def _last_dead(signals: RunSignals) -> dict[str, float | None]:
    """Each layer's dead-unit share at the last activations check (None: not measured)."""
    checks = signals.events_of(ActivationsEvent)
    return {name: layer.dead for name, layer in checks[-1].layers.items()} if checks else {}
