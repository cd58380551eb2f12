"""One x axis per run: Keras' per-epoch scalars placed on the batch steps wherever those exist.

Keras' TensorBoard callback writes `epoch_loss` at the epoch index and `batch_loss` at the
batch step, so "step 8" in one run could mean batch 8 or epoch 9, and a NaN seen first in
the epoch loss would cut every batch series at step 8. Each epoch point is put at the last
batch step written at or before it (by wall time: one process, one clock). A run with no
batch-level data gets the epoch axis, numbered from 1 as Keras prints "Epoch 9/20".
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.signals import RunSignals, Series


def place_epoch_series(
    run: RunSignals, epoch_walls: dict[str, np.ndarray], reference: tuple[np.ndarray, np.ndarray] | None
) -> None:
    """Moves the epoch-indexed series named in `epoch_walls` (their points' wall times, in
    step order) onto `reference`'s batch steps (steps, wall times), or, without a
    reference, numbers the run's axis in epochs."""
    if not epoch_walls:
        return
    if reference is None:
        run.axis = sig.EPOCH_AXIS
        for name in epoch_walls:
            epochs = run.series[name]
            run.series[name] = Series(epochs.steps + 1, epochs.values)
        return
    ref_steps, ref_walls = reference
    order = np.argsort(ref_walls, kind="stable")
    walls = ref_walls[order]
    furthest = np.maximum.accumulate(ref_steps[order])  # a resumed fit may restart its steps
    for name, epoch_wall in epoch_walls.items():
        index = np.searchsorted(walls, epoch_wall, side="right") - 1
        steps = furthest[np.clip(index, 0, None)]
        run.series[name] = Series.of(steps, run.series[name].values)
