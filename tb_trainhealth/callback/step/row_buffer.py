"""The step probe's ring buffer: rows written inside the compiled step, read back on the host.

One row per optimizer step goes into a `capacity`-row variable at `count % capacity`; the
callback reads what is new every few steps, so the step holds no summary op and makes no host
call. The buffer and its count go on across the fits of one model (the instrumented train
function keeps writing the same variables); rows are numbered from the start of the current fit.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tb_trainhealth.callback.probe_variable import probe_variable
from tb_trainhealth.callback.step.row_layout import Rows


class RowBuffer:
    """`capacity` rows of `width` values; `lost_rows`: rows overwritten before they were read."""

    def __init__(self, capacity: int, width: int):
        self.capacity, self.width = capacity, width
        self.values = probe_variable(tf.zeros([capacity, width]), "trainhealth_rows")
        self.count = probe_variable(0, "trainhealth_count", tf.int64)  # rows ever written
        self._fit_start = 0
        self._read = 0  # rows consumed so far
        self.lost_rows = 0

    def begin_fit(self) -> int:
        """A fit starts: its rows are numbered from here. Returns the rows written before it."""
        start = int(self.count.numpy())
        self._fit_start, self._read, self.lost_rows = start, start, 0
        return start

    # -- inside the step ----------------------------------------------------------
    def write(self, row: tf.Tensor) -> None:
        """`row`: `width` values. Few ops (each costs ~5 us of a CPU step): a read of the count,
        a modulo, one scatter of the row into its slot, one increment."""
        slot = tf.math.floormod(self.count, self.capacity)
        if isinstance(self.values, tf.distribute.DistributedValues):  # (tf_keras: see `probe_variable`)
            update = tf.tensor_scatter_nd_update(
                self.values, tf.reshape(slot, [1, 1]), tf.reshape(row, [1, self.width])
            )
            self.values.assign(update)  # this replica's copy
        else:
            self.values.scatter_update(tf.IndexedSlices(row, slot))
        self.count.assign_add(1)

    # -- on the host --------------------------------------------------------------
    def rows_written(self) -> int:
        """Rows (steps) written in this fit."""
        return int(self.count.numpy()) - self._fit_start

    def read_new(self, base_step: int, num_layers: int) -> Rows | None:
        """Rows written since the last read; step = base_step + row number in this fit (1-based)."""
        count = int(self.count.numpy())
        if count <= self._read:
            return None
        values = self.values.numpy()
        first = max(self._read, count - self.capacity)
        self.lost_rows += first - self._read
        numbers = np.arange(first, count)
        self._read = count
        return Rows(base_step + numbers - self._fit_start + 1, values[numbers % self.capacity], num_layers)
