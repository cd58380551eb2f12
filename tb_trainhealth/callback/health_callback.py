"""HealthCallback: records training health into TensorBoard event files and diagnoses it live.

The callback only routes Keras' hooks to its parts: `StepProbe` (values from inside the
step), `StepClock` (step time, memory), `ReadBack` (when rows come back to the host),
`RowRecorder` (rows into records), `Recording`
(event file and the online engine's copy), `FitChecks` (lint, activation probe),
`LiveDiagnosis` (rules while training), `crash_guard` (the exception that ends it) and
`StallWatchdog` (a step that never finishes).
"""

from __future__ import annotations

import atexit
import logging
import time
from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf

from tb_trainhealth.callback import fit_context
from tb_trainhealth.callback.baseline import compare_with_baseline
from tb_trainhealth.callback.frameworks.keras_private import fit_data_adapter
from tb_trainhealth.callback.frameworks.tested_versions import newer_than_tested_note
from tb_trainhealth.callback.frameworks.which_keras import (
    TfKerasCallbackProtocol,
    is_tf_keras,
    keras_of,
    steps_per_execution,
)
from tb_trainhealth.callback.lint.fit_checks import FitChecks
from tb_trainhealth.callback.lint.pipeline_lint import describe_input
from tb_trainhealth.callback.live_diagnosis import LiveDiagnosis
from tb_trainhealth.callback.multi_worker import replicas_per_worker, worker_role
from tb_trainhealth.callback.preflight.in_fit import preflight_in_fit
from tb_trainhealth.callback.preflight.run import PREFLIGHT_KERAS_3_ONLY
from tb_trainhealth.callback.probe_guard import ProbeGuard, disable_on_error, none_on_error, notice_once
from tb_trainhealth.callback.record.read_back import TF_KERAS_TIMED_CALLS, ReadBack, ring_capacity
from tb_trainhealth.callback.record.recording import Recording
from tb_trainhealth.callback.record.row_recorder import RowRecorder
from tb_trainhealth.callback.run_settings import run_settings
from tb_trainhealth.callback.step.build_before_trace import build_before_first_step
from tb_trainhealth.callback.step.input_probe import InputProbe, TfKerasInputProbe
from tb_trainhealth.callback.step.machine_load import OtherLoad
from tb_trainhealth.callback.step.memory import host_memory_limit_mb, host_memory_unavailable
from tb_trainhealth.callback.step.step_clock import StepClock
from tb_trainhealth.callback.step.step_probe import StepProbe
from tb_trainhealth.callback.step.tf_keras_step_probe import TfKerasStepProbe
from tb_trainhealth.callback.watch import crash_guard
from tb_trainhealth.callback.watch.stall_watchdog import watchdog_for
from tb_trainhealth.contract import tags
from tb_trainhealth.contract.events import OomEvent, PartOffEvent
from tb_trainhealth.contract.run_info import LayerInfo, RunInfo
from tb_trainhealth.contract.vocab import Part
from tb_trainhealth.findings import Finding, Severity

logger = logging.getLogger(__name__)


