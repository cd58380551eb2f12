"""In-memory copy of what the callback wrote, bounded, for the online engine.

Holds the same canonical series the readers build from event files, so the
callback runs the very same rules. Long runs are decimated (every other point
dropped, newest kept) to stay under `max_points` per series: the rules are built
to give the same answers on downsampled series.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_trainhealth.signals import Layer, LayerSeries, RunSignals, Series


def _decimate(steps: np.ndarray, values: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    while len(steps) > max_points:
        keep = np.zeros(len(steps), dtype=bool)
        keep[::-2] = True  # every other point, always the newest
        steps, values = steps[keep], values[keep]
    return steps, values


class SignalRecorder:
    def __init__(self, run: str, layers: list[Layer], info: dict[str, Any], max_points: int = 4000):
        self._run = run
        self._layers = layers
        self._info = info
        self._max_points = max_points
        self._series: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._layer_series: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._events: list[dict[str, Any]] = []

    def set_layers(self, layers: list[Layer], info: dict[str, Any]) -> None:
        """A new fit may train another set of layers (unfrozen, rebuilt): restart the per-layer series."""
        if [layer.name for layer in layers] != [layer.name for layer in self._layers]:
            self._layer_series.clear()
        self._layers, self._info = layers, info

    def _append(self, store: dict, name: str, steps: np.ndarray, values: np.ndarray) -> None:
        old_steps, old_values = store.get(name, (steps[:0], values[:0]))
        merged = (np.concatenate([old_steps, steps]), np.concatenate([old_values, values]))
        store[name] = _decimate(*merged, self._max_points)

    def add_series(self, name: str, steps: np.ndarray, values: np.ndarray) -> None:
        self._append(self._series, name, np.asarray(steps, np.int64), np.asarray(values, np.float64))

    def add_layer_series(self, name: str, steps: np.ndarray, rows: np.ndarray) -> None:
        self._append(self._layer_series, name, np.asarray(steps, np.int64), np.asarray(rows, np.float64))

    def add_event(self, event: dict[str, Any]) -> None:
        self._events.append(event)

    def signals(self) -> RunSignals:
        return RunSignals(
            run=self._run,
            series={name: Series(s, v) for name, (s, v) in self._series.items()},
            layer_series={name: LayerSeries(s, v) for name, (s, v) in self._layer_series.items()},
            layers=list(self._layers),
            events=list(self._events),
            info=dict(self._info),
            has_health_data=True,
        )
