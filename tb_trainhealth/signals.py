"""RunSignals: everything the rules may look at for one run, independent of its source."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

# Canonical series names the rules read. Readers map tags onto these.
LOSS = "loss"  # training loss, one point per step (or per epoch when that is all there is)
BATCH_LOSS = "batch_loss"  # Keras' running mean over the epoch so far: saw-toothed
EPOCH_LOSS = "epoch_loss"
EPOCH_VAL_LOSS = "epoch_val_loss"
EPOCH_ACCURACY = "epoch_accuracy"
EPOCH_VAL_ACCURACY = "epoch_val_accuracy"
GRAD_NORM = "grad_norm"
LEARNING_RATE = "learning_rate"
STEP_TIME_MS = "step_time_ms"
INPUT_WAIT_MS = "input_wait_ms"
NONFINITE_COUNT = "nonfinite_count"
LOSS_SCALE = "loss_scale"  # LossScaleOptimizer's dynamic scale, where it changes
HOST_MEMORY_MB = "host_memory_mb"
DEVICE_MEMORY_MB = "device_memory_mb"
LAYER_GRAD_NORM = "layer_grad_norm"
LAYER_WEIGHT_NORM = "layer_weight_norm"
LAYER_UPDATE_RATIO = "layer_update_ratio"
LAYER_GRAD_NONFINITE = "layer_grad_nonfinite"  # NaN/Inf gradient elements per layer, steps with hits only


# Events that sample the state of training (like a series point), not one-off records.
MEASUREMENT_EVENTS = ("activations",)


def event_step(event: dict[str, Any]) -> int | None:
    """An event's step, when it has a valid one (events come from files: anything goes)."""
    step = event.get("step")
    return step if isinstance(step, int) and not isinstance(step, bool) else None


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
class Layer:
    name: str
    num_params: int


@dataclasses.dataclass
class RunSignals:
    """What is known about one run. Missing series simply are not in the dicts."""

    run: str
    series: dict[str, Series] = dataclasses.field(default_factory=dict)
    layer_series: dict[str, LayerSeries] = dataclasses.field(default_factory=dict)
    layers: list[Layer] = dataclasses.field(default_factory=list)
    events: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    # True when the run was written by HealthCallback (not only loss curves).
    has_health_data: bool = False
    errors: list[str] = dataclasses.field(default_factory=list)

    def get(self, name: str) -> Series | None:
        series = self.series.get(name)
        return series if series is not None and len(series) else None

    def first_of_each_check(self, kind: str, checks: Any) -> list[dict[str, Any]]:
        """The first event of `kind` for each check name in `checks`, in log order (a fit
        repeated on the same run lints again: one finding per check is enough)."""
        seen: set[str] = set()
        found = []
        for event in self.events:
            check = event.get("check")
            if event.get("kind") == kind and isinstance(check, str) and check in checks and check not in seen:
                seen.add(check)
                found.append(event)
        return found

    def before(self, step: int) -> RunSignals:
        """A copy with every series cut to the steps before `step`. Events are kept (what
        happened at train start, crashes, the NaN itself), except periodic measurements
        (MEASUREMENT_EVENTS), which are cut like series."""
        return dataclasses.replace(
            self,
            events=[
                e
                for e in self.events
                if e.get("kind") not in MEASUREMENT_EVENTS or not isinstance(e.get("step"), int) or e["step"] < step
            ],
            series={k: Series(v.steps[v.steps < step], v.values[v.steps < step]) for k, v in self.series.items()},
            layer_series={
                k: LayerSeries(v.steps[v.steps < step], v.values[v.steps < step]) for k, v in self.layer_series.items()
            },
        )
