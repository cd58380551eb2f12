"""Turns the step probe's rows into records: series, per-layer vectors and NaN/Inf events.

Rows are read back from the probe's ring buffer a window at a time (`StepProbe`); the host
side of each window is here: which columns are written on every step and which only where
they change, the first non-finite values (one event per loss / gradients / weights), the
update ratios on sampled steps, and where the replayed first NaN came from.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.callback.record.recording import Recording
from tb_trainhealth.callback.step.row_layout import (
    COL_GRAD_NONFINITE,
    COL_GRAD_NORM,
    COL_LOSS,
    COL_LOSS_SCALE,
    COL_LR,
    COL_NONFINITE_REPLICAS,
    Rows,
)
from tb_trainhealth.callback.step.step_probe import StepProbe
from tb_trainhealth.contract import tags
from tb_trainhealth.contract.events import NanOriginEvent, NonfiniteEvent
from tb_trainhealth.contract.payload import parse
from tb_trainhealth.contract.vocab import NonfiniteWhere


class RowRecorder:
    """One per run; `record` a window of one fit's rows with the host-side readings for the same steps."""

    def __init__(self, recording: Recording):
        self._recording = recording
        self._nonfinite_seen: set[str] = set()  # once per run: the first is what matters

    def record(
        self, probe: StepProbe, rows: Rows, base_step: int, step_ms: np.ndarray, wait_ms: np.ndarray, memory: tuple
    ) -> None:
        """memory: (host MiB, device MiB) per row, NaN where not read."""
        dense = {tags.TAG_GRAD_NORM: rows.column(COL_GRAD_NORM)}
        if probe.loss_captured:
            dense[tags.TAG_LOSS] = rows.column(COL_LOSS)
        counts = _nonfinite_counts(probe, rows)
        loss_scale = rows.column(COL_LOSS_SCALE) if probe.uses_loss_scale else np.full(len(rows.steps), np.nan)
        sparse = {
            tags.TAG_LEARNING_RATE: _where_it_changes(rows.column(COL_LR)),
            tags.TAG_NONFINITE_COUNT: np.where(counts > 0, counts, np.nan),
            tags.TAG_LOSS_SCALE: _where_it_changes(loss_scale),
            tags.TAG_STEP_TIME_MS: step_ms,
            tags.TAG_INPUT_WAIT_MS: wait_ms,
            tags.TAG_HOST_MEMORY_MB: memory[0],
            tags.TAG_DEVICE_MEMORY_MB: memory[1],
        }
        hit_rows = rows.column(COL_GRAD_NONFINITE) > 0
        layer_vectors = {
            tags.TAG_LAYER_UPDATE_RATIO: _update_ratios(rows),
            tags.TAG_LAYER_GRAD_NONFINITE: (rows.layer_grad_nonfinite, hit_rows),
        }
        self._recording.rows(rows, dense, sparse, layer_vectors)
        self._record_nonfinite(probe, rows)
        masked = False
        for origin in probe.nan_origins:  # replayed inside the failing step
            step = base_step + origin.pop("row") + 1
            if _trained_on_finite_values(rows, step):
                masked = True
            else:
                self._recording.event(parse(NanOriginEvent, {**origin, "step": step}))
        if masked:
            probe.rearm_nan_replay()
        probe.nan_origins.clear()

    def _record_nonfinite(self, probe: StepProbe, rows: Rows) -> None:
        names = probe.layout.names
        nonfinite_layers = rows.layer_grad_nonfinite > 0
        hits = {
            NonfiniteWhere.LOSS: ~np.isfinite(rows.column(COL_LOSS)) if probe.loss_captured else None,
            NonfiniteWhere.GRADIENTS: ~np.isfinite(rows.column(COL_GRAD_NORM)) | nonfinite_layers.any(axis=1),
            NonfiniteWhere.WEIGHTS: ~np.isfinite(rows.layer_weight_norm).all(axis=1),
        }
        for where, bad in hits.items():
            if bad is None or not bad.any() or where in self._nonfinite_seen:
                continue
            self._nonfinite_seen.add(where)
            index = int(np.argmax(bad))
            layers = (
                ~np.isfinite(rows.layer_weight_norm[index])
                if where == NonfiniteWhere.WEIGHTS
                else nonfinite_layers[index]
            )
            replicas = ()
            mask = int(rows.column(COL_NONFINITE_REPLICAS)[index])
            if where == NonfiniteWhere.GRADIENTS and mask:
                replicas = tuple(r for r in range(probe.replicas) if mask >> r & 1)
            self._recording.event(
                NonfiniteEvent(
                    step=int(rows.steps[index]),
                    where=where,
                    layers=tuple(names[i] for i in np.flatnonzero(layers)),
                    count=float(rows.layer_grad_nonfinite[index].sum()) if where == NonfiniteWhere.GRADIENTS else None,
                    replicas=replicas,
                )
            )


def _trained_on_finite_values(rows: Rows, step: int) -> bool:
    """Whether the step's loss and gradients stayed finite: a batch holding NaN/Inf that the model
    masks on the way in (`tf.where(tf.math.is_finite(x), x, 0.0)`) is not where a NaN came from."""
    at = np.flatnonzero(rows.steps == step)
    return bool(at.size) and bool(np.isfinite(rows.values[at[0], [COL_LOSS, COL_GRAD_NORM]]).all())


def _update_ratios(rows: Rows) -> tuple[np.ndarray, np.ndarray]:
    """(||dw|| / ||w|| per layer, the sampled rows): update norms are NaN on the other rows."""
    sampled = np.isfinite(rows.layer_update_norm).any(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return rows.layer_update_norm / rows.layer_weight_norm, sampled


def _nonfinite_counts(probe: StepProbe, rows: Rows) -> np.ndarray:
    """Layers with non-finite gradients, plus one for a non-finite loss and per layer with non-finite weights."""
    counts = rows.column(COL_GRAD_NONFINITE) + (~np.isfinite(rows.layer_weight_norm)).sum(axis=1)
    if probe.loss_captured:
        counts = counts + ~np.isfinite(rows.column(COL_LOSS))
    return counts


def _where_it_changes(values: np.ndarray) -> np.ndarray:
    """NaN except where the value changes (and on the window's first row): sparse records."""
    values = values.copy()
    values[1:][values[1:] == values[:-1]] = np.nan
    return values
