"""A watchdog thread that notices training which stops moving (a hang), while it hangs.

A blocked read in a generator, a deadlocked `py_function` or a collective waiting for a dead
peer raises nothing: the event files just stop. The training thread cannot report its own
hang, so a daemon thread looks every few seconds at when the last step finished. Once that is
longer than the allowance (`contract.stall`), it records a `stall` event at once, with the
phase the training thread is in and where every Python thread is, and a `resumed` event when a
step finishes again. While nothing else is written (compiling, a long validation, a stall) it
writes a heartbeat, so that readers can tell a live process from one that was killed.

Per step it costs the caller two attribute stores (`batch`, `last`); everything else runs on
its own thread, which makes no TensorFlow call itself (it reads no variable: a hung device
must not hang the watchdog) and hands its records to the event file's writer thread.

Usage (HealthCallback does all this; `HealthCallback(log_dir, stall_after=120)` sets the allowance):

```python
watchdog = StallWatchdog(stall_after=120, on_stall=print, on_resume=print)
watchdog.start(step=0)
for batch, data in enumerate(dataset):
    watchdog.batch, watchdog.last = batch, time.perf_counter()  # a step begins: the last one finished
    train_step(data)
watchdog.stop()
```
"""

from __future__ import annotations

import collections
import sys
import threading
import time
from collections.abc import Callable

import numpy as np

from tb_trainhealth.callback.record.recording import Recording
from tb_trainhealth.callback.watch.thread_places import (
    describe_place,
    runs_fit,
    seconds_text,
    thread_places,
    training_phase,
)
from tb_trainhealth.contract import stall
from tb_trainhealth.contract.events import FitEndEvent, ResumedEvent, StallEvent

# Look at most every POLL_SECONDS, and at least ten times per allowance (a stall is seen
# within a tenth of the allowance of beginning).
POLL_SECONDS = 5.0
POLLS_PER_ALLOWANCE = 10
# Step times kept for the median (the latest ones: a run's speed changes with its phase).
STEP_TIMES_KEPT = 1000
# How long `stop` waits for the thread (it may be writing a stall event to a slow disk).
STOP_WAIT_SECONDS = 1.0


