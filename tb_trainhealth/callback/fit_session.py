"""One `fit` of a HealthCallback: the probes it installs and their state, from train begin to end.

As Keras' own callbacks reset their per-fit state in `on_train_begin`, the callback makes a new
session there and drops it once the fit is over (train end, a crash, exit). The session owns
what lives for one fit only: the step probe (`StepProbe`) and the step functions it wraps, the
step clock, the input probe, the fit's checks (`FitChecks`) and when rows are read back
(`ReadBack`). What goes on across fits (the event file, the step count, the watchdog, the
diagnoses) is the `RunRecord`'s, which the session moves forward.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from tb_trainhealth.callback import fit_context
from tb_trainhealth.callback.baseline import BaselineWatch
from tb_trainhealth.callback.frameworks.keras_private import fit_data_adapter
from tb_trainhealth.callback.frameworks.tested_versions import newer_than_tested_note
from tb_trainhealth.callback.frameworks.which_keras import is_tf_keras, keras_of, steps_per_execution
from tb_trainhealth.callback.lint.fit_checks import FitChecks
from tb_trainhealth.callback.lint.pipeline_lint import describe_input
from tb_trainhealth.callback.multi_worker import replicas_per_worker
from tb_trainhealth.callback.preflight.in_fit import preflight_in_fit
from tb_trainhealth.callback.preflight.run import PREFLIGHT_KERAS_3_ONLY
from tb_trainhealth.callback.probe_guard import ProbeGuard, disable_on_error, none_on_error, notice_once
from tb_trainhealth.callback.record.read_back import TF_KERAS_TIMED_CALLS, ReadBack, ring_capacity
from tb_trainhealth.callback.record.recording import Recording
from tb_trainhealth.callback.run_record import RunRecord
from tb_trainhealth.callback.run_settings import run_settings
from tb_trainhealth.callback.step.build_before_trace import build_before_first_step
from tb_trainhealth.callback.step.input_probe import InputProbe, TfKerasInputProbe
from tb_trainhealth.callback.step.machine_load import OtherLoad
from tb_trainhealth.callback.step.memory import host_memory_limit_mb, host_memory_unavailable
from tb_trainhealth.callback.step.step_clock import StepClock
from tb_trainhealth.callback.step.step_probe import StaleTrainStep, StepProbe
from tb_trainhealth.callback.step.tf_keras_step_probe import TfKerasStepProbe
from tb_trainhealth.callback.trials.at_fit_end import TrialSetup, setup_at_start, why_no_trials
from tb_trainhealth.callback.watch import crash_guard
from tb_trainhealth.contract import tags
from tb_trainhealth.contract.run_info import LayerInfo, RunInfo
from tb_trainhealth.contract.vocab import Part


class FitSession:
    """Made at train begin (`start` sets it up), closed when the fit is over (`close`). Until
    `start` has run its parts are inert stand-ins (no probe, no checks): a hook after a failed
    start measures nothing, and breaks nothing."""

    def __init__(
        self,
        model: Any,
        params: dict[str, Any],
        run: RunRecord,
        guard: ProbeGuard,
        *,
        owner: Any,
        measure_input: bool,
        preflight: bool,
        on_crash: Callable[[BaseException, str], None],
        baseline: str | None = None,
        trials: bool = True,
    ):
        """owner: the callback (not one of the fit's other callbacks); on_crash(error, phase):
        records an exception that ends training; baseline: a known-good run's log_dir to compare with."""
        self.model, self.params, self.run, self.guard = model, params, run, guard
        self.watch = run.watch
        self._owner, self._measure_input, self._preflight, self._on_crash = owner, measure_input, preflight, on_crash
        self.probe: StepProbe | None = None
        self.clock = StepClock(1, False, lambda err: None)
        self.other_load: OtherLoad | None = None  # how busy other processes keep the machine
        self.input = InputProbe(steps_per_execution=0)
        self.checks: FitChecks | None = None
        self.reads = ReadBack(self.clock, self.input, legacy=False)
        self.base_step = run.step  # the step this fit started at
        self.fit_callbacks: list[Any] = []  # the fit's other callbacks (what the user already does)
        self.baseline = BaselineWatch(baseline) if baseline is not None else None
        self._metric_classes: dict[str, str] | None = None
        self._trials = trials
        self.trial_setup: TrialSetup | None = None  # kept for trials at the fit's end (callback/trials/)
        self.trials_ruled_out: str | None = None  # why this model's fit cannot be tried

    # -- set-up ---------------------------------------------------------------------------
    def start(self) -> bool:
        """Set up every part for this fit, in order; True once all are (see `ProbeGuard` for a part
        that fails). Call it from `on_train_begin` through the guard only: fit's frame (its data,
        its callbacks) is looked for up the stack, at most `keras_private.FIT_FRAME_DEPTH` frames away."""
        model, run, guard = self.model, self.run, self.guard
        recording = run.opened(model)
        recording.open()  # the previous fit's file goes on if it ended just now
        steps_per_call = steps_per_execution(model)
        self.clock = StepClock(steps_per_call, guard.enabled(Part.MEMORY), lambda e: guard.disable(Part.MEMORY, e))
        self.other_load = OtherLoad()
        legacy = is_tf_keras(model)
        self._say_what_cannot_run(legacy)
        timed_steps = steps_per_call if self._measure_input else 0  # (timed only at one step a call)
        self.input = TfKerasInputProbe(timed_steps, ring_capacity(1)) if legacy else InputProbe(timed_steps)
        # Steps continue across fits, even when a new optimizer (iterations back at 0) is compiled
        # in between, e.g. freeze / fit / unfreeze / compile / fit. After an OOM retry, the failed
        # attempt may have advanced `iterations` without completing a step: go on from ours.
        iterations = int(tf.convert_to_tensor(model.optimizer.iterations).numpy())
        self.base_step = run.step if run.retrying else max(iterations, run.step)
        run.step, run.retrying = self.base_step, False
        adapter = none_on_error(fit_data_adapter)
        build_before_first_step(model, adapter, self.input, legacy)
        self._install_probe(steps_per_call, TfKerasStepProbe if legacy else StepProbe)
        if self.probe is not None and self.probe.nan_replay_ruled_out is not None:
            guard.off(Part.NAN_ORIGIN, self.probe.nan_replay_ruled_out)
        self._wrap_step_functions()
        self.fit_callbacks = [c for c in none_on_error(fit_context.fit_callbacks) or [] if c is not self._owner]
        recording.plain_scalars(*fit_context.plain_scalars_to_write(self.fit_callbacks, run.log_dir))
        guard.run(Part.WATCHDOG, self.watch.start, self.base_step)  # before anything slow: lint, first batches
        recording.run_info(self.base_step, self._run_info(steps_per_call, adapter))
        guard.run(Part.SETTINGS, self._record_settings, recording, steps_per_call, adapter)
        self.checks = FitChecks(model, guard, recording, self.base_step)
        self.checks.start(adapter, self.input)
        if self._preflight and legacy:
            notice_once(PREFLIGHT_KERAS_3_ONLY + " The other checks are on.")
            guard.off(Part.PREFLIGHT, "preflight needs a Keras 3 model; this one is tf_keras (legacy Keras 2)")
        elif self._preflight:
            guard.run(Part.PREFLIGHT, preflight_in_fit, model, adapter, recording, self.base_step)
        self.reads = ReadBack(self.clock, self.input, legacy)
        if self._trials:
            self.trials_ruled_out = guard.run(Part.TRIALS, why_no_trials, model)
            if self.trials_ruled_out is None:
                self.trial_setup = guard.run(Part.TRIALS, setup_at_start, model, adapter, self.base_step)
        run.live.begin_fit()
        return True

    def _say_what_cannot_run(self, legacy: bool) -> None:
        """Once per process, a Keras newer than any tested (what may stop working says so itself);
        parts this platform rules out, recorded."""
        version = str(getattr(keras_of(self.model), "__version__", ""))
        note = newer_than_tested_note("tf_keras" if legacy else "keras", version)
        if note is not None:
            notice_once(note)
        why = host_memory_unavailable()
        if why is not None and self.guard.enabled(Part.MEMORY):
            self.guard.off(Part.HOST_MEMORY, why)

    def _run_info(self, steps_per_call: int, adapter: Any) -> RunInfo:
        model, probe = self.model, self.probe
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
            input_wait_measured=self.input.enabled,
            input=describe_input(adapter) if adapter is not None else None,
            start_step=self.base_step,
            learning_rate=learning_rate,
            clips_gradients=clips,
            callbacks=fit_context.describe_callbacks(self.fit_callbacks),
            watchdog=self.guard.enabled(Part.WATCHDOG) and self.watch.armed,  # (never claimed when it failed)
            stall_after=self.watch.stall_after,
            replicas_per_worker=replicas_per_worker(model),
            planned_end_step=fit_context.planned_end_step(self.base_step, self.params),
            host_memory_limit_mb=host_memory_limit_mb(),
        )

    def _record_settings(self, recording: Recording, steps_per_call: int, adapter: Any) -> None:
        """Every setting a comparison with another run needs (`run_settings`), once per fit."""
        settings = run_settings(self.model, self.params, self.fit_callbacks, adapter, steps_per_call)
        recording.run_settings(self.base_step, settings)

    @disable_on_error(Part.GRADIENTS)
    def _install_probe(self, steps_per_call: int, probe_class: type[StepProbe]) -> None:
        try:
            self.probe = probe_class.attach(self.model, capacity=ring_capacity(steps_per_call))
        except StaleTrainStep as stale:  # a new trace would change what this fit trains: no probe
            notice_once(f"tb-trainhealth: {stale}; per-step gradients are not recorded for this fit.")
            self.guard.off(Part.GRADIENTS, str(stale))
            return
        self.probe.weights.begin_fit(steps_per_call, TF_KERAS_TIMED_CALLS if is_tf_keras(self.model) else 0)

    @disable_on_error(Part.CRASHES)
    def _wrap_step_functions(self) -> None:
        crash_guard.wrap_step_functions(self.model, self.input.call, self._on_crash)

    def _uninstall_probe(self, keep: bool = True) -> None:
        if self.probe is not None:
            probe, self.probe = self.probe, None
            probe.uninstall(keep)

    def drop_probe(self) -> None:
        """The gradients part went off: the probe is removed, not kept for the next fit; removing
        it put Keras' own train function back, so that is wrapped again (crashes)."""
        if self.probe is None:
            return
        try:
            self._uninstall_probe(keep=False)
        finally:
            self._wrap_step_functions()

    # -- Keras' hooks, within the fit ----------------------------------------------------
    def batch_begin(self, batch: int) -> None:
        watch = self.watch  # the watchdog's only per-step cost: two stores
        watch.batch, watch.last = batch, self.clock.batch_begin()
        probe = self.probe
        if probe is not None:
            probe.weights.call_began()
        if self.reads.call_began(probe):
            self.read_back_rows()
            self.run.diagnose_if_due(self.model)

    def epoch_begin(self, epoch: int) -> None:
        self.run.epoch = epoch
        self.clock.epoch_begin()
        self.watch.at_step(self.run.step)
        self.watch.epoch = epoch

    def epoch_end(self, epoch: int, logs: dict[str, Any]) -> None:
        run = self.run
        self.clock.epoch_end()
        if self.probe is not None:
            self.probe.weights.epoch_ended()
        if self.reads.due(self.probe):
            self.read_back_rows()
        else:  # short epochs end more often than rows are due: only the step count is read,
            self.count_steps()
            if run.diagnosis_due():  # unless a diagnosis is about to judge every step so far
                self.read_back_rows()
        self._record_epoch(epoch, logs)
        if self.baseline is not None:
            self.guard.run(Part.BASELINE_SO_FAR, self._compare_so_far)
        if self.checks is not None:
            self.checks.measure_activations(run.step, epoch)
        run.diagnose_if_due(self.model)

    def end(self) -> None:
        """Train end: the activations as the last diagnosis will judge them, the fit's end record,
        and the comparison with a known-good run."""
        if self.checks is not None:
            self.checks.measure_activations(self.run.step, self.run.epoch, final=True)
        self._record_fit_end()
        if self.baseline is not None:
            self.guard.run(Part.BASELINE, self._compare_with_baseline)

    def close(self) -> None:
        """The fit is over (train end, a crash, exit): the last rows are read, and the model gets
        Keras' own train function back (and its probe kept for its next fit)."""
        self.input.end_fit()
        if self.checks is not None:
            self.checks.finish()
        self.read_back_rows()
        self.guard.run(Part.GRADIENTS, self._uninstall_probe)
        crash_guard.unwrap_step_functions(self.model)

    # -- rows, epochs, the fit's end ------------------------------------------------------
    @disable_on_error(Part.GRADIENTS)
    def count_steps(self) -> None:
        """The current step, without reading the rows back (the next read-back writes them)."""
        if self.probe is not None:
            self.run.step = self.base_step + self.probe.ring.rows_written()

    @disable_on_error(Part.GRADIENTS)
    def read_back_rows(self) -> None:
        run = self.run
        step = self.reads.read(self.probe, run.rows, self.base_step, self.watch.add_step_times)
        if step is not None:
            run.step = step
        if self.probe is not None and self.probe.trace_error is not None:
            raise self.probe.trace_error  # a (re)trace of the step lost its probe: off, and said

    @disable_on_error(Part.EPOCH)
    def _record_epoch(self, epoch: int, logs: dict[str, Any]) -> None:
        recording, step = self.run.recording, self.run.step
        values = fit_context.epoch_values(logs)
        if values and recording is not None:
            recording.epoch(step, epoch, values)
        busy = self.other_load.share() if self.other_load is not None else None
        if busy is not None and recording is not None:
            recording.machine_load(step, busy)

    @disable_on_error(Part.FIT_END)
    def _record_fit_end(self) -> None:
        """Epochs are counted as Keras does (`params["epochs"]` is the last epoch, initial_epoch included).
        Its own guard: a run without its end record would later read as `ended_abruptly`."""
        recording = self.run.recording
        if recording is not None:
            self.count_steps()
            run = self.run
            recording.event(fit_context.fit_end(run.step, self.model, self.fit_callbacks, run.epoch + 1, self.params))

    def _compare_so_far(self) -> None:
        """At an epoch end: the run so far against the baseline at the same step (the baseline is
        read once, at the first); recorded only when that verdict changes."""
        recording, watch = self.run.recording, self.baseline
        if recording is not None and watch is not None:
            if self._metric_classes is None:  # resolved at the first step; the same all fit
                self._metric_classes = fit_context.metric_classes(self.model)
            event = watch.epoch_end(recording.signals(), self.run.step, self._metric_classes)
            if event is not None:
                recording.event(event)

    def _compare_with_baseline(self) -> None:
        """Compare this run's in-memory copy with the baseline, whole (seconds): the final verdict."""
        recording, watch = self.run.recording, self.baseline
        if recording is None or watch is None:
            return
        self.read_back_rows()
        recording.event(watch.end(recording.signals(), self.run.step))
