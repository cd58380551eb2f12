"""When the step probe's rows are read back, and where they go once read.

A read-back is one device-to-host copy of the ring buffer (`RowBuffer`) plus one background
write, so it is done once per READ_SECONDS of training, or sooner when MAX_UNREAD steps wait
(the ring holds twice as many), and a live reader lags by about a second. A window costs ~1 ms
on the training thread and about as much on the writer thread, mostly per window, not per row:
every 128 steps of a 1 ms step that was ~3% of the time (`bench/overhead.py --mlp --tf-keras`);
every 512, under 1%. The rows are joined with what the host measured for
the same steps (step time and memory from `StepClock`, input wait from the input probe).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import numpy as np

from tb_trainhealth.callback.record.row_recorder import RowRecorder
from tb_trainhealth.callback.step.input_probe import InputProbe
from tb_trainhealth.callback.step.step_clock import StepClock, per_step
from tb_trainhealth.callback.step.step_probe import StepProbe

READ_SECONDS = 1.0
MAX_UNREAD = 512
# tf_keras times the batch hooks of a fit's first 6 batches and warns when they take longer
# than the batches: there the first read-back (its tracing) waits for that window to close.
TF_KERAS_TIMED_CALLS = 7


def ring_capacity(steps_per_call: int) -> int:
    """Rows a ring buffer read back here must hold: what may wait for a read-back, twice over."""
    return 2 * (MAX_UNREAD + steps_per_call)


class ReadBack:
    """One per fit: counts the host calls since the last read-back and does the read-back."""

    def __init__(self, clock: StepClock, input_probe: InputProbe, legacy: bool):
        self._clock, self._input = clock, input_probe
        self._calls_since_read = 0
        self._last_read = time.perf_counter()
        self._no_rows_yet = True
        self._calls_before_first_read = TF_KERAS_TIMED_CALLS if legacy else 0
        self._said_lost_rows = False

    def call_began(self, probe: StepProbe | None) -> bool:
        """A host call (of steps_per_call steps) begins; whether rows are due now."""
        self._calls_since_read += 1
        return self.due(probe)

    def due(self, probe: StepProbe | None) -> bool:
        """Rows are due (see READ_SECONDS); or the first NaN was just replayed: its finding
        (and `stop_on`) must not wait; or none were read in this fit yet: the first read-back
        traces what it runs (the row writer once per process), best paid along with the first
        step's own tracing (on tf_keras after its hook timing: TF_KERAS_TIMED_CALLS)."""
        unread = self._calls_since_read * self._clock.steps_per_call
        nan_replayed = probe is not None and bool(probe.nan_origins)
        if self._no_rows_yet and self._calls_since_read < self._calls_before_first_read:
            return unread >= MAX_UNREAD or nan_replayed
        urgent = probe is not None and (self._no_rows_yet or nan_replayed)
        return urgent or unread >= MAX_UNREAD or time.perf_counter() - self._last_read >= READ_SECONDS

    def read(
        self,
        probe: StepProbe | None,
        recorder: RowRecorder | None,
        base_step: int,
        on_step_times: Callable[[np.ndarray], None],
    ) -> int | None:
        """Read the new rows and record them with the host's measurements; the newest step, or
        None when there was nothing to read."""
        self._last_read, self._calls_since_read = time.perf_counter(), 0
        if probe is None or recorder is None:
            return None
        rows = probe.read_rows(base_step)
        if probe.ring.lost_rows and not self._said_lost_rows:
            self._said_lost_rows = True
            print(
                f"tb-trainhealth: {probe.ring.lost_rows} steps overflowed the read-back buffer and were not recorded.",
                file=sys.stderr,
            )
        if rows is None:
            return None
        self._no_rows_yet = False
        probe.weights.fill(rows, base_step)
        step_ms, host_mb, device_mb = self._clock.take(len(rows.steps))
        on_step_times(step_ms)
        wait_ms = per_step(np.asarray(self._input.take_waits(), np.float64), len(rows.steps))
        recorder.record(probe, rows, base_step, step_ms, wait_ms, (host_mb, device_mb))
        return int(rows.steps[-1])
