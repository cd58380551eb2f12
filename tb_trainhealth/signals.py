"""RunSignals: everything the rules may look at for one run, independent of its source.

Series names are those of `contract.series`; events and run info are the contract's typed
payloads, parsed once by whoever built the RunSignals (a reader, or the callback's copy).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import Any, TypeVar

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import Event, FitEndEvent
from tb_trainhealth.contract.run_info import LayerInfo, RunInfo
from tb_trainhealth.contract.run_settings import RunSettings

E = TypeVar("E", bound=Event)


@dataclasses.dataclass
class Series:
    """A scalar series; steps ascending. Values may hold NaN/Inf: rules must cope."""

    steps: np.ndarray
    values: np.ndarray

    @classmethod
    def of(cls, steps: Any, values: Any) -> Series:
        steps = np.asarray(steps, dtype=np.int64).reshape(-1)
        values = np.asarray(values, dtype=np.float64).reshape(-1)
        if steps.shape != values.shape:
            raise ValueError(f"steps {steps.shape} and values {values.shape} differ in length")
        order = np.argsort(steps, kind="stable")
        return cls(steps[order], values[order])

    def __len__(self) -> int:
        return int(self.steps.shape[0])


@dataclasses.dataclass
class LayerSeries:
    """One value per layer per recorded step: values has shape (len(steps), len(layers))."""

    steps: np.ndarray
    values: np.ndarray

    @classmethod
    def of(cls, steps: Any, rows: Any, num_layers: int) -> LayerSeries:
        steps = np.asarray(steps, dtype=np.int64).reshape(-1)
        values = np.asarray(rows, dtype=np.float64).reshape(len(steps), num_layers)
        order = np.argsort(steps, kind="stable")
        return cls(steps[order], values[order])

    def __len__(self) -> int:
        return int(self.steps.shape[0])


@dataclasses.dataclass
class RunSignals:
    """What is known about one run. Missing series simply are not in the dicts."""

    run: str
    series: dict[str, Series] = dataclasses.field(default_factory=dict)
    layer_series: dict[str, LayerSeries] = dataclasses.field(default_factory=dict)
    layers: list[LayerInfo] = dataclasses.field(default_factory=list)
    events: list[Event] = dataclasses.field(default_factory=list)
    info: RunInfo = dataclasses.field(default_factory=RunInfo)
    settings: RunSettings = dataclasses.field(default_factory=RunSettings)  # what `compare` diffs
    # True when the run was written by HealthCallback (not only loss curves).
    has_health_data: bool = False
    errors: list[str] = dataclasses.field(default_factory=list)
    # What every step in this run counts: batch steps, or (runs with per-epoch data only)
    # epochs numbered from 1. Rules say where with `at()`, never "step" by hand.
    axis: str = sig.STEP_AXIS
    # Wall time (Unix seconds) of the run's newest data, and the wall-clock time of the
    # diagnosis; None when unknown (the online engine, synthetic runs). Rules that judge
    # silence (`ended_abruptly`) need both.
    last_write: float | None = None
    now: float | None = None

    def __post_init__(self) -> None:
        for event in self.events:
            if not isinstance(event, Event):  # (readers parse first: contract.events.parse_event)
                raise TypeError(f"RunSignals.events holds a {type(event).__name__}, not an Event")

    def at(self, position: int) -> str:
        """A position on this run's axis as users read it: "step 399" or "epoch 9"."""
        return f"{self.axis} {position}"

    @property
    def last_position(self) -> int | None:
        """The furthest step (or epoch, see `axis`) any series or event of the run reached."""
        ends = [int(s.steps[-1]) for s in (*self.series.values(), *self.layer_series.values()) if len(s)]
        return max(ends + [e.step for e in self.events], default=None)

    def get(self, name: str) -> Series | None:
        series = self.series.get(name)
        return series if series is not None and len(series) else None

    def events_of(self, kind: type[E]) -> list[E]:
        """The events of one kind, in log order."""
        return [event for event in self.events if isinstance(event, kind)]

    def stopped_by(self, callback: str) -> FitEndEvent | None:
        """How the last fit ended, when `callback` (e.g. "EarlyStopping") stopped it."""
        ends = self.events_of(FitEndEvent)
        return ends[-1] if ends and callback in ends[-1].stopped_by else None

    def first_of_each_check(self, kind: type[E], checks: Collection[Any]) -> list[E]:
        """The first event of `kind` for each check in `checks`, in log order (a fit repeated
        on the same run lints again: one finding per check is enough)."""
        seen: set[Any] = set()
        found = []
        for event in self.events_of(kind):
            check = event.check  # type: ignore[attr-defined]
            if check in checks and check not in seen:
                seen.add(check)
                found.append(event)
        return found

    def before(self, step: int) -> RunSignals:
        """A copy with every series cut to the steps before `step`. Events are kept (what
        happened at train start, crashes, the NaN itself), except measurements (activation
        probes), which are cut like series."""
        return dataclasses.replace(
            self,
            events=[e for e in self.events if not e.measurement or e.step < step],
            series={k: Series(v.steps[v.steps < step], v.values[v.steps < step]) for k, v in self.series.items()},
            layer_series={
                k: LayerSeries(v.steps[v.steps < step], v.values[v.steps < step]) for k, v in self.layer_series.items()
            },
        )