class StallWatchdog:
    """One per callback; `start` at train begin, `stop` at train end or crash.

    The training thread's hooks set `last` (perf_counter() when the latest step or test batch
    began, i.e. the previous one finished), `batch` (steps finished in this epoch),
    `step_base` (steps finished before this epoch) and `evaluating`, `test_batch`.
    """

    def __init__(
        self,
        stall_after: float | None,
        on_stall: Callable[[StallEvent], None],
        on_resume: Callable[[ResumedEvent], None],
        on_quiet: Callable[[int, float], None] | None = None,
        seconds_since_write: Callable[[], float] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        on_fit_left: Callable[[int], None] | None = None,
    ):
        """on_quiet(step, seconds since the last step): write a heartbeat, called when
        `seconds_since_write()` reaches `contract.stall.heartbeat_seconds`. on_error: the
        thread failed (it stops; training goes on). on_fit_left(step): the training thread
        left `fit` without train end (Ctrl-C in a notebook, an exception in a callback): the
        watch ends there, and a live kernel is not a stalled run."""
        if stall_after is not None and not (isinstance(stall_after, (int, float)) and stall_after > 0):
            raise ValueError(f"stall_after must be a number of seconds > 0 (or None), got {stall_after!r}")
        self.stall_after = None if stall_after is None else float(stall_after)
        self._on_stall, self._on_resume, self._on_quiet = on_stall, on_resume, on_quiet
        self._seconds_since_write = seconds_since_write
        self._on_error = on_error
        self._on_fit_left = on_fit_left
        self._in_fit = False  # started inside Keras' fit (not a custom loop calling the hooks)
        self.last = time.perf_counter()
        self.batch = 0
        self.step_base = 0
        self.fit_start = 0
        self.epoch: int | None = None
        self.evaluating = False
        self.test_batch = -1
        self._step_times: collections.deque[float] = collections.deque(maxlen=STEP_TIMES_KEPT)
        self._warmup_left = stall.WARMUP_STEPS
        self._stalled_since: float | None = None  # `last` when the current stall began
        self._state = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._training_thread: int | None = None
        self.poll_seconds = min(POLL_SECONDS, stall.allowance(self.stall_after, None) / POLLS_PER_ALLOWANCE)
        self.heartbeat_seconds = stall.heartbeat_seconds(self.stall_after)

    # -- the training thread's side ----------------------------------------------------
    def start(self, step: int) -> None:
        """A fit begins at `step` (its first step gets FIRST_STEP_FACTOR allowances)."""
        self.stop()
        self.step_base, self.fit_start, self.batch = step, step, 0
        self.evaluating, self.test_batch = False, -1
        self.last = time.perf_counter()
        self._training_thread = threading.get_ident()
        self._in_fit = runs_fit(sys._getframe())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(self._stop,), name="tb-trainhealth-watchdog")
        self._thread.daemon = True
        self._thread.start()

    def at_step(self, step: int) -> None:
        """An epoch boundary: `step` steps are done (exactly; within an epoch, Keras' batch index counts)."""
        self.step_base, self.batch = max(step, self.step), 0  # (the hooks' count, if `step` lags)

    def test_begin(self) -> None:
        self.evaluating, self.test_batch, self.last = True, -1, time.perf_counter()

    def test_end(self) -> None:
        self.evaluating, self.last = False, time.perf_counter()

    def add_step_times(self, step_ms: np.ndarray) -> None:
        """Measured step times (ms, NaN where unknown), per read-back window: the median sets the allowance."""
        times = np.asarray(step_ms, np.float64)
        times = times[np.isfinite(times)]
        skip = min(self._warmup_left, len(times))
        self._warmup_left -= skip
        self._step_times.extend(times[skip:].tolist())

    def stop(self) -> None:
        """Stop the thread; a stall still under way ends here (`resumed` with ended=True)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        thread.join(STOP_WAIT_SECONDS)
        if not self._state.acquire(timeout=STOP_WAIT_SECONDS):
            return  # the thread is stuck writing: it is a daemon, let it be
        try:
            since, last = self._stalled_since, self.last
            if since is not None:  # (steps may have finished since the thread's last look)
                self._stalled_since = None
                seconds = (last if last != since else time.perf_counter()) - since
                self._on_resume(ResumedEvent(step=self.step, seconds=round(seconds, 3), ended=last == since))
        finally:
            self._state.release()

    @property
    def armed(self) -> bool:
        """The thread is watching now (started, not stopped, not failed): what the run info claims."""
        thread = self._thread
        return thread is not None and thread.is_alive() and not self._stop.is_set()

    # -- the watchdog's side -------------------------------------------------------------
    @property
    def step(self) -> int:
        """Steps finished so far (as far as the hooks tell)."""
        return max(0, int(self.step_base) + max(int(self.batch), 0))

    @property
    def first_step(self) -> bool:
        """The fit's first step, or an evaluation's first batch, is under way (tracing, compiling)."""
        return self.test_batch <= 0 if self.evaluating else self.step <= self.fit_start

    @property
    def stalled(self) -> bool:
        return self._stalled_since is not None

    def allowance(self) -> float:
        """Seconds without progress that count as a stall now."""
        median = stall.median_step_seconds(self._step_times, warmup=0) if self.stall_after is None else None
        base = stall.allowance(self.stall_after, median)
        return base * stall.FIRST_STEP_FACTOR if self.first_step else base

    def _run(self, stop: threading.Event) -> None:
        try:
            while not stop.wait(self.poll_seconds):
                self.check()
        except Exception as err:  # never the user's problem: said once by the owner, and the watch ends
            if self._on_error is not None:
                self._on_error(err)

    def catch_up(self) -> None:
        """Record a resume the thread has not seen yet (the training thread calls this before
        it diagnoses: a step just finished, so the run is not stalled, whatever the log says)."""
        if self._stalled_since is not None:
            with self._state:
                self._resume_if_moved()

    def _resume_if_moved(self) -> bool:
        since, last = self._stalled_since, self.last
        if since is None or last == since:
            return False
        self._stalled_since = None
        self._on_resume(ResumedEvent(step=self.step, seconds=round(last - since, 3)))
        return True

    def check(self) -> None:
        """One look: a stall begins, a stall ends, or a heartbeat is due."""
        with self._state:
            if self._left_fit():
                return
            if not self._resume_if_moved() and self._stalled_since is None:
                last, now, allowance = self.last, time.perf_counter(), self.allowance()
                if now - last > allowance:
                    self._stalled_since = last
                    self._on_stall(self._stall_event(now - last, allowance))
        quiet, since_write = self._on_quiet, self._seconds_since_write
        if quiet is not None and since_write is not None and since_write() >= self.heartbeat_seconds:
            quiet(self.step, time.perf_counter() - self.last)

    def _left_fit(self) -> bool:
        """The training thread is no longer inside fit, and no hook said so: stop watching."""
        if not self._in_fit or self._training_thread is None:
            return False
        if runs_fit(sys._current_frames().get(self._training_thread)):
            return False
        self._stop.set()
        if self._stalled_since is not None:
            seconds, self._stalled_since = time.perf_counter() - self._stalled_since, None
            self._on_resume(ResumedEvent(step=self.step, seconds=round(seconds, 3), ended=True))
        if self._on_fit_left is not None:
            self._on_fit_left(self.step)
        return True

    def _stall_event(self, seconds: float, allowance: float) -> StallEvent:
        frames = sys._current_frames()
        training = frames.get(self._training_thread) if self._training_thread is not None else None
        phase, callback = training_phase(training, self.evaluating)
        return StallEvent(
            step=self.step,
            seconds=round(seconds, 3),
            allowance=round(allowance, 3),
            phase=phase,
            callback=callback,
            first_step=self.first_step,
            epoch=self.epoch,
            threads=thread_places(frames, self._training_thread),
        )


class StallReports:
    """What the watchdog reports goes into the run's Recording, from the watchdog's thread and
    flushed at once (the training thread, which writes everything else, may be the one that
    hangs), and a stall and a resume say one line on stderr."""

    def __init__(self, recording: Callable[[], Recording | None], step: Callable[[], int], log_dir: str):
        """recording, step: the callback's Recording (None before training) and its last step."""
        self._recording, self._step, self._log_dir = recording, step, log_dir

    def stall(self, event: StallEvent) -> None:
        recording = self._recording()
        if recording is not None:
            recording.write_now(event)
        print(
            f"tb-trainhealth: no training step finished for {seconds_text(event.seconds)} (step {event.step}), "
            f"{describe_place(event)}. Stalled? Run: tb-trainhealth diagnose {self._log_dir}",
            file=sys.stderr,
            flush=True,
        )

    def resume(self, event: ResumedEvent) -> None:
        recording = self._recording()
        if recording is not None:
            recording.write_now(event)
        if not event.ended:
            print(f"tb-trainhealth: training resumed after {seconds_text(event.seconds)}", file=sys.stderr, flush=True)

    def fit_left(self, step: int) -> None:
        """fit() ended without train end or a recorded crash (Ctrl-C, an exception in a
        callback): its end, so that the run does not read as killed later."""
        recording = self._recording()
        if recording is not None:
            recording.write_now(FitEndEvent(step=max(step, self._step()), stopped_early=True))

    def quiet(self, step: int, seconds_since_step: float) -> None:
        recording = self._recording()
        if recording is not None:
            recording.alive(max(step, self._step()), seconds_since_step)

    def seconds_since_write(self) -> float:
        recording = self._recording()
        return recording.seconds_since_write() if recording is not None else 0.0


def watchdog_for(
    stall_after: float | None,
    recording: Callable[[], Recording | None],
    step: Callable[[], int],
    log_dir: str,
    on_error: Callable[[BaseException], None],
) -> StallWatchdog:
    """The watchdog of a HealthCallback: its reports go to the callback's Recording."""
    reports = StallReports(recording, step, log_dir)
    return StallWatchdog(
        stall_after,
        on_stall=reports.stall,
        on_resume=reports.resume,
        on_quiet=reports.quiet,
        seconds_since_write=reports.seconds_since_write,
        on_error=on_error,
        on_fit_left=reports.fit_left,
    )