class HealthCallback(TfKerasCallbackProtocol, keras.callbacks.Callback):
    """Records health signals of the real training step and diagnoses them as training runs.

    Per step: batch loss, learning rate, global and per-layer gradient norms (from the
    gradients the optimizer applies, reduced inside the compiled step), per-layer weight
    norms, NaN/Inf counts in loss/gradients/weights, and wall time. Per epoch: every
    value in Keras' logs (loss, metrics, validation). Diagnoses run every
    `diagnose_every` steps and at epoch ends with the same rules as `tb-trainhealth
    diagnose`; each new warning or critical finding prints one line.

    Example:

    ```python
    from tb_trainhealth import HealthCallback

    model.fit(x, y, epochs=10, callbacks=[HealthCallback(log_dir="logs/run1")])
    # then: tensorboard --logdir logs   (Health tab)   or   tb-trainhealth diagnose logs
    ```

    Works with Keras 3 and with legacy Keras 2 (`tf_keras`, `TF_USE_LEGACY_KERAS=1`): which one
    is read from the model's class (`which_keras`), and this object answers either Keras'
    callback protocol. Under tf_keras' MultiWorkerMirroredStrategy only the chief writes the run
    (`multi_worker`).

    Args:
        log_dir: run directory for the event files (any `tf.io.gfile` path, e.g. gs://).
            Use the same `log_dir` as `keras.callbacks.TensorBoard`: it writes to
            `log_dir/train` and `log_dir/validation`, this callback to `log_dir` itself.
        diagnose_every: run the rule engine at most every this many steps, and within 0.5% of
            the training time (at once on a NaN/Inf; always when training ends).
        stop_on: "warning" or "critical" to stop training (after recording the diagnosis)
            when a finding of that severity or worse appears; None never stops. Findings
            about speed only (`input_bound`, `input_pipeline_config`) never stop a run.
        on_finding: called with each new `Finding` (warning or worse; again if it gets
            worse), e.g. to page yourself.
        verbose: print one line per new warning/critical finding.
        measure_input: time each step's wait for its batch (see `input_probe`); False
            leaves Keras' in-graph batch fetch untouched.
        preflight: at train start, run `tb_trainhealth.preflight` on the fit's first batches
            (a clone of the model; seconds) and record its findings before the first step.
        stall_after: seconds without a finished training step before the run counts as
            stalled (a hang: recorded at once with where each thread is, see
            `stall_watchdog`). None: the larger of 5 minutes and 20x the median step time;
            the fit's first step and each evaluation's first batch get 10 times as long.
        baseline: the log_dir of a known-good run. At the end of each fit this run is compared
            with it (as `tb-trainhealth compare` does: changed settings, noise-aware verdict,
            likely culprit); where it is worse, that is a `worse_than_baseline` finding like any
            other (printed, `on_finding`, `stop_on`, the Health tab and `diagnose` see it).
    """

    def __init__(
        self,
        log_dir: str,
        *,
        diagnose_every: int = 200,
        stop_on: str | None = None,
        on_finding: Callable[[Finding], Any] | None = None,
        verbose: bool = True,
        measure_input: bool = True,
        preflight: bool = False,
        stall_after: float | None = None,
        baseline: str | None = None,
    ):
        super().__init__()
        if diagnose_every < 1:
            raise ValueError(f"diagnose_every must be >= 1, got {diagnose_every}")
        self.log_dir = str(log_dir)
        self.measure_input = measure_input
        self.preflight = preflight
        self.baseline = None if baseline is None else str(baseline)
        self.guard = ProbeGuard(on_disable=self._on_disable, on_off=self._record_part_off)
        self._parts_off_early: list[PartOffEvent] = []  # went off before the event file was opened
        self.live = LiveDiagnosis(
            self.log_dir, diagnose_every, Severity.parse(stop_on) if stop_on else None, on_finding, verbose
        )
        self.oom_handled_by_caller = False  # set by tb_trainhealth.fit, which records OOMs itself
        self._recording: Recording | None = None
        self._rows: RowRecorder | None = None
        self._probe: StepProbe | None = None
        self._clock = StepClock(1, False, lambda err: None)
        self._other_load: OtherLoad | None = None  # how busy other processes keep the machine
        self._input = InputProbe(steps_per_execution=0)
        self._checks: FitChecks | None = None
        self._step = 0  # the last step recorded (steps go on across fits)
        self._base_step = 0  # the step this fit started at
        self._epoch = 0
        self._reads = ReadBack(self._clock, self._input, legacy=False)
        self._crashed = False
        self._retrying = False
        self._fit_callbacks: list[Any] = []  # the fit's other callbacks (what the user already does)
        self._watch = watchdog_for(
            stall_after,
            recording=lambda: self._recording,
            step=lambda: self._step,
            log_dir=self.log_dir,
            on_error=lambda err: self.guard.disable(Part.WATCHDOG, err),
        )

    @property
    def findings(self) -> list[Finding]:
        """The latest diagnosis of this run (all severities), worst first."""
        return self.live.findings

    # The settings live with the live diagnosis; they stay settable on the callback.
    diagnose_every = property(
        lambda self: self.live.diagnose_every, lambda self, v: setattr(self.live, "diagnose_every", v)
    )
    stop_on = property(lambda self: self.live.stop_on, lambda self, v: setattr(self.live, "stop_on", v))
    on_finding = property(lambda self: self.live.on_finding, lambda self, v: setattr(self.live, "on_finding", v))
    verbose = property(lambda self: self.live.verbose, lambda self, v: setattr(self.live, "verbose", v))

    # -- Keras hooks ----------------------------------------------------------------
    def on_train_begin(self, logs=None):
        self.guard.run(Part.WRITER, self._start)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        self._clock.epoch_begin()
        self._watch.at_step(self._step)
        self._watch.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        watch = self._watch  # the watchdog's only per-step cost: two stores
        watch.batch, watch.last = batch, self._clock.batch_begin()
        if self._probe is not None:
            self._probe.weights.call_began()
        if self._reads.call_began(self._probe):
            self._read_back_rows()
            self._diagnose_if_due()

    def on_test_begin(self, logs=None):
        self._count_steps()  # (a stall in validation is at the epoch's last step)
        self._watch.at_step(self._step)
        self._watch.test_begin()

    def on_test_batch_begin(self, batch, logs=None):
        watch = self._watch
        watch.test_batch, watch.last = batch, time.perf_counter()

    def on_test_end(self, logs=None):
        self._watch.test_end()

    def on_epoch_end(self, epoch, logs=None):
        self._clock.epoch_end()
        if self._probe is not None:
            self._probe.weights.epoch_ended()
        if self._reads.due(self._probe):
            self._read_back_rows()
        else:  # short epochs end more often than rows are due: only the step count is read,
            self._count_steps()
            if self._diagnosis_due():  # unless a diagnosis is about to judge every step so far
                self._read_back_rows()
        self._record_epoch(epoch, logs or {})
        if self._checks is not None:
            self._checks.measure_activations(self._step, epoch)
        self._diagnose_if_due()

    def on_train_end(self, logs=None):
        if self._checks is not None:
            self._checks.measure_activations(self._step, self._epoch, final=True)
        self._record_fit_end()
        if self.baseline is not None:
            self.guard.run(Part.BASELINE, self._compare_with_baseline)
        self._finish()

    @disable_on_error(Part.FIT_END)
    def _record_fit_end(self) -> None:
        """Epochs are counted as Keras does (`params["epochs"]` is the last epoch, initial_epoch included).
        Its own guard: a run without its end record would later read as `ended_abruptly`."""
        if self._recording is not None:
            self._count_steps()
            end = fit_context.fit_end(self._step, self.model, self._fit_callbacks, self._epoch + 1, self.params or {})
            self._recording.event(end)

    def _compare_with_baseline(self) -> None:
        """Read the baseline from disk and compare this run's in-memory copy with it (seconds)."""
        if self._recording is None or self.baseline is None:
            return
        self._read_back_rows()
        event = compare_with_baseline(self._recording.signals(), self.baseline, self._step)
        self._recording.event(event)

    # -- set-up and tear-down -------------------------------------------------------
    def _start(self) -> None:
        model = self.model
        recording = self._recording_started()
        recording.open()  # the previous fit's file goes on if it ended just now
        steps_per_call = steps_per_execution(model)
        memory_on = self.guard.enabled(Part.MEMORY)
        self._clock = StepClock(steps_per_call, memory_on, lambda e: self.guard.disable(Part.MEMORY, e))
        self._other_load = OtherLoad()
        legacy = is_tf_keras(model)
        self._say_what_cannot_run(model, legacy)
        timed_steps = steps_per_call if self.measure_input else 0  # (timed only at one step a call)
        self._input = TfKerasInputProbe(timed_steps, ring_capacity(1)) if legacy else InputProbe(timed_steps)
        # Steps continue across fits, even when a new optimizer (iterations back at 0) is compiled
        # in between, e.g. freeze / fit / unfreeze / compile / fit. After an OOM retry, the failed
        # attempt may have advanced `iterations` without completing a step: go on from ours.
        iterations = int(tf.convert_to_tensor(model.optimizer.iterations).numpy())
        self._base_step = self._step if self._retrying else max(iterations, self._step)
        self._step, self._retrying, self._crashed = self._base_step, False, False
        adapter = none_on_error(fit_data_adapter)
        build_before_first_step(model, adapter, self._input, legacy)
        self._install_probe(steps_per_call, TfKerasStepProbe if legacy else StepProbe)
        if self._probe is not None and self._probe.nan_replay_ruled_out is not None:
            self.guard.off(Part.NAN_ORIGIN, self._probe.nan_replay_ruled_out)
        self._wrap_step_functions()
        self._fit_callbacks = [c for c in none_on_error(fit_context.fit_callbacks) or [] if c is not self]
        recording.plain_scalars(*fit_context.plain_scalars_to_write(self._fit_callbacks, self.log_dir))
        self.guard.run(Part.WATCHDOG, self._watch.start, self._base_step)  # before anything slow: lint, first batches
        recording.run_info(self._base_step, self._run_info(steps_per_call, adapter))
        self.guard.run(Part.SETTINGS, self._record_settings, recording, steps_per_call, adapter)
        self._checks = FitChecks(model, self.guard, recording, self._base_step)
        self._checks.start(adapter, self._input)
        if self.preflight and legacy:
            notice_once(PREFLIGHT_KERAS_3_ONLY + " The other checks are on.")
            self.guard.off(Part.PREFLIGHT, "preflight needs a Keras 3 model; this one is tf_keras (legacy Keras 2)")
        elif self.preflight:
            self.guard.run(Part.PREFLIGHT, preflight_in_fit, model, adapter, recording, self._base_step)
        self._reads = ReadBack(self._clock, self._input, legacy)
        self.live.begin_fit()
        atexit.register(self._finish)

    def _recording_started(self) -> Recording:
        if self._recording is None:
            role = worker_role(self.model) if self.model is not None else None
            chief = role is None or role.chief  # (`multi_worker`: the chief writes the run; others only a crash)
            log_dir = self.log_dir if chief else role.own_log_dir(self.log_dir)
            self._recording = Recording(log_dir, on_disk=chief)
            for event in self._parts_off_early:
                self._recording.event(event)
            self._parts_off_early = []
            if role is not None:
                if self.live.stop_on is not None:
                    self.guard.off(Part.STOP_ON, "a multi-worker strategy: all workers must stop at the same step")
                self.live.on_worker(chief)
            self._rows = RowRecorder(self._recording)
        return self._recording

    def _run_info(self, steps_per_call: int, adapter: Any) -> RunInfo:
        model, probe = self.model, self._probe
        layout = probe.layout if probe is not None else None
        learning_rate, clips = fit_context.optimizer_settings(model.optimizer)
        return RunInfo(
            schema=tags.SCHEMA_VERSION,
            model=model.name,
            optimizer=type(model.optimizer).__name__,
            loss=fit_context.describe_loss(getattr(model, "loss", None)),
            loss_scale=probe.uses_loss_scale if probe is not None else False,
            layers=tuple(LayerInfo(n, p) for n, p in zip(layout.names, layout.num_params)) if layout else (),
            steps_per_execution=steps_per_call,
            input_wait_measured=self._input.enabled,
            input=describe_input(adapter) if adapter is not None else None,
            start_step=self._base_step,
            learning_rate=learning_rate,
            clips_gradients=clips,
            callbacks=fit_context.describe_callbacks(self._fit_callbacks),
            watchdog=self.guard.enabled(Part.WATCHDOG) and self._watch.armed,  # (never claimed when it failed)
            stall_after=self._watch.stall_after,
            replicas_per_worker=replicas_per_worker(model),
            planned_end_step=fit_context.planned_end_step(self._base_step, self.params or {}),
            host_memory_limit_mb=host_memory_limit_mb(),
        )

    def _say_what_cannot_run(self, model: Any, legacy: bool) -> None:
        """Once per process, a Keras newer than any tested (what may stop working says so itself);
        parts this platform rules out, recorded."""
        version = str(getattr(keras_of(model), "__version__", ""))
        note = newer_than_tested_note("tf_keras" if legacy else "keras", version)
        if note is not None:
            notice_once(note)
        why = host_memory_unavailable()
        if why is not None and self.guard.enabled(Part.MEMORY):
            self.guard.off(Part.HOST_MEMORY, why)

    def _record_part_off(self, part: str, reason: str, error: bool) -> None:
        """A part went off (`ProbeGuard`): the run says so from this step on, from any thread."""
        version = none_on_error(lambda: str(keras_of(self.model).__version__)) if self.model is not None else None
        event = PartOffEvent(self._step, str(part), reason, error, version)
        if self._recording is None:
            self._parts_off_early.append(event)
        else:
            self._recording.event(event)

    def _record_settings(self, recording: Recording, steps_per_call: int, adapter: Any) -> None:
        """Every setting a comparison with another run needs (`run_settings`), once per fit."""
        settings = run_settings(self.model, self.params or {}, self._fit_callbacks, adapter, steps_per_call)
        recording.run_settings(self._base_step, settings)

    @disable_on_error(Part.GRADIENTS)
    def _install_probe(self, steps_per_call: int, probe_class: type[StepProbe]) -> None:
        self._probe = probe_class.attach(self.model, capacity=ring_capacity(steps_per_call))
        self._probe.weights.begin_fit(steps_per_call, TF_KERAS_TIMED_CALLS if is_tf_keras(self.model) else 0)

    @disable_on_error(Part.CRASHES)
    def _wrap_step_functions(self) -> None:
        crash_guard.wrap_step_functions(self.model, self._input.call, self.record_crash)

    def record_crash(self, error: BaseException, phase: str = "training") -> None:
        """Record an exception that ends training (type, message, step), flushed at once."""
        if self._crashed:
            return
        recording = self._recording_started()  # (it may crash before training started: adapting the data)
        if self.oom_handled_by_caller and isinstance(error, tf.errors.ResourceExhaustedError):
            self._finish()  # tb_trainhealth.fit records this one as an `oom` event and retries
            return
        self._crashed = True
        try:
            recording.keep_on_disk()  # (a worker other than the chief records its own crash)
            self._read_back_rows()
            recording.event(crash_guard.crash_event(error, self._step + 1, self._epoch, phase))
            self._finish()  # diagnose, write, flush, and give the model back its own step
        except Exception as err:  # recording must never mask the user's real exception
            self.guard.disable(Part.CRASHES, err)

    def record_oom(
        self, epoch: int, batch_size: int | None, next_batch_size: int | None, memory_mb: float | None
    ) -> None:
        """Record one out-of-memory error (used by tb_trainhealth.fit before it retries or gives up)."""
        if self._recording is None:
            return
        self._retrying = next_batch_size is not None
        self._recording.event(OomEvent(self._step + 1, batch_size, next_batch_size, memory_mb, epoch))
        self._diagnose(final=False)
        self._close_when_idle()

    def _finish(self) -> None:
        atexit.unregister(self._finish)
        self.guard.run(Part.WATCHDOG, self._watch.stop)  # (a stall under way ends here)
        self._input.end_fit()
        if self._checks is not None:
            self._checks.finish()
        self._read_back_rows()
        self._diagnose(final=True)
        self.guard.run(Part.GRADIENTS, self._uninstall_probe)
        if self.model is not None:
            crash_guard.unwrap_step_functions(self.model)
        self._close_when_idle()

    @disable_on_error(Part.WRITER)
    def _close_when_idle(self) -> None:
        """The fit is over (or retried): wait for the background writes, flush, and close the file
        once idle (see `Recording`). A failed write (disk full) surfaces here."""
        if self._recording is not None:
            self._recording.close_when_idle()

    def _uninstall_probe(self, keep: bool = True) -> None:
        if self._probe is not None:
            probe, self._probe = self._probe, None
            probe.uninstall(keep)

    def _on_disable(self, probe: str) -> None:
        if probe == Part.GRADIENTS and self._probe is not None:
            try:
                self._uninstall_probe(keep=False)  # a probe that failed is not kept for the next fit
            finally:
                self._wrap_step_functions()  # uninstalling put Keras' own train function back

    # -- per step ---------------------------------------------------------------------
    @disable_on_error(Part.GRADIENTS)
    def _count_steps(self) -> None:
        """The current step, without reading the rows back (the next read-back writes them)."""
        if self._probe is not None:
            self._step = self._base_step + self._probe.ring.rows_written()

    @disable_on_error(Part.GRADIENTS)
    def _read_back_rows(self) -> None:
        step = self._reads.read(self._probe, self._rows, self._base_step, self._watch.add_step_times)
        if step is not None:
            self._step = step
        if self._probe is not None and self._probe.trace_error is not None:
            raise self._probe.trace_error  # a (re)trace of the step lost its probe: off, and said

    # -- per epoch ----------------------------------------------------------------------
    @disable_on_error(Part.EPOCH)
    def _record_epoch(self, epoch: int, logs: dict[str, Any]) -> None:
        values = fit_context.epoch_values(logs)
        if values and self._recording is not None:
            self._recording.epoch(self._step, epoch, values)
        busy = self._other_load.share() if self._other_load is not None else None
        if busy is not None and self._recording is not None:
            self._recording.machine_load(self._step, busy)

    # -- online diagnosis ---------------------------------------------------------------
    def _diagnosis_due(self) -> bool:
        return self._recording is not None and bool(
            self.guard.run(Part.DIAGNOSIS, self.live.due, self._recording, self._step)
        )

    def _diagnose_if_due(self) -> None:
        self.guard.run(Part.WATCHDOG, self._watch.catch_up)  # (not stalled: this thread is running)
        if self._recording is not None and self.guard.run(Part.DIAGNOSIS, self.live.maybe, self._recording, self._step):
            self.model.stop_training = True
        self._write_events()

    def _diagnose(self, final: bool) -> None:
        if self._recording is None:
            return
        self.guard.run(Part.WATCHDOG, self._watch.catch_up)
        stop = self.guard.run(Part.DIAGNOSIS, self.live.now, self._recording, self._step, final)
        if stop and self.model is not None:
            self.model.stop_training = True
        self._write_events()

    @disable_on_error(Part.WRITER)
    def _write_events(self) -> None:
        if self._recording is not None:
            self._recording.write_events(self._step)
