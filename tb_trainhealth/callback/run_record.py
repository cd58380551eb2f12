"""What a HealthCallback keeps across its fits: the run's record, where the run is, its watchdog
and its diagnoses.

A run outlives each fit (freeze / fit / unfreeze / compile / fit; `tb_trainhealth.fit`'s retries
after an OOM): one event file, steps that go on counting, one stall watchdog, and diagnoses that
also run between fits (an OOM recorded after its fit ended). Everything of one fit alone is the
`FitSession`'s.
"""

from __future__ import annotations

from typing import Any

from tb_trainhealth.callback.frameworks.which_keras import keras_of
from tb_trainhealth.callback.live_diagnosis import LiveDiagnosis
from tb_trainhealth.callback.multi_worker import worker_role
from tb_trainhealth.callback.probe_guard import ProbeGuard, disable_on_error, none_on_error
from tb_trainhealth.callback.record.recording import Recording
from tb_trainhealth.callback.record.row_recorder import RowRecorder
from tb_trainhealth.callback.watch.stall_watchdog import watchdog_for
from tb_trainhealth.contract.events import PartOffEvent
from tb_trainhealth.contract.vocab import Part


class RunRecord:
    """One per callback. `recording` is None until the first fit (or a crash before it) opens it."""

    def __init__(self, log_dir: str, guard: ProbeGuard, live: LiveDiagnosis, stall_after: float | None):
        self.log_dir = log_dir
        self.guard = guard
        self.live = live
        self.recording: Recording | None = None
        self.rows: RowRecorder | None = None
        self.step = 0  # the last step recorded (steps go on across fits)
        self.epoch = 0  # the last epoch begun
        self.retrying = False  # the next fit retries this one after an OOM (`tb_trainhealth.fit`)
        self._parts_off_early: list[PartOffEvent] = []  # went off before the event file was opened
        self.watch = watchdog_for(
            stall_after,
            recording=lambda: self.recording,
            step=lambda: self.step,
            log_dir=log_dir,
            on_error=lambda err: guard.disable(Part.WATCHDOG, err),
        )

    def opened(self, model: Any) -> Recording:
        """The run's Recording, made at the first call. Under a multi-worker strategy
        (`multi_worker`) the chief writes the run; the others keep theirs in memory (a crash only)."""
        if self.recording is None:
            role = worker_role(model) if model is not None else None
            chief = role is None or role.chief
            log_dir = self.log_dir if chief else role.own_log_dir(self.log_dir)
            self.recording = Recording(log_dir, on_disk=chief)
            for event in self._parts_off_early:
                self.recording.event(event)
            self._parts_off_early = []
            if role is not None:
                if self.live.stop_on is not None:
                    self.guard.off(Part.STOP_ON, "a multi-worker strategy: all workers must stop at the same step")
                self.live.on_worker(chief)
            self.rows = RowRecorder(self.recording)
        return self.recording

    def part_off(self, part: str, reason: str, error: bool, model: Any) -> None:
        """A part went off (`ProbeGuard`): the run says so from this step on, from any thread."""
        version = none_on_error(lambda: str(keras_of(model).__version__)) if model is not None else None
        event = PartOffEvent(self.step, str(part), reason, error, version)
        if self.recording is None:
            self._parts_off_early.append(event)
        else:
            self.recording.event(event)

    # -- diagnoses ----------------------------------------------------------------------
    def diagnosis_due(self) -> bool:
        return self.recording is not None and bool(
            self.guard.run(Part.DIAGNOSIS, self.live.due, self.recording, self.step)
        )

    def diagnose_if_due(self, model: Any) -> None:
        self.guard.run(Part.WATCHDOG, self.watch.catch_up)  # (not stalled: this thread is running)
        if self.recording is not None and self.guard.run(Part.DIAGNOSIS, self.live.maybe, self.recording, self.step):
            model.stop_training = True
        self.write_events()

    def diagnose(self, model: Any, final: bool) -> None:
        if self.recording is None:
            return
        self.guard.run(Part.WATCHDOG, self.watch.catch_up)
        stop = self.guard.run(Part.DIAGNOSIS, self.live.now, self.recording, self.step, final)
        if stop and model is not None:
            model.stop_training = True
        self.write_events()

    @disable_on_error(Part.WRITER)
    def write_events(self) -> None:
        if self.recording is not None:
            self.recording.write_events(self.step)

    @disable_on_error(Part.WRITER)
    def close_when_idle(self) -> None:
        """The fit is over (or retried): wait for the background writes, flush, and close the file
        once idle (see `Recording`). A failed write (disk full) surfaces here."""
        if self.recording is not None:
            self.recording.close_when_idle()
